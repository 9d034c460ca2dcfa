"""The FEMNIST study (Ryu & Kim §6.2) end to end in a reduced form on the shared LEAF sample."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[3]
CASES = REPO / "cases"


def femnist_dir() -> Path:
    for candidate in (REPO / ".." / "shared" / "data" / "femnist_leaf", Path("/work/shared/data/femnist_leaf")):
        if candidate.is_dir():
            return candidate.resolve()
    pytest.skip("the FEMNIST LEAF sample (../shared/data/femnist_leaf) is not present")


def reduced_study(tmp_path: Path, data: Path) -> Path:
    from cvxdp_models.logistic.data import load_femnist

    # 3 writers: their own public count, not the 10 writers' 1527 (a wrong count is refused since issue 36)
    count = sum(len(y) for _, y in load_femnist(data, max_users=3).train)
    case = tmp_path / "femnist.toml"
    # the authors' schedule (the case's default is rho = eta = "auto"): its small rho makes OutPert's noise leave the box
    case.write_text((CASES / "femnist_fl.toml").read_text().replace("agents = 10 ", "agents = 3 ")
                    .replace("total_samples = 1527 ", f"total_samples = {count} ")
                    .replace('name = "ladmm"\n', 'name = "ladmm"\nrho = 0.002\n'
                             'eta = { kind = "step", c1 = 0.02, c2 = 0.01, period = 10 }\n'))
    study = tmp_path / "study.toml"
    study.write_text((CASES / "study_femnist.toml").read_text()
                     .replace('case = "femnist_fl.toml"', f'case = "{case.as_posix()}"')
                     .replace('mechanisms = ["ObjL", "ObjG", "OutL", "OutG"]', 'mechanisms = ["ObjG", "OutG"]')
                     .replace("epsilons = [0.1, 1.0, 10.0]", "epsilons = [1.0]")
                     .replace("local_updates = [1, 5]", "local_updates = [1, 2]")
                     .replace("rounds = 30", "rounds = 3"))
    return study


def test_femnist_case_needs_a_data_directory():
    from cvxdp.cli.main import cli

    res = CliRunner().invoke(cli, ["run", str(CASES / "femnist_fl.toml"), "--rounds", "1"])
    assert res.exit_code != 0 and "--data" in res.output


def test_femnist_study_reduced(tmp_path):
    from cvxdp.cli.main import cli

    data = femnist_dir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = CliRunner().invoke(cli, ["study", str(reduced_study(tmp_path, data)), "--data", str(data), "--out",
                                       str(tmp_path / "out"), "--no-progress", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1])["runs"] == 2 * 2 + 2
    out = tmp_path / "out"
    results = pd.read_csv(out / "results.csv")
    private = results[results["mechanism"] != "none"]
    assert results["test_error"].between(0, 1).all() and results["train_cost"].gt(0).all()
    assert private.loc[private["mechanism"] == "ObjG", "max_violation"].max() == 0.0   # ObjPert stays in the box
    assert private.loc[private["mechanism"] == "OutG", "max_violation"].min() > 0.0    # OutPert leaves it
    assert (private["eps_basic"] == 3 * private["local_updates"] * private["epsilon"]).all()
    for name in ("noise_vs_epsilon.png", "test_error_vs_epsilon.png", "train_cost_vs_epsilon.png",
                 "test_error_vs_total_epsilon.png", "report.md"):
        assert (out / name).exists(), name
    report = (out / "report.md").read_text()
    assert "ObjPert was lower in" in report and "By test error ObjPert was lower in" in report
