"""The case14 study end to end in a reduced form (the README's main job runs it in full)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cvxdp.studies.grid import run_study

CASES = Path(__file__).resolve().parents[3] / "cases"


def test_case14_study_reduced(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
name = "case14-reduced"
case = "{(CASES / 'case14_3zones.toml').as_posix()}"
mechanisms = ["ObjL", "ObjG", "OutL", "OutG"]
epsilons = [1.0, 10.0]
local_updates = [1, 3]
seeds = [0]
rounds = 6
delta = 1e-6
""")

    info = run_study(study, tmp_path / "out", progress=False)

    results = pd.read_csv(tmp_path / "out" / "results.csv")
    assert info["computed"] == len(results) == 4 * 2 * 2 + 2
    objpert = results[results["mechanism"].str.startswith("Obj")]
    outpert = results[results["mechanism"].str.startswith("Out")]
    assert objpert["max_violation"].max() <= 1e-6  # every communicated ObjPert iterate is feasible
    assert (outpert["max_violation"] > 1e-3).all()
    private = results[results["mechanism"] != "none"]
    steps = 6 * private["local_updates"]
    assert (private["eps_basic"] == steps * private["epsilon"]).all()  # basic composition, T*J*eps
    # PLD is the tightest up to its discretisation (1e-3 relative; see cvxdp.privacy.accounting)
    assert (private["eps_pld"] <= 1.001 * private["eps_rdp"]).all()
    assert (private["eps_pld"] <= 1.001 * private["eps_basic"]).all()
    for name in ("noise_vs_epsilon.png", "objective_vs_rounds_J1.png", "objective_vs_rounds_J3.png",
                 "residual_ObjG_by_J.png", "report.md", "ledger.json", "histories.csv"):
        assert (tmp_path / "out" / name).exists(), name
    report = (tmp_path / "out" / "report.md").read_text()
    assert "ObjPert vs OutPert" in report
    # every private run is in the privacy table (it was cut at 40 rows), as markdown rows, not pandas text
    for cell in private["cell"]:
        assert f"| {cell} |" in report, cell
    assert "p.u.^2" in report and "J = 3 spends 3 times the total privacy" in report
    # summary sentences are computed from the tables they summarise
    lower = sum(line.count("| yes |") for line in report.split("## ObjPert vs OutPert")[1].split("##")[0].splitlines())
    assert f"ObjPert lower in {lower} of 8 (pair, eps, J) cells" in report
