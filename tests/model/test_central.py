"""Centralized solves: capped solvers, and every fallback announced with the solver's name and status."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import InvalidParameterError, SolverFailedError
from cvxdp.model import SolverFallbackWarning, solve_with_fallback
from cvxdp.model.central import SOLVER_CAPS


def _socp() -> tuple[cp.Problem, cp.Variable]:
    x = cp.Variable(3)
    return cp.Problem(cp.Minimize(cp.sum(x)), [cp.norm(x) <= 1.0]), x


class _Scripted:
    """A stand-in problem whose solvers end with scripted statuses; records the options each one got."""

    def __init__(self, statuses: dict[str, str]):
        self.statuses, self.calls, self.status = statuses, [], None

    def solve(self, solver: str, **options):
        self.calls.append((solver, options))
        self.status = self.statuses[solver]


def test_first_solver_that_works_is_used_without_warning():
    prob, x = _socp()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverFallbackWarning)
        assert solve_with_fallback(prob) == "CLARABEL"
    np.testing.assert_allclose(x.value, -np.ones(3) / np.sqrt(3), atol=1e-6)


def test_a_failing_solver_is_announced_and_the_next_one_solves():
    prob, x = _socp()
    lines: list[str] = []
    # Clarabel forced to fail: one iteration is not enough
    with pytest.warns(SolverFallbackWarning, match=r"CLARABEL ended with status .* falling back to ECOS"):
        used = solve_with_fallback(prob, "CLARABEL", progress=lines.append, max_iter=1)
    assert used == "ECOS" and prob.status == "optimal"
    assert any("solving with CLARABEL" in m for m in lines) and any("ECOS status 'optimal'" in m for m in lines)
    np.testing.assert_allclose(x.value, -np.ones(3) / np.sqrt(3), atol=1e-6)


def test_every_solver_runs_capped_and_failures_are_listed():
    prob = _Scripted({"CLARABEL": "solver_error", "ECOS": "user_limit", "SCS": "user_limit"})
    with pytest.warns(SolverFallbackWarning) as record:
        with pytest.raises(SolverFailedError, match=r"CLARABEL: solver_error; ECOS: user_limit; SCS: user_limit"):
            solve_with_fallback(prob, time_limit=7.0)  # type: ignore[arg-type]
    assert [str(w.message).split(":")[1].split()[0] for w in record] == ["CLARABEL", "ECOS"]
    options = dict(prob.calls)
    for name, (it_option, iters, time_option) in SOLVER_CAPS.items():
        assert options[name][it_option] == iters
        if time_option:
            assert options[name][time_option] == 7.0


def test_two_infeasibility_verdicts_end_the_chain_before_scs():
    prob = _Scripted({"CLARABEL": "infeasible", "ECOS": "infeasible", "SCS": "optimal"})
    with pytest.warns(SolverFallbackWarning, match="CLARABEL ended with status 'infeasible'"):
        with pytest.raises(SolverFailedError, match=r"CLARABEL: infeasible; ECOS: infeasible\)"):
            solve_with_fallback(prob)  # type: ignore[arg-type]
    assert [name for name, _ in prob.calls] == ["CLARABEL", "ECOS"]


def test_solve_central_reports_the_solver_that_solved():
    x = cp.Variable(2)
    agent = cvxdp.Agent("a", cp.sum_squares(x - 1.0), [x >= 0, x <= 2], shared={"x": x})
    other = cp.Variable(2)
    agent2 = cvxdp.Agent("b", cp.sum_squares(other + 1.0), [other >= -2, other <= 2], shared={"x": other})
    with pytest.warns(SolverFallbackWarning, match="CLARABEL"):
        ref = cvxdp.solve_central([agent, agent2], max_iter=1)
    assert ref.solver == "ECOS" and ref.objective == pytest.approx(4.0, abs=1e-6)


@pytest.mark.parametrize("bad", [0, -1.0, True, "10"])
def test_time_limit_is_validated(bad):
    prob, _ = _socp()
    with pytest.raises(InvalidParameterError, match="'time_limit' parameter of solve_with_fallback"):
        solve_with_fallback(prob, time_limit=bad)
