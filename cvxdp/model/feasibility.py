"""Is the returned consensus solution inside the agents' feasible sets?

Under heavy noise (e.g. output perturbation with a tiny epsilon) the consensus value of a shared key can
lie outside the sets of the agents that hold it. :func:`solution_violation` measures, for every agent,
the Euclidean distance from the consensus value of its shared coordinates to the projection of its
feasible set onto them, records it with the result and warns when it is not negligible.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SolverFailedError
from .compiled import NotCompilable, feasible_set_data
from .local_solver import projection_onto

TOLERANCE = 1e-6  # relative to 1 + ||w||_inf


def _agent_target(agent: Any, solution: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    layout = agent.layout
    keys = sorted(layout.shared)
    idx = np.concatenate([layout.shared[k] for k in keys])
    target = np.concatenate([np.ravel(np.asarray(solution[k], dtype=float)) for k in keys])
    return idx, target


def _distance(agent: Any, idx: np.ndarray, target: np.ndarray, local: np.ndarray | None) -> float:
    """Distance from ``target`` to the agent's set projected on coordinates ``idx`` (0 when inside).

    The projection runs on the agent's compiled ``W_p`` (:func:`cvxdp.model.compiled.feasible_set_data`: the data its
    worker compiled, so nothing is compiled again after a run) -- a clip for a box, else a live Clarabel solve
    with weight 1 on the shared coordinates and 0 elsewhere, with the local step's fallback chain.
    """
    if local is not None and len(local) == agent.layout.size:  # cheap test first: the agent's own local part
        u = np.array(local, dtype=float)
        u[idx] = target
        if agent.violation(u) <= 1e-9:
            return 0.0
    weight, point = np.zeros(agent.layout.size), np.zeros(agent.layout.size)
    weight[idx], point[idx] = 1.0, target  # an agent's shared blocks never overlap (Agent.check)
    saved = [v.value for v in agent.layout.variables]  # a CVXPY fallback writes the variables' values
    try:
        projected, _ = projection_onto(agent, feasible_set_data(agent)).project(point, weight)
    except (NotCompilable, SolverFailedError):
        return math.nan
    finally:
        for v, val in zip(agent.layout.variables, saved):
            v.value = val
    return float(np.linalg.norm(projected[idx] - target))


def solution_violation(agents: Sequence[Any], solution: Mapping[str, np.ndarray],
                       local: Mapping[str, np.ndarray] | None = None, *, warn: bool = True) -> dict[str, Any]:
    """Distance of the consensus solution to every agent's feasible set (projected on its shared keys).

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
        warnings.warn(f"The consensus solution lies outside the feasible set of {len(outside)} of {len(per_agent)} "
                      f"agent(s) (largest distance {finite[worst]:.3g}, agent {worst!r}); the run did not reach "
                      "consensus (noise-dominated, too few rounds or a loose stopping tolerance). The distances are in "
                      "result.solution_violation.", UserWarning,
                      stacklevel=4)  # <- run_loop <- cvxdp.solve <- its caller (the line the user wrote)
    return out
