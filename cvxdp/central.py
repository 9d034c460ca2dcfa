"""Centralized reference: all agents' problems in one CVXPY problem with the consensus constraints."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import cvxpy as cp
import numpy as np

from .agent import Agent, check_agents
from .errors import SolverFailedError


@dataclass(frozen=True)
class CentralResult(Mapping):
    """The centralized reference, shaped like a :class:`cvxdp.Result`: ``.solution`` (shared key -> array),
    ``.local`` (agent name -> flat z_p), ``.objective`` (sum_p f_p at the optimum), ``.solver``, ``.status``,
    ``.time_s``. Dict-style access (``ref["objective"]``) keeps working."""

    objective: float
    solution: dict[str, np.ndarray]
    local: dict[str, np.ndarray]
    solver: str
    status: str
    time_s: float

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    @classmethod
    def _keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def solve_central(agents: Sequence[Agent], *, solver: str = "CLARABEL", **solver_options) -> CentralResult:
    """Solve ``min sum_p f_p(z_p) s.t. z_p in W_p, E_p z_p = w`` centrally.

    Returns
    -------
    CentralResult
        ``.objective``, ``.solution`` (key -> array, as ``Result.solution``), ``.local`` (name -> flat z_p,
        as ``Result.local``), ``.solver``, ``.status``, ``.time_s``; also readable as a dict.
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
    return CentralResult(objective=float(prob.value),
                         solution={k: np.asarray(v.value).ravel() for k, v in w.items()}, local=local,
                         solver=solver, status=prob.status, time_s=elapsed)
