"""The cross-silo study's anchors and report (issue 50), on a small digits consortium (no download): the
non-private optimum as a reference row, the central anchor with sqrt(P) x its noise at its smaller epsilon, one-shot
releases on every record, and the report's privacy and distribution costs apart. The full study is a command in
docs/consortium.md, not part of the suite."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from cvxdp.config.build import load_case
from cvxdp.errors import ConfigError
from cvxdp.studies.tables import cost_table
from cvxdp.studies.total import TotalCell, _total_case, load_total_study, load_total_table, run_total_study

CASES = Path(__file__).resolve().parents[2] / "cases"


def _study(tmp_path: Path, anchors: str = '"ObjG-once", "central", "central-sqrtP", "optimum"') -> Path:
    path = tmp_path / "silos_total.toml"
    path.write_text(f"""[study]
kind = "total"
name = "silos_total"
case = "{(CASES / 'digits_silos.toml').as_posix()}"
mechanisms = ["ObjG"]
anchors = [{anchors}]
epsilons = [1.0]
seeds = [0]
schedule = [[100.0, 4, 1]]
anchor_rounds = 4
datasets = [{{ name = "small", model = {{ max_samples = 160, total_samples = 120 }} }}]

[run]
accountant = "pld"
""")
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("silos")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # four rounds: the runs' convergence warnings are expected
        info = run_total_study(_study(tmp), tmp / "out", progress=False)
    return tmp / "out", info


def test_the_anchors_are_cells_with_their_own_ledgers(finished):
    out, info = finished
    assert info["runs"] == info["computed"] == 6  # non-private line, optimum, ObjG, ObjG-once, central, central-sqrtP
    results = pd.read_csv(out / "results.csv").set_index("method")
    assert results.loc["optimum", "kind"] == "reference" and math.isnan(results.loc["optimum", "total_epsilon"])
    assert results.loc["central-sqrtP", "kind"] == "central-noise"
    ledgers = json.loads((out / "ledger.json").read_text())
    central = ledgers["small__central_total1_T1_J1_seed0"]["worst"]["pld"]
    noisy = ledgers["small__central-sqrtP_total1_T1_J1_seed0"]["worst"]["pld"]
    # 5 silos: the central anchor's noise x sqrt(5) spends less than the column's total epsilon
    assert 0.99 < central <= 1.0 + 1e-9 and 0.2 < noisy < 0.6
    assert ledgers["small__optimum_totalnone_T1_J1_seed0"] == {}  # non-private: no ledger


def test_the_optimum_is_a_reference_row_at_every_epsilon_and_never_a_winner(finished):
    out, _ = finished
    table = load_total_table(out)
    reference = table[table["method"] == "optimum"]
    assert len(reference) == 1 and reference["total_epsilon"].iloc[0] == 1.0 and reference["kind"].iloc[0] == "reference"
    report = (out / "report.md").read_text()
    assert "optimum (non-private, pooled data)" in report and "central-sqrtP (central, sqrt(P) x noise)" in report
    assert "## What privacy costs and what distribution costs (test_error, percent; costs in points)" in report
    assert "which only secure aggregation would remove" in report
    assert (out / "test_error_vs_total_epsilon_small.png").stat().st_size > 0


def test_the_cost_table_is_the_differences_of_the_rows():
    table = pd.DataFrame([
        {"dataset": "A", "method": m, "kind": k, "total_epsilon": 1.0, "test_error_mean": v, "test_error_se": 0.0}
        for m, k, v in (("ObjG", "per-round", 0.30), ("OutG-once", "anchor", 0.34), ("central", "central", 0.27),
                        ("central-sqrtP", "central-noise", 0.29), ("optimum", "reference", 0.25))])
    row = cost_table(table, {"A": {"test_error": 0.26}}).iloc[0]
    assert row["best method"] == "ObjG" and row["privacy cost"] == pytest.approx(2.0)
    assert row["distribution cost"] == pytest.approx(3.0) and row["of which P parties' noise"] == pytest.approx(2.0)
    assert row["best federated - non-private federated"] == pytest.approx(4.0)


def test_one_shot_releases_use_every_record_and_per_round_runs_the_cases_subsampling(tmp_path):
    study = load_total_study(_study(tmp_path))
    base = load_case(study.case_path)
    per_round = _total_case(study, base, TotalCell("ObjG", 1.0, 0, 4, 1))
    once = _total_case(study, base, TotalCell("ObjG-once", 1.0, 0, 1, 1))
    assert per_round.privacy["sampling_rate"] == 0.05 and per_round.privacy["calibrate"] == "total"
    assert "sampling_rate" not in once.privacy and "clip_norm" not in once.privacy
    assert once.algorithm["rounds"] == 1


def test_anchors_are_checked_by_name(tmp_path):
    with pytest.raises(ConfigError, match="distinct names from InL, InG"):
        load_total_study(_study(tmp_path, anchors='"central", "central"'))
    with pytest.raises(ConfigError, match="central-sqrtP, optimum"):
        load_total_study(_study(tmp_path, anchors='"centre"'))


def test_the_shipped_study_runs_three_consortia_at_five_budgets():
    study = load_total_study(CASES / "study_silos_total.toml")
    assert [name for name, _ in study.datasets] == ["FEMNIST, 5 silos", "FEMNIST, 10 silos", "digits, 5 silos"]
    assert study.epsilons == [0.5, 1.0, 2.0, 4.0, 8.0] and study.seeds == [0, 1, 2]
    assert study.mechanisms == ["ObjG", "OutG"] and study.schedule_for(0.5) == (200, 1)
    assert study.anchors == ["ObjG-once", "OutG-once", "central", "central-sqrtP", "optimum"]
    digits = dict(study.datasets)["digits, 5 silos"]
    assert {k: v for k, v in load_case(CASES / "digits_silos.toml").model.items() if k in digits} == digits
