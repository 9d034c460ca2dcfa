"""`cvxdp central`: progress on stderr, and a solver fallback announced loudly (named solver and status)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cvxdp.cli.main import cli
from cvxdp.model import central

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")


def _central(*args):
    result = CliRunner().invoke(cli, ["central", "--network", "case14", "--zones", "2", *args])
    assert result.exit_code == 0, result.output
    return result, json.loads(result.stdout.strip().splitlines()[-1])


def test_central_shows_progress_on_stderr():
    result, payload = _central("--json", "--time-limit", "60")
    assert payload["solver"] == "CLARABEL" and "solver_fallbacks" not in payload
    assert "solving with CLARABEL (at most 200 iterations, 60 s)" in result.stderr
    assert "AC power flow" in result.stderr and "WARNING" not in result.stderr
    quiet, _ = _central("--json", "--no-progress")
    assert quiet.stderr == ""


def test_a_solver_fallback_is_announced(monkeypatch):
    monkeypatch.setitem(central.SOLVER_CAPS, "CLARABEL", ("max_iter", 1, "time_limit"))  # Clarabel must fail
    result, payload = _central("--json", "--no-progress")
    assert payload["solver"] == "ECOS" and payload["status"] in ("optimal", "optimal_inaccurate")
    assert "WARNING: the centralized SOC solve of case14: CLARABEL ended with status 'user_limit'" in result.stderr
    assert "falling back to ECOS (at most 200 iterations)" in result.stderr
    assert payload["solver_fallbacks"] and "CLARABEL" in payload["solver_fallbacks"][0]
    assert payload["cost"] == pytest.approx(8075.12, rel=1e-4)


@pytest.mark.parametrize("case", ["toy", "erm_madmm", "sharing_breast_cancer", "logistic"])
def test_every_template_passes_the_time_limit_to_its_solver(case, tmp_path):
    """`--time-limit` reaches the solver of every template (the toy one through solve_central, the logistic, erm
    and vertical templates through their own central solves), which the progress line names."""
    if case == "logistic":  # digits_fl's 1,347 samples take Clarabel half a minute: a smaller digits case
        case = tmp_path / "small_digits.toml"
        case.write_text('[case]\ntemplate = "logistic"\n[model]\ndataset = "digits"\nmax_samples = 300\nagents = 3\n')
    result = CliRunner().invoke(cli, ["central", str(case), "--time-limit", "61", "--json"])
    assert result.exit_code == 0, result.output
    assert "(at most 200 iterations, 61 s)" in result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["status"] == "optimal"
