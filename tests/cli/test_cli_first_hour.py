"""Friction points of a new user's first hour (issue 14): run directories, saved ledgers, JSON nulls, power
summaries with cost, gap and an AC verdict, shortcuts, sharing calibration, privacy caveats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import cvxdp
from cvxdp.cli.main import cli

CASES = Path(__file__).resolve().parents[2] / "cases"


def invoke(*args, ok=True):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def last_json(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_default_run_directories_do_not_overwrite_each_other(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for alg in ("madmm", "dvp"):
        invoke("run", CASES / "erm_madmm.toml", "--algorithm", alg, "--rounds", "3", "--seed", "0", "--json")
    dirs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(dirs) == 2 and any("madmm" in d for d in dirs) and any("dvp" in d for d in dirs)
    # a graph run saves its (Gamma) ledger and the reloaded result has it
    res = cvxdp.load_result(tmp_path / "runs" / [d for d in dirs if "dvp" in d][0])
    assert json.loads((tmp_path / "runs" / dirs[0] / "result.json").read_text())["ledger"] is not None
    assert res.ledger is not None
    assert res.ledger.spent(res.ledger.agent_names[0], "basic")[0] == pytest.approx(
        res.privacy["per_agent"][res.ledger.agent_names[0]]["basic"][0])


def test_power_run_reports_cost_gap_and_json_nulls(tmp_path):
    result = invoke("run", CASES / "case14_3zones.toml", "--rounds", "5", "--seed", "0", "--out", tmp_path / "r",
                    "--json")
    payload = last_json(result)
    assert '"nan"' not in result.output and "NaN" not in result.output
    assert payload["relative_gap"] is None  # balance optimum is 0: the relative gap is undefined -> null
    assert payload["central_cost"] > 0 and payload["objective_kind"] == "balance"
    human = invoke("run", CASES / "case14_3zones.toml", "--rounds", "5", "--seed", "0", "--out", tmp_path / "r2")
    assert "$/h" in human.output and "p.u.^2" in human.output and "central optimum" in human.output


def test_ac_check_of_the_distributed_dispatch_has_a_verdict(tmp_path):
    payload = last_json(invoke("run", CASES / "case14_3zones.toml", "--rounds", "60", "--seed", "0", "--ac-check",
                               "--out", tmp_path / "r", "--json"))
    assert isinstance(payload["ac_feasible"], bool) and payload["ac_converged"]
    assert {"slack_p_mw", "max_v_violation_pu", "max_q_violation_mvar", "max_overload_frac"} <= \
        set(payload["ac_tolerances"])
    assert payload["ac_feasible"] == (not payload["ac_violations"])
    human = invoke("run", CASES / "case14_3zones.toml", "--rounds", "60", "--seed", "0", "--ac-check",
                   "--out", tmp_path / "r2").output
    assert "MW" in human and "MVAr" in human and "p.u." in human and "feasib" in human.lower()


def test_network_shortcut_without_a_file():
    payload = last_json(invoke("central", "--network", "case14", "--zones", "3", "--json"))
    assert payload["cost"] == pytest.approx(8075.12, abs=0.05) and "ac_feasible" in payload
    bad = invoke("central", "--network", "case14", ok=False)
    assert bad.exit_code != 0 and "--zones" in bad.output


def test_objg_with_exact_balance_names_the_real_cause(tmp_path):
    case = tmp_path / "c.toml"
    case.write_text((CASES / "case14_3zones.toml").read_text().replace('objective = "balance"', 'objective = "cost"')
                    .replace("penalty = 1.0", "penalty = 0.0"))
    result = invoke("run", case, "--mechanism", "ObjG", "--epsilon", "1", "--rounds", "2", "--out", tmp_path / "r",
                    ok=False)
    assert result.exit_code != 0 and "constraints" in result.output and "balance" in result.output
    assert "penalty > 0" in result.output


def test_sharing_accepts_calibration_and_refuses_unsupported_mechanisms(tmp_path):
    ok = last_json(invoke("run", CASES / "sharing_breast_cancer.toml", "--mechanism", "OutG", "--epsilon", "1",
                          "--calibration", "analytic", "--rounds", "3", "--seed", "0", "--out", tmp_path / "s",
                          "--json"))
    assert ok["rounds"] == 3
    refused = invoke("run", CASES / "sharing_breast_cancer.toml", "--mechanism", "ObjG", "--epsilon", "1",
                     "--rounds", "3", "--out", tmp_path / "t", ok=False)
    assert refused.exit_code != 0 and "sharing runs the mechanisms none, OutG" in refused.output
    assert "sharing: none, OutG" in invoke("run", "--help").output


def test_meaningless_totals_get_a_plain_sentence(tmp_path):
    payload = last_json(invoke("run", CASES / "digits_fl.toml", "--mechanism", "OutG", "--epsilon", "0.5",
                               "--delta", "1e-4", "--rounds", "300", "--seed", "0", "--out", tmp_path / "d",
                               "--json"))
    assert payload["privacy"]["basic"][1] == pytest.approx(0.03)
    assert any("1/n" in c and "no meaningful privacy" in c for c in payload["privacy_caveats"])


def test_privacy_caveats_thresholds():
    from cvxdp.studies.tables import privacy_caveats

    assert privacy_caveats(1.0, 1e-6, 300) == []
    assert "no meaningful privacy" in privacy_caveats(4672.0, None)[0]
    assert privacy_caveats(None, 0.004, 250) and not privacy_caveats(None, 0.003, 250)


def test_history_has_an_eps_pld_column(tmp_path):
    import pandas as pd

    payload = last_json(invoke("run", CASES / "toy.toml", "--mechanism", "ObjG", "--epsilon", "1", "--rounds", "5",
                               "--seed", "1", "--out", tmp_path / "h", "--json"))
    hist = pd.read_csv(tmp_path / "h" / "history.csv")
    assert "eps_pld" in hist.columns
    assert hist["eps_pld"].iloc[-1] == pytest.approx(payload["privacy"]["pld"])
    assert hist["eps_pld"].iloc[:-1].isna().all()


def test_shipped_powermodelsada_comparison_case_stops_on_its_rule(tmp_path):
    """cases/pglib14_2areas.toml: PGLib's case14 in PowerModelsADA's 2 areas, stopped by tol_mismatch (its rule)."""
    payload = last_json(invoke("run", CASES / "pglib14_2areas.toml", "--out", tmp_path / "r", "--json"))
    assert payload["stop_reason"] == "tolerance" and payload["rounds"] < 100
    assert abs(payload["relative_gap"]) < 0.01  # PowerModelsADA's cost criterion holds where its mismatch rule stops
    history = cvxdp.load_result(tmp_path / "r").history
    assert 0.5 * history["mismatch"].iloc[-1] < 0.01 <= 0.5 * history["mismatch"].iloc[-2]


def test_the_console_script_prints_warnings_without_python_source_lines(tmp_path):
    # `cvxdp ...` (python -m cvxdp.cli.main): a warning is its category and message, not Python's file:line plus
    # the source line of the call inside cvxdp. eta = 0.5 is below half of case14's zone curvature (1.60-1.67).
    import subprocess
    import sys

    text = (CASES / "case14_3zones.toml").read_text().replace("eta = 1.0 ", "eta = 0.5 ")
    assert "eta = 0.5 " in text
    (tmp_path / "low_eta.toml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "cvxdp.cli.main", "run", str(tmp_path / "low_eta.toml"),
                           "--rounds", "2", "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning (StepSizeWarning): eta for agent 'zone1' (0.5) is below" in proc.stderr
    assert "result = solve(" not in proc.stderr and ".py:" not in proc.stderr
