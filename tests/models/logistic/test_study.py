"""The digits study end to end in a reduced form."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from cvxdp.studies.grid import run_study

CASES = Path(__file__).resolve().parents[3] / "cases"


def test_digits_study_reduced(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
name = "digits-reduced"
case = "{(CASES / 'digits_fl.toml').as_posix()}"
mechanisms = ["ObjG", "OutG"]
epsilons = [1.0, 10.0]
local_updates = [1, 3]
seeds = [0]
rounds = 10
delta = 1e-5
""")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_study(study, tmp_path / "out", progress=False)

    results = pd.read_csv(tmp_path / "out" / "results.csv")
    assert len(results) == 2 * 2 * 2 + 2
    assert results["test_error"].between(0, 1).all() and results["train_cost"].gt(0).all()
    assert results.loc[results["mechanism"] == "ObjG", "max_violation"].max() == 0.0  # the clip keeps the box
    for name in ("noise_vs_epsilon.png", "test_error_vs_epsilon.png", "train_cost_vs_epsilon.png", "report.md"):
        assert (tmp_path / "out" / name).exists(), name
