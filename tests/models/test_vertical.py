"""Vertical partitions, loaders, baselines, the ``vertical`` template, the sharing study and its CLI path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cvxdp
from cvxdp import build_model
from cvxdp.errors import ConfigError
from cvxdp_models.vertical import (
    PAPER_SPLITS,
    central_optimum,
    column_blocks,
    load_libsvm,
    load_vertical,
    make_parties,
    make_vertical_data,
    normalize_blocks,
    vertical_baselines,
)

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "cases"


def write_libsvm(path: Path, n: int, d: int, seed: int, rule_seed: int = 0) -> Path:
    """A synthetic a9a-like file: sparse binary features, labels -1/+1 from a linear rule (shared by files with
    the same ``rule_seed``)."""
    w = np.random.default_rng(rule_seed).normal(size=d)
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        cols = np.sort(rng.choice(d, size=8, replace=False))
        label = 1 if w[cols].sum() + 0.3 * rng.normal() > 0 else -1
        lines.append(f"{label:+d} " + " ".join(f"{c + 1}:1" for c in cols))
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- splits
def test_paper_splits_as_column_ranges():
    a9a = column_blocks(123, "a9a")
    assert [len(b) for b in a9a] == [66, 57] and a9a[1][0] == 66
    gis = column_blocks(5000, "gisette")
    assert [len(b) for b in gis] == [2000, 2000, 1000] and gis[2][0] == 4000
    assert [len(b) for b in column_blocks(123, "auto")] == PAPER_SPLITS["a9a"]
    assert [len(b) for b in column_blocks(5000, "auto")] == PAPER_SPLITS["gisette"]
    assert [len(b) for b in column_blocks(30, "auto", dataset="breast_cancer")] == [15, 15]
    assert [len(b) for b in column_blocks(7, "halves")] == [4, 3]
    ranges = column_blocks(10, [[0, 3], [3, 10]])
    assert ranges[0].tolist() == [0, 1, 2] and len(ranges[1]) == 7
    explicit = column_blocks(4, [[0, 2, 3], [1]])
    assert explicit[0].tolist() == [0, 2, 3]
    for bad in ([5, 6], [[0, 3], [2, 10]], "nope", []):
        with pytest.raises(ConfigError):
            column_blocks(10, bad)


def test_normalize_blocks():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    a[0] = 0.0
    pa, pb = normalize_blocks([a, b], "party")
    assert np.allclose(np.linalg.norm(pa[1:], axis=1), 1.0) and np.all(pa[0] == 0)
    sa, sb = normalize_blocks([a, b], "sample")
    assert np.allclose(np.linalg.norm(np.hstack([sa, sb]), axis=1)[1:], 1.0)
    assert np.all(np.linalg.norm(sa, axis=1) <= 1 + 1e-12)
    with pytest.raises(ConfigError):
        normalize_blocks([a], "max")


# --------------------------------------------------------------------------- loaders
def test_libsvm_loader_and_a9a_split(tmp_path):
    path = write_libsvm(tmp_path / "a9a", 200, 123, seed=1)
    X, y = load_libsvm(path, n_features=123)
    assert X.shape == (200, 123) and set(np.unique(y)) == {-1.0, 1.0}
    test = write_libsvm(tmp_path / "a9a.t", 50, 120, seed=2)  # a9a.t lacks the last features: padded to 123
    data = make_vertical_data("libsvm", path=path, test_path=test, n_features=123)
    assert data.info["blocks"] == [66, 57] and data.X_test.shape == (50, 123)
    for block in data.train:
        norms = np.linalg.norm(block, axis=1)
        assert np.all((np.abs(norms - 1) < 1e-12) | (norms == 0))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_libsvm(tmp_path / "missing")
    (tmp_path / "bad").write_text("+1 1:1\n+1 2:1\n")
    with pytest.raises(ConfigError, match="two"):
        load_libsvm(tmp_path / "bad")


def test_bundled_data_sets():
    X, y, Xt, yt = load_vertical("digits")
    assert X.shape[1] == 64 and set(np.unique(y)) == {-1.0, 1.0} and len(yt) > 0
    d = make_vertical_data("digits")
    assert d.info["blocks"] == [32, 32]
    bc = make_vertical_data("breast_cancer", blocks=[10, 10, 10], names=["a", "b", "c"])
    assert [p.name for p in make_parties(bc, bound=5.0)] == ["a", "b", "c"]
    with pytest.raises(ConfigError, match="dataset"):
        load_vertical("mnist")


def test_baselines_bracket_the_shared_model():
    data = make_vertical_data("breast_cancer")
    base = vertical_baselines(data, 1e-3)
    assert base["all_features"]["test_logloss"] < base["party1_only"]["test_logloss"]
    assert base["all_features"]["coef"].shape == (30,) and base["party1_only"]["coef"].shape == (15,)
    ref = central_optimum(data, 1e-3, bound=60.0)
    assert ref["status"] == "optimal"
    assert ref["objective"] == pytest.approx(base["all_features"]["train_objective"], rel=1e-6)
    lbfgs = central_optimum(data, 1e-3, solver="LBFGS")
    assert lbfgs["objective"] == pytest.approx(ref["objective"], rel=1e-7)
    stopped = central_optimum(data, 1e-3, solver="LBFGS", time_limit=1e-12)  # the first iteration passes it
    assert stopped["status"] == "time limit (1e-12 s)" and stopped["objective"] > lbfgs["objective"]


# --------------------------------------------------------------------------- template, CLI
def test_vertical_template_build_evaluate_central():
    inst = build_model("vertical", {"dataset": "breast_cancer", "bound": 60.0}, base_dir=CASES)
    assert [type(a) for a in inst.agents] == [cvxdp.VerticalParty] * 2
    assert inst.agents[0].holds_labels and not inst.agents[1].holds_labels
    res = cvxdp.solve(inst.agents, algorithm=cvxdp.ADMMSharing(rho=0.25 / 426, lam=1e-3, epochs=60))
    ev = inst.evaluate(res)
    ref = inst.central()
    assert ev["train_objective"] == pytest.approx(ref["objective"], rel=1e-3)
    assert ev["baseline_all_test_logloss"] < ev["test_logloss"] + 1e-3 < ev["baseline_party1_test_logloss"]
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) .* in \[model\] of the vertical template. Allowed: "):
        build_model("vertical", {"datset": "x"}, base_dir=CASES)


@pytest.mark.filterwarnings("ignore:Assumption 1.1")
def test_cli_run_and_central_on_the_case(tmp_path):
    from cvxdp.cli.main import cli

    runner = CliRunner()
    out = runner.invoke(cli, ["run", str(CASES / "sharing_breast_cancer.toml"), "--out", str(tmp_path / "r"),
                              "--no-progress", "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["rounds"] == 60 and summary["test_logloss"] < summary["baseline_party1_test_logloss"]
    assert (tmp_path / "r" / "history.csv").exists()
    out = runner.invoke(cli, ["run", "sharing_breast_cancer", "--algorithm", "sharing", "--rounds", "3",
                              "--mechanism", "OutG", "--epsilon", "0.5", "--out", str(tmp_path / "p"), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["rounds"] == 3 and summary["privacy"]["basic"][0] == pytest.approx(1.5)
    out = runner.invoke(cli, ["central", "sharing_breast_cancer", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout.strip().splitlines()[-1])["status"] == "optimal"


# --------------------------------------------------------------------------- the study
def test_sharing_study_writes_tables_figures_report(tmp_path):
    from cvxdp.studies.sharing import run_sharing_study

    info = run_sharing_study(CASES / "study_sharing.toml", tmp_path / "s", epochs=12)
    out = Path(info["out"])
    for name in ("results.csv", "summary.csv", "histories.csv", "baselines.json", "report.md",
                 "figure_objective_logloss.png", "figure_noise_test_logloss.png"):
        assert (out / name).exists(), name
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary["noise"]) == [0.0, 0.3, 1.0, 3.0, 10.0]
    none = summary[summary["noise"] == 0].iloc[0]
    assert none["final_test_logloss"] < none["party1_only_test_logloss"]
    assert none["final_test_logloss"] == pytest.approx(none["all_features_test_logloss"], abs=5e-3)
    hist = pd.read_csv(out / "histories.csv")
    assert {"objective", "test_logloss", "noise", "seed", "epoch"} <= set(hist.columns)
    assert len(hist) == 12 * (1 + 4 * 3)
    report = (out / "report.md").read_text()
    assert "party 1's features only" in report and "Corollary 1" in report


def test_cli_study_with_a_local_libsvm_file(tmp_path):
    from cvxdp.cli.main import cli

    train = write_libsvm(tmp_path / "a9a", 300, 123, seed=3)
    test = write_libsvm(tmp_path / "a9a.t", 100, 123, seed=4)
    study = tmp_path / "study.toml"
    study.write_text((CASES / "study_sharing.toml").read_text()
                     .replace('case = "sharing_breast_cancer.toml"', f'case = "{CASES / "sharing_breast_cancer.toml"}"')
                     .replace("seeds = [0, 1, 2]", "seeds = [0]"))
    res = CliRunner().invoke(cli, ["study", str(study), "--out", str(tmp_path / "o"), "--rounds", "5",
                                   "--data", str(train), "--test-data", str(test), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output.strip().splitlines()[-1])
    assert info["runs"] == 5
    base = json.loads((tmp_path / "o" / "baselines.json").read_text())
    assert base["data"]["blocks"] == [66, 57] and base["data"]["n_train"] == 300
    bad = CliRunner().invoke(cli, ["study", str(CASES / "study_case14.toml"), "--out", str(tmp_path / "x"),
                                   "--data", str(train)])
    assert bad.exit_code != 0 and "power template does not read" in bad.output
