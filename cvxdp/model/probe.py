"""Probing a declaration: :func:`check_declaration` samples points of W_p and neighbouring data sets and reports
every sample where the declared gradient, ``lipschitz`` or :class:`~cvxdp.Sensitivity` is exceeded
(docs/own-agent.md). Sampling finds violations, never proves a bound.

Split from :mod:`cvxdp.model.agent` (issue 49).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np

from ..errors import check_float, check_int, fail
from .agent import Agent

__all__ = ["PROBE_RTOL", "DeclarationReport", "check_declaration"]

#: check_declaration: relative slack of every comparison (floating-point rounding of the user's own functions)
PROBE_RTOL = 1e-6


@dataclass
class DeclarationReport:
    """What :func:`check_declaration` measured, beside what the agent declares.

    Attributes
    ----------
    agent : str
        The agent's name.
    points : int
        Points of ``W_p`` sampled.
    neighbours : int
        Neighbouring data sets compared.
    lipschitz, l1, l2 : float or None
        The declared curvature bound and sensitivities.
    curvature : float
        The largest ``2 (f(u) - f(v) - <grad f(v), u - v>) / ||u - v||^2`` seen over the sampled pairs, on the
        agent's data and every neighbour's (a lower bound on the true ``L_p``).
    sensitivity_l1, sensitivity_l2 : float or None
        The largest ``||grad f(u; D) - grad f(u; D')||_q`` seen (None without neighbours).
    gradient_error : float
        The largest relative difference between the declared ``gradient`` and central finite differences of
        the objective along random directions.
    violations : list of str
        One sentence per declared value that a sample exceeds, naming the agent, the value and the sample.
    """

    agent: str
    points: int
    neighbours: int
    lipschitz: float | None
    l1: float | None
    l2: float | None
    curvature: float = 0.0
    sensitivity_l1: float | None = None
    sensitivity_l2: float | None = None
    gradient_error: float = 0.0
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no sample exceeded a declared value."""
        return not self.violations

    def __str__(self) -> str:
        def num(x: float | None) -> str:
            return "not declared" if x is None else f"{x:.4g}"

        lines = [f"Agent {self.agent!r}: {self.points} points of W, {self.neighbours} neighbouring data set(s)",
                 f"  lipschitz  declared {num(self.lipschitz)}, largest curvature seen {self.curvature:.4g}",
                 f"  l1         declared {num(self.l1)}, largest seen "
                 + ("n/a (no neighbours)" if self.sensitivity_l1 is None else f"{self.sensitivity_l1:.4g}"),
                 f"  l2         declared {num(self.l2)}, largest seen "
                 + ("n/a (no neighbours)" if self.sensitivity_l2 is None else f"{self.sensitivity_l2:.4g}"),
                 f"  gradient   largest relative error vs finite differences {self.gradient_error:.3g}"]
        lines += [f"  VIOLATION: {v}" for v in self.violations] or ["  no violation found (sampling cannot prove "
                                                                     "a bound)"]
        return "\n".join(lines)


def _sampler(agent: Agent) -> Callable[[np.ndarray], np.ndarray]:
    """Euclidean projection onto ``W_p`` (a CVXPY problem with the draw as a parameter)."""
    u = agent.u_expression()
    if not agent.constraints:
        return lambda z: z
    z = cp.Parameter(agent.layout.size)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(u - z)), list(agent.constraints))

    def project(draw: np.ndarray) -> np.ndarray:
        z.value = draw
        problem.solve()
        if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise fail("agent", "check_declaration", "an agent whose feasible set can be sampled "
                       "(projection onto W solved)", f"{agent.name!r} (projection status {problem.status})")
        return agent.layout.flatten({var: var.value for var in agent.layout.variables})

    return project


def _neighbour_list(neighbours: Any, count: int, rng: np.random.Generator, agent: Agent) -> list[Agent]:
    items = [neighbours(rng) for _ in range(count)] if callable(neighbours) else list(neighbours)
    for k, other in enumerate(items):
        if not isinstance(other, Agent) or other.layout.size != agent.layout.size:
            raise fail("neighbours", "check_declaration", f"agents on neighbouring data with the same variables as "
                       f"{agent.name!r} ({agent.layout.size} coordinates), or a function rng -> such an agent",
                       f"item {k}: {other!r}")
    return items


def check_declaration(agent: Agent, neighbours: Sequence[Agent] | Callable[[np.random.Generator], Agent] = (), *,
                      points: int = 20, count: int = 10, radius: float = 3.0, seed: int = 0) -> DeclarationReport:
    """Probe an agent's declared ``gradient``, ``lipschitz`` and ``sensitivity`` on random points and neighbouring
    data, and report every violation found.

    Parameters
    ----------
    agent : cvxdp.Agent
        The agent as declared (its data are the data set ``D``).
    neighbours : sequence of cvxdp.Agent, or callable(rng) -> cvxdp.Agent, optional
        The same agent built on neighbouring data sets ``D'`` (under the relation its ``Sensitivity`` names), or
        a function drawing one at random (called ``count`` times). Without them only the gradient and the
        curvature are probed.
    points : int, default 20
        Points of ``W_p``: normal draws of standard deviation ``radius`` per coordinate projected onto ``W_p``,
        and as many random convex combinations of them (inside ``W_p``, which is convex).
    count : int, default 10
        Neighbours drawn when ``neighbours`` is a function.
    radius : float, default 3.0
        Spread of the draws before projection (the points of an unbounded ``W_p`` stay within a few radii).
    seed : int, default 0
        Seed of the draws.

    Returns
    -------
    DeclarationReport
        The largest values seen beside the declared ones, and the violations (``report.ok`` when none);
        ``print(report)`` gives a summary.

    Notes
    -----
    Checked, with a relative slack of 1e-6: the curvature inequality ``f(u) <= f(v) + <grad f(v), u - v> +
    L/2 ||u - v||^2`` over pairs of sampled points, on ``D`` and on every neighbour (``lipschitz`` must hold for
    every neighbouring data set); ``||grad f(u; D) - grad f(u; D')||_q <= l_q`` at every sampled point and
    neighbour (q = 1, 2, as declared); and the declared ``gradient`` against central finite differences of the
    objective (relative error above 1e-4 is reported). Sampling only finds violations: a clean report is not a
    proof.

    Examples
    --------
    >>> report = cvxdp.check_declaration(agent, [make_agent(A, b_neighbour)])  # doctest: +SKIP
    >>> report.ok, print(report)  # doctest: +SKIP
    """
    if not isinstance(agent, Agent):
        raise fail("agent", "check_declaration", "a cvxdp.Agent", agent)
    points = check_int(points, "points", "check_declaration", 2)
    count = check_int(count, "count", "check_declaration", 1)
    radius = check_float(radius, "radius", "check_declaration", 0.0)
    rng = np.random.default_rng(check_int(seed, "seed", "check_declaration", 0))
    agent.check()
    project = _sampler(agent)
    n = agent.layout.size
    corners = [project(rng.normal(scale=radius, size=n)) for _ in range(points)]
    inner = [w * corners[i] + (1 - w) * corners[j] for i, j, w in
             zip(rng.integers(0, points, points), rng.integers(0, points, points), rng.uniform(0, 1, points))]
    sample = corners + inner
    others = _neighbour_list(neighbours, count, rng, agent)
    sens = agent.sensitivity
    report = DeclarationReport(agent.name, len(sample), len(others), agent.lipschitz,
                               None if sens is None else sens.l1, None if sens is None else sens.l2)

    _probe_gradient(agent, sample[:points], rng, report)
    _probe_curvature(agent, others, sample, 4 * points, rng, report)
    if others:
        _probe_sensitivity(agent, others, sample, report)
    if not all(math.isfinite(x) for x in (report.curvature, report.gradient_error)):
        report.violations.append(f"Agent {agent.name!r}: the objective or its gradient is not finite at a sampled "
                                 "point of W.")
    return report


def _probe_gradient(agent: Agent, points: list[np.ndarray], rng: np.random.Generator,
                    report: DeclarationReport) -> None:
    """The declared gradient against central finite differences of the objective, at ``points``."""
    name = f"Agent {agent.name!r}"
    n = agent.layout.size
    worst_grad = (0.0, None)
    for u in points:
        d = rng.normal(size=n)
        d /= np.linalg.norm(d) or 1.0
        h = 1e-5 * (1.0 + float(np.linalg.norm(u)))
        fd = (agent.objective_value(u + h * d) - agent.objective_value(u - h * d)) / (2 * h)
        g = float(np.asarray(agent.grad(u)) @ d)
        err = abs(fd - g) / max(1.0, abs(fd), abs(g))
        if err > worst_grad[0]:
            worst_grad = (err, u)
    report.gradient_error = worst_grad[0]
    if worst_grad[0] > 1e-4:
        report.violations.append(f"{name}: the declared gradient differs from finite differences of the objective "
                                 f"by {worst_grad[0]:.3g} (relative) at u = {np.round(worst_grad[1], 4).tolist()}.")


def _probe_curvature(agent: Agent, others: list[Agent], sample: list[np.ndarray], pairs: int,
                     rng: np.random.Generator, report: DeclarationReport) -> None:
    """The curvature inequality over ``pairs`` random pairs of sampled points, on D and on every neighbour."""
    name = f"Agent {agent.name!r}"
    worst_curv = (0.0, "", None)
    for who in [agent, *others]:
        values = [who.objective_value(u) for u in sample]
        grads = [np.asarray(who.grad(u), dtype=float) for u in sample]
        for i, j in zip(rng.integers(0, len(sample), pairs), rng.integers(0, len(sample), pairs)):
            step = sample[i] - sample[j]
            dist2 = float(step @ step)
            if dist2 <= 1e-16 * (1.0 + float(sample[j] @ sample[j])):
                continue
            gap = values[i] - values[j] - float(grads[j] @ step)
            curvature = 2.0 * gap / dist2
            if curvature > worst_curv[0]:
                worst_curv = (curvature, "D" if who is agent else "a neighbour", (sample[j], sample[i]))
    report.curvature = worst_curv[0]
    if agent.lipschitz is not None and worst_curv[0] > agent.lipschitz * (1 + PROBE_RTOL) + PROBE_RTOL:
        v, u = worst_curv[2]
        report.violations.append(f"{name}: declared lipschitz = {agent.lipschitz:.6g}, but on {worst_curv[1]} "
                                 f"f(u) - f(v) - <grad f(v), u - v> = {worst_curv[0]:.6g}/2 ||u - v||^2 at v = "
                                 f"{np.round(v, 4).tolist()}, u = {np.round(u, 4).tolist()}.")


def _probe_sensitivity(agent: Agent, others: list[Agent], sample: list[np.ndarray],
                       report: DeclarationReport) -> None:
    """The gradient sensitivity over the sampled points and the neighbours."""
    name = f"Agent {agent.name!r}"
    sens = agent.sensitivity
    seen = {1: (0.0, None), 2: (0.0, None)}
    for k, other in enumerate(others):
        for u in sample:
            diff = np.asarray(agent.grad(u), dtype=float) - np.asarray(other.grad(u), dtype=float)
            for q in (1, 2):
                value = float(np.linalg.norm(diff, q))
                if value > seen[q][0]:
                    seen[q] = (value, (k, u))
    report.sensitivity_l1, report.sensitivity_l2 = seen[1][0], seen[2][0]
    for q in (1, 2):
        declared = None if sens is None else sens.norm(q)
        if declared is not None and seen[q][0] > declared * (1 + PROBE_RTOL):
            k, u = seen[q][1]
            report.violations.append(
                f"{name}: declared Sensitivity l{q} = {declared:.6g}, but neighbour {k} changes the gradient by "
                f"{seen[q][0]:.6g} in l{q} norm at u = {np.round(u, 4).tolist()} (relation: "
                f"{sens.relation!r}).")
