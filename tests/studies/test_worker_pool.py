"""The study's worker pool and the solvers' own threads: a worker must be able to solve after the study's process
did (issue 51's pool; a forked worker hung in Clarabel's Rayon pool, which does not survive ``fork``)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from cvxdp.model.central import solve_with_fallback
from cvxdp.studies import cells


def _problem(n: int = 400) -> cp.Problem:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2 * n, n))
    x = cp.Variable(n)
    return cp.Problem(cp.Minimize(cp.sum_squares(a @ x - 1.0) + cp.norm1(x)), [cp.abs(x) <= 1.0])


def test_workers_start_from_a_fork_server_not_from_the_study():
    with cells._worker_pool(1) as pool:
        assert pool._ctx.get_start_method() in ("forkserver", "spawn")


def test_workers_solve_with_clarabel_after_the_studys_process_did():
    here = _problem()
    assert solve_with_fallback(here) == "CLARABEL" and here.status == "optimal"  # Clarabel's threads start here
    problems = [_problem(), _problem()]
    statuses = cells.in_parallel([(solve_with_fallback, (p,), {}) for p in problems], workers=2)
    assert statuses == ["CLARABEL", "CLARABEL"]
