"""Centralized reference: all agents' problems in one CVXPY problem with the consensus constraints."""

from __future__ import annotations

import time
from collections.abc import Sequence

import cvxpy as cp
import numpy as np

from .agent import Agent, check_agents
from .errors import SolverFailedError


def solve_central(agents: Sequence[Agent], *, solver: str = "CLARABEL", **solver_options) -> dict:
    """Solve ``min sum_p f_p(z_p) s.t. z_p in W_p, E_p z_p = w`` centrally.

    Returns
    -------
    dict with ``objective``, ``solution`` (key -> array), ``local`` (name -> flat z_p), ``solver``,
    ``status`` and ``time_s``.
    """
    sizes = check_agents(agents, private=False)
    w = {k: cp.Variable(n, name=f"w[{k}]") for k, n in sizes.items()}
    constraints = []
    for agent in agents:
        constraints += agent.constraints
        u = agent.u_expression()
        for key, idx in agent.layout.shared.items():
            constraints.append(u[idx] == w[key])
    prob = cp.Problem(cp.Minimize(cp.sum([a.objective for a in agents])), constraints)
    start = time.perf_counter()
    prob.solve(solver=solver, **solver_options)
    elapsed = time.perf_counter() - start
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise SolverFailedError(f"The centralized reference solve ended with status {prob.status!r}.",
                                status=prob.status)
    local = {a.name: a.layout.flatten({v: v.value for v in a.layout.variables}) for a in agents}
    return {"objective": float(prob.value), "solution": {k: np.asarray(v.value).ravel() for k, v in w.items()},
            "local": local, "solver": solver, "status": prob.status, "time_s": elapsed}
