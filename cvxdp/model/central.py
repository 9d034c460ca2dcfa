"""Centralized reference: all agents' problems in one CVXPY problem with the consensus constraints.

Every centralized solve goes through :func:`solve_with_fallback`: the requested solver first, then the other
solvers of :data:`FALLBACK_ORDER`, each capped in iterations and time, and every move to the next solver
announced by a :class:`SolverFallbackWarning` that names the solver that failed and its status.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import cvxpy as cp
import numpy as np

from ..errors import InvalidParameterError, SolverFailedError, SolverFallbackWarning
from .agent import Agent, check_agents, declared_box
from .compiled import NotCompilable, feasible_set_data
from .local_solver import BoxProjection, projection_onto

#: Solvers a centralized solve tries, in this order after the requested one.
FALLBACK_ORDER = ("CLARABEL", "ECOS", "SCS")
#: Iteration cap of each solver (option name, value) and the name of its time-limit option (None: no such
#: option; ECOS is an interior-point method whose iteration cap bounds its time).
SOLVER_CAPS: dict[str, tuple[str, int, str | None]] = {
    "CLARABEL": ("max_iter", 200, "time_limit"),
    "ECOS": ("max_iters", 200, None),
    "SCS": ("max_iters", 20_000, "time_limit_secs"),
}
_SOLVED = ("optimal", "optimal_inaccurate")
_VERDICTS = ("infeasible", "infeasible_inaccurate", "unbounded", "unbounded_inaccurate")


def _caps(name: str, time_limit: float) -> tuple[dict[str, Any], str]:
    option, iters, time_option = SOLVER_CAPS.get(name, (None, None, None))
    caps: dict[str, Any] = {option: iters} if option else {}
    if time_option:
        caps[time_option] = float(time_limit)
    text = ", ".join(([f"at most {iters} iterations"] if option else [])
                     + ([f"{time_limit:g} s"] if time_option else []))
    return caps, text


def solve_with_fallback(problem: cp.Problem, solver: str = "CLARABEL", *, time_limit: float = 300.0,
                        progress: Callable[[str], None] | None = None, label: str = "the centralized solve",
                        **solver_options: Any) -> str:
    """Solve ``problem`` with ``solver``, then with the other solvers of :data:`FALLBACK_ORDER`.

    Each solver runs under the caps of :data:`SOLVER_CAPS` (iterations, and ``time_limit`` seconds where
    the solver has a time limit); ``solver_options`` go to the requested solver only. A solver that raises,
    hits a cap or returns no solution is followed by the next one, announced by a
    :class:`SolverFallbackWarning` naming the solver and its status. The chain stops early when two solvers
    agree that the problem is infeasible (or unbounded).

    Parameters
    ----------
    problem : cvxpy.Problem
    solver : str
        First solver to try.
    time_limit : float
        Seconds each capped solver may run.
    progress : callable(str), optional
        Receives one line per step (which solver starts, its status and time).
    label : str
        What is being solved, for the messages.

    Returns
    -------
    str
        The solver whose solution ``problem`` now holds (status "optimal" or "optimal_inaccurate").

    Raises
    ------
    SolverFailedError
        If no solver solved the problem; the message lists each solver's status.
    """
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise InvalidParameterError(f"The 'time_limit' parameter of solve_with_fallback must be a float in "
                                    f"(0, inf). Got {time_limit!r} instead.")
    order = [solver] + [s for s in FALLBACK_ORDER if s != solver]
    installed = set(cp.installed_solvers())
    tried: list[str] = []
    for k, name in enumerate(order):
        if name not in installed:
            continue
        caps, cap_text = _caps(name, time_limit)
        options = {**caps, **(solver_options if k == 0 else {})}
        if progress is not None:
            progress(f"{label}: solving with {name}" + (f" ({cap_text})" if cap_text else ""))
        start = time.perf_counter()
        try:
            problem.solve(solver=name, **options)
            status = str(problem.status)
        except cp.SolverError as exc:
            status = f"solver error ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        elapsed = time.perf_counter() - start
        if progress is not None:
            progress(f"{label}: {name} status {status!r} after {elapsed:.1f} s")
        tried.append(f"{name}: {status}")
        if status in _SOLVED:
            return name
        verdicts = [t.split(": ", 1)[1] for t in tried if t.split(": ", 1)[1] in _VERDICTS]
        if len(verdicts) >= 2 and verdicts[-1].split("_")[0] == verdicts[-2].split("_")[0]:
            break
        following = [s for s in order[k + 1:] if s in installed]
        if following:
            warnings.warn(f"{label}: {name} ended with status {status!r} after {elapsed:.1f} s; falling back "
                          f"to {following[0]} ({_caps(following[0], time_limit)[1]}).",
                          SolverFallbackWarning, stacklevel=2)
    raise SolverFailedError(f"{label} failed with every solver ({'; '.join(tried)}).",
                            status=str(problem.status))


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


def solve_central(agents: Sequence[Agent], *, solver: str = "CLARABEL", time_limit: float = 300.0,
                  progress: Callable[[str], None] | None = None, **solver_options) -> CentralResult:
    """Solve ``min sum_p f_p(z_p) s.t. z_p in W_p, E_p z_p = w`` centrally (:func:`solve_with_fallback`:
    ``solver`` first, announced and capped fallbacks, ``time_limit`` seconds per solver).

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
    used = solve_with_fallback(prob, solver, time_limit=time_limit, progress=progress,
                               label="the centralized reference solve", **solver_options)
    elapsed = time.perf_counter() - start
    local = {a.name: a.layout.flatten({v: v.value for v in a.layout.variables}) for a in agents}
    return CentralResult(objective=float(prob.value),
                         solution={k: np.asarray(v.value).ravel() for k, v in w.items()}, local=local,
                         solver=used, status=prob.status, time_s=elapsed)


TOLERANCE = 1e-6  # relative to 1 + ||w||_inf


def _agent_target(agent: Any, solution: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    keys = sorted(agent.layout.shared)
    idx = agent.layout.shared_indices
    target = np.concatenate([np.ravel(np.asarray(solution[k], dtype=float)) for k in keys])
    return idx, target


def _distance(agent: Any, idx: np.ndarray, target: np.ndarray, local: np.ndarray | None) -> float:
    """Distance from ``target`` to the agent's set projected on coordinates ``idx`` (0 when inside).

    The projection runs on the agent's compiled ``W_p`` (:func:`cvxdp.model.compiled.feasible_set_data`: the data its
    worker compiled, so nothing is compiled again after a run; a declared box is read off its constraints,
    :func:`cvxdp.model.agent.declared_box`) -- a clip for a box, else a live Clarabel solve
    with weight 1 on the shared coordinates and 0 elsewhere, with the local step's fallback chain.
    """
    box = declared_box(agent)  # a declared box is a clip: nothing to compile, nothing to evaluate through CVXPY
    if box is None and local is not None and len(local) == agent.layout.size:  # cheap test first: own local part
        u = np.array(local, dtype=float)
        u[idx] = target
        if agent.violation(u) <= 1e-9:
            return 0.0
    weight, point = np.zeros(agent.layout.size), np.zeros(agent.layout.size)
    weight[idx], point[idx] = 1.0, target  # an agent's shared blocks never overlap (Agent.check)
    saved = [v.value for v in agent.layout.variables]  # a CVXPY fallback writes the variables' values
    try:
        projection = BoxProjection(*box) if box is not None else projection_onto(agent, feasible_set_data(agent))
        projected, _ = projection.project(point, weight)
    except (NotCompilable, SolverFailedError):
        return math.nan
    finally:
        for v, val in zip(agent.layout.variables, saved):
            v.value = val
    return float(np.linalg.norm(projected[idx] - target))


def solution_violation(agents: Sequence[Any], solution: Mapping[str, np.ndarray],
                       local: Mapping[str, np.ndarray] | None = None, *, warn: bool = True,
                       private: bool | None = None, stop_reason: str | None = None) -> dict[str, Any]:
    """Distance of the consensus solution to every agent's feasible set (projected on its shared keys).

    ``private`` (whether the run added noise) and ``stop_reason`` (``"tolerance"``: it met its stopping rule)
    only choose the warning's explanation: noise can only be the cause of a private run, and a run that met its
    rule did reach the consensus its tolerances ask for.

    Reads every agent's feasible set W_p, which cvxdp treats as *public* (a public assumption named in a private
    run's ledger notes, docs/what-is-public.md): not a release, not accounted for, and not in the public view
    (:meth:`cvxdp.Result.release` drops it). In a federation each party computes its own and only reports it, with a
    note that voids the guarantee.

    Returns
    -------
    dict
        ``{"max": float, "agent": name of the worst agent, "per_agent": {name: distance}}``; a distance
        is NaN when the projection could not be solved. Warns (``UserWarning``) when the largest distance
        exceeds ``1e-6 (1 + ||w||_inf)``.
    """
    per_agent: dict[str, float] = {}
    scale = 1.0 + max((float(np.max(np.abs(v))) for v in solution.values() if np.size(v)), default=0.0)
    for agent in agents:
        if not getattr(agent, "constraints", None) or not set(agent.layout.shared) <= set(solution):
            per_agent[agent.name] = 0.0
            continue
        idx, target = _agent_target(agent, solution)
        per_agent[agent.name] = _distance(agent, idx, target, None if local is None else local.get(agent.name))
    finite = {k: v for k, v in per_agent.items() if math.isfinite(v)}
    worst = max(finite, key=finite.get) if finite else None
    out = {"max": finite[worst] if worst else 0.0, "agent": worst, "per_agent": per_agent,
           "tolerance": TOLERANCE * scale}
    if warn and worst is not None and finite[worst] > TOLERANCE * scale:
        outside = [k for k, v in finite.items() if v > TOLERANCE * scale]
        if private is False and stop_reason == "tolerance":
            why = ("the run met its stopping rule, and its tolerances let the agents' copies differ by about this "
                   "much (tighten tol_primal / tol_dual / tol_mismatch for a closer point; exact ADMM's "
                   "result.polished is feasible for every agent when it exists)")
        elif private is False:
            why = "the run did not reach consensus (too few rounds, or step sizes that stall)"
        else:
            why = "the run did not reach consensus (noise-dominated, too few rounds or a loose stopping tolerance)"
        warnings.warn(f"The consensus solution lies outside the feasible set of {len(outside)} of {len(per_agent)} "
                      f"agent(s) (largest distance {finite[worst]:.3g}, agent {worst!r}); {why}. The distances are "
                      "in result.solution_violation.", UserWarning,
                      stacklevel=4)  # <- run_loop <- cvxdp.solve <- its caller (the line the user wrote)
    return out


__all__ = ['CentralResult', 'FALLBACK_ORDER', 'solve_central', 'solve_with_fallback', 'SOLVER_CAPS', 'SolverFallbackWarning']
