"""Equal-total-epsilon studies (cvxdp.studies.total, issue 39): the public schedule, the cells, the report's first
table with its winner row and anchors, reloading and resuming, and the main-job grid leading with it."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp.studies.grid import load_study  # noqa: E402
from cvxdp.studies.total import (  # noqa: E402
    lead_lines,
    load_total_study,
    load_total_table,
    method_table,
    run_total_study,
    verdict,
)

CASES = Path(__file__).resolve().parents[2] / "cases"


def _study(tmp_path: Path, body: str = "") -> Path:
    path = tmp_path / "total.toml"
    path.write_text(f"""[study]
kind = "total"
name = "tiny_total"
case = "{(CASES / 'case14_3zones_cost.toml').as_posix()}"
mechanisms = ["ObjG"]
anchors = ["InL"]
epsilons = [1.0]
seeds = [0, 1]
schedule = [[0.5, 3, 1], [2.0, 4, 2]]
anchor_rounds = 5
{body}""")
    return path


def test_the_schedule_is_read_from_the_declared_budget_only(tmp_path):
    study = load_total_study(_study(tmp_path))
    assert study.schedule_for(0.1) == (3, 1) and study.schedule_for(0.5) == (3, 1)
    assert study.schedule_for(1.0) == (4, 2) and study.schedule_for(8.0) == (4, 2)  # past the end: the last row
    keys = [c.key for c in study.cells()]
    assert keys == ["none_totalnone_T5_J1_seed0", "ObjG_total1_T4_J2_seed0", "ObjG_total1_T4_J2_seed1",
                    "InL_total1_T5_J1_seed0", "InL_total1_T5_J1_seed1"]


@pytest.mark.parametrize("body, match", [
    ('schedule = [[2.0, 4, 1], [1.0, 3, 1]]', "sorted by max_epsilon"),
    ('schedule = [[1.0, 0, 1]]', "'schedule'"),
    ('anchors = ["InX"]', "'anchors'"),
    ('delta = 2.0', "'delta'"),
])
def test_bad_entries_are_refused_by_name(tmp_path, body, match, with_entry):
    with pytest.raises(ConfigError, match=match):
        load_total_study(with_entry(_study(tmp_path), body))


@pytest.fixture(scope="module")
def finished(tmp_path_factory, run_quietly):
    tmp = tmp_path_factory.mktemp("total")
    out = tmp / "out"
    return tmp, out, run_quietly(_study(tmp), out)


def test_the_study_writes_a_reloadable_table_with_mean_and_standard_error(finished):
    _, out, info = finished
    assert info["runs"] == 5 and info["computed"] == 5
    results = pd.read_csv(out / "results.csv")
    table = load_total_table(out)
    row = table[table["method"] == "InL"].iloc[0]
    seeds = results[results["method"] == "InL"]["balance_deviation"]
    assert row["balance_deviation_mean"] == pytest.approx(seeds.mean())
    assert row["balance_deviation_se"] == pytest.approx(seeds.std(ddof=1) / math.sqrt(2))
    assert row["kind"] == "anchor" and row["seeds"] == 2
    # every private cell spent at most its total under PLD (the anchor: one release; ObjG: calibrate = total)
    private = results[results["method"] != "none"]
    assert (private["eps_pld"] <= 1.0 + 1e-6).all() and (private["eps_pld"] > 0.9).all()


def test_the_report_leads_with_method_by_total_epsilon_and_its_winner(finished):
    _, out, _ = finished
    report = (out / "report.md").read_text()
    first_table = report.split("\n\n")[3]
    assert first_table.startswith("| method | eps=1 |")
    assert "ObjG (per round)" in first_table and "InL (one-shot anchor)" in first_table
    table = load_total_table(out)
    winner = table.loc[table["balance_deviation_mean"].idxmin(), "method"]
    assert f"| **winner** | {winner} |" in first_table
    assert (out / "utility_vs_total_epsilon.png").stat().st_size > 0
    assert method_table(table, "balance_deviation")["method"].iloc[-1] == "**winner**"


def test_a_rerun_reuses_every_cell(finished):
    tmp, out, _ = finished
    info = run_total_study(_study(tmp), out, progress=False)
    assert info["computed"] == 0 and info["reused"] == 5


def test_the_verdict_says_so_when_iteration_never_beats_the_one_shot_baseline():
    table = pd.DataFrame([
        {"method": "ObjG", "kind": "per-round", "total_epsilon": 1.0, "rounds": 40, "local_updates": 1,
         "balance_deviation_mean": 20.0, "balance_deviation_se": 1.0, "cost_error_mean": 900.0, "cost_error_se": 9.0},
        {"method": "InL", "kind": "anchor", "total_epsilon": 1.0, "rounds": 40, "local_updates": 1,
         "balance_deviation_mean": 1.0, "balance_deviation_se": 0.1, "cost_error_mean": 500.0, "cost_error_se": 5.0}])
    assert "No per-round mechanism beat" in verdict(table, ("balance_deviation", "cost_error"))[-1]
    table.loc[0, "cost_error_mean"] = 100.0
    lines = verdict(table, ("balance_deviation", "cost_error"))
    assert "No per-round" not in " ".join(lines) and "cost_error at total eps 1" in lines[-1]


def test_the_main_job_names_its_equal_total_study_and_its_report_leads_with_it(finished, tmp_path):
    study = load_study(CASES / "study_case14.toml")
    assert study.total == (CASES / "study_case14_total.toml").resolve()
    _, out, _ = finished
    lead = lead_lines(out, link="total/")  # a report one directory up linking into this study's
    assert lead[0].startswith("## Equal TOTAL privacy per agent")
    assert any("](total/utility_vs_total_epsilon.png)" in line for line in lead)
    assert not any(line.startswith("## Details") for line in lead)
    bad = tmp_path / "grid.toml"
    bad.write_text(f'[study]\ncase = "{(CASES / "case14_3zones.toml").as_posix()}"\nepsilons = [1.0]\n'
                   f'total = "{(CASES / "study_case14.toml").as_posix()}"\n')
    with pytest.raises(ConfigError, match="'total'"):
        load_study(bad)
