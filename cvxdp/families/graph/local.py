"""Node-side math of decentralized ADMM over a graph (SPEC §3-§4): M-ADMM, PP, DVP, R-ADMM, MR-ADMM.

The rounds run on the one round loop (:mod:`cvxdp.run.loop`) through :class:`cvxdp.families.graph.server.GraphFamily`;
this module holds the local solves, the recycled step, the schedules and the privacy plan.

Nodes are ordinary :class:`cvxdp.Agent` objects whose shared blocks cover every coordinate of their local
vector (every node shares the full f; the papers' setting). The primal update of node i is always

    f_i = argmin_{f in W_i}  O(f, D_i) + a ||f||^2 - p^T f                               (:class:`LocalProx`)

with ``a = eta_i V_i`` and ``p = eta_i sum_{j in V_i} (f_i + f_j) - 2 lambda_i - noise``, where the noise is
``2 eta_i V_i eps`` (PP/DVP, eq. 24) or ``eps`` (MR-ADMM, eq. 18) and ``eps`` is Gamma-norm noise drawn from
node i's own generator (one per node from ``SeedSequence(seed).spawn(N)``, never reseeded). Expanding the
penalty ``eta sum_j ||f - (f_i + f_j)/2||^2`` gives exactly this form.

The local problem is compiled once per node: a damped Newton method when the agent's ``gradient`` is a
:class:`SmoothObjective` with a Hessian and there are no constraints (the ERM template), scipy's L-BFGS-B when
there is a gradient and no constraints, otherwise a CVXPY problem that is DPP in the two things that change
(``sum_squares(s * f)`` with the Parameter ``s = sqrt(a)`` and the linear Parameter ``p``), solved with the
solver chain (Clarabel, then ECOS).

Every iteration appends one row to ``result.history``: round, iteration ("exact" or "recycled"),
consensus_residual (``sum over edges ||f_i - f_j||``), max_deviation (``max_i ||f_i - mean f||``), primal/dual
residuals, eta_min/eta_max, and for private runs bound_P (the papers' bound so far: (26) or (32)), eps_basic
(the same, from the ledger) and eps_rdp (RDP of the pure steps) when the accountant is "rdp"; the PLD total
is computed once, in the final summary. With evaluation on (non-private evaluation, not released): objective
``sum_i O(f_i)``, average_loss (ERM nodes: the papers' ``L(t)``), max_violation, noise_magnitude (mean
``||eps||`` over the nodes; NaN on recycled iterations of private runs: no noise is drawn), solver_time.

``result.ledger`` is the run's :class:`~cvxdp.privacy.PrivacyLedger`: every perturbed iteration of a node is a
pure-epsilon DpEvent (:func:`~cvxdp.families.graph.mechanism.gamma_step_event`, its summand of bound (26)/(32)), every
recycled MR-ADMM iteration a no-op event. ``result.privacy`` is :func:`~cvxdp.families.graph.mechanism.gamma_summary` of it
(per node and worst node: basic = the papers' bound, RDP and PLD of the pure steps capped at basic;
``paper_bound``; ``free_steps``). ``Result.save`` stores the ledger and ``load_result`` rebuilds it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import cvxpy as cp
import numpy as np
import pandas as pd

from ...errors import DeclarationError, InvalidParameterError, SolverFailedError
from ...model.agent import Agent, check_agents
from ...model.evaluation import compiled_metrics
from ...model.local_solver import SolveReport, solve_chain
from ...params import fail
from .topology import check_graph

__all__ = ["LocalProx", "SmoothObjective", "privacy_plan", "recycled_step"]

_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
HISTORY_COLUMNS = ["round", "iteration", "objective", "consensus_residual", "max_deviation", "primal_residual",
                   "dual_residual", "max_violation", "noise_magnitude", "eta_min", "eta_max", "solver_time",
                   "wall_time"]


# --------------------------------------------------------------------------- local solves
class SmoothObjective:
    """A gradient callable that also exposes the objective's value (and optionally its Hessian) in numpy.

    Pass it as ``cvxdp.Agent(..., gradient=SmoothObjective(value, gradient, hessian))``: the engine calls it
    like any gradient, and the decentralized primal update uses ``value``/``hessian`` for a fast exact solve
    (Newton) when the agent has no constraints. All three take the flat local vector ``u``.
    """

    def __init__(self, value: Callable[[np.ndarray], float], gradient: Callable[[np.ndarray], np.ndarray],
                 hessian: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        self.value = value
        self.gradient = gradient
        self.hessian = hessian

    def __call__(self, u: np.ndarray) -> np.ndarray:
        return self.gradient(u)


class LocalProx:
    """Node i's exact primal update ``argmin_{u in W} O(u) + a ||u||^2 - p^T u`` (a > 0), compiled once.

    Parameters
    ----------
    agent : cvxdp.Agent
    method : {"auto", "newton", "lbfgs", "cvxpy"}
        See the module docstring; "auto" picks the fastest one the declaration allows.
    solvers : tuple of str
        CVXPY solver chain of the "cvxpy" method.
    tol : float
        Stationarity tolerance of the smooth methods: ``||grad|| <= tol * (1 + ||p||)``.

    Attributes
    ----------
    calls : int
        Number of solves so far (each one reads the node's data).
    """

    def __init__(self, agent: Agent, *, method: str = "auto", solvers: tuple[str, ...] = ("CLARABEL", "ECOS"),
                 tol: float = 1e-11) -> None:
        self.agent = agent
        self.solvers = tuple(s for s in solvers if s != "OSQP") or ("CLARABEL", "ECOS")
        self.tol = tol
        smooth = isinstance(agent.gradient, SmoothObjective)
        constrained = bool(agent.constraints)
        if method == "auto":
            if constrained or agent.gradient is None:
                method = "cvxpy"
            elif smooth and agent.gradient.hessian is not None:
                method = "newton"
            else:
                method = "lbfgs"
        if method in ("newton", "lbfgs") and constrained:
            raise InvalidParameterError(f"Agent {agent.name!r}: local_solver={method!r} needs an unconstrained "
                                        "node; use 'cvxpy' (or 'auto').")
        if method == "newton" and not (smooth and agent.gradient.hessian is not None):
            raise InvalidParameterError(f"Agent {agent.name!r}: local_solver='newton' needs gradient="
                                        "cvxdp.families.graph.local.SmoothObjective(value, gradient, hessian).")
        if method == "lbfgs" and agent.gradient is None:
            raise InvalidParameterError(f"Agent {agent.name!r}: local_solver='lbfgs' needs a gradient.")
        self.method = method
        self.calls = 0
        # the consensus vector f is the agent's shared blocks in sorted key order: f = u[perm]
        self.perm = agent.layout.shared_indices
        self._identity = bool(np.array_equal(self.perm, np.arange(agent.layout.size)))
        self._problem: tuple[cp.Problem, cp.Parameter, cp.Parameter] | None = None

    # -- layouts ------------------------------------------------------------
    def to_u(self, f: np.ndarray) -> np.ndarray:
        """The agent's flat local vector u of the consensus vector f."""
        if self._identity:
            return f
        u = np.empty(f.size)
        u[self.perm] = f
        return u

    def to_f(self, u: np.ndarray) -> np.ndarray:
        """The consensus vector f (shared blocks, sorted keys) of the agent's flat vector u."""
        return u if self._identity else u[self.perm]

    # -- numpy oracles ------------------------------------------------------
    def _value_u(self, u: np.ndarray) -> float:
        g = self.agent.gradient
        if isinstance(g, SmoothObjective):
            return float(g.value(u))
        return compiled_metrics(self.agent).objective(u)  # no CVXPY tree walk (cvxdp.model.evaluation)

    def value(self, f: np.ndarray) -> float:
        """``O(f, D_i)`` at the consensus vector f."""
        return self._value_u(self.to_u(f))

    def violation(self, f: np.ndarray) -> float:
        """Largest constraint violation at the consensus vector f (from the compiled metrics)."""
        return compiled_metrics(self.agent).violation(self.to_u(f))

    def _newton(self, a: float, p: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, str]:
        oracle: SmoothObjective = self.agent.gradient  # type: ignore[assignment]
        scale = 1.0 + float(np.linalg.norm(p))
        eye = 2.0 * a * np.eye(u.size)
        phi = oracle.value(u) + a * (u @ u) - p @ u
        best = math.inf
        for it in range(60):
            g = np.asarray(oracle.gradient(u), dtype=float) + 2.0 * a * u - p
            gn = float(np.linalg.norm(g))
            if gn <= self.tol * scale:
                return u, f"newton:{it}"
            if gn >= best and it > 3:  # stalled at machine precision
                return u, f"newton:{it}"
            best = min(best, gn)
            H = np.asarray(oracle.hessian(u), dtype=float) + eye
            try:
                step = -np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                step = -g / (2.0 * a)
            slope = float(g @ step)
            if -slope <= 1e-12 * (1.0 + abs(phi)):  # quadratic region: the full step, values cannot tell
                u = u + step
                phi = oracle.value(u) + a * (u @ u) - p @ u
                continue
            t = 1.0
            while True:
                cand = u + t * step
                phi_c = oracle.value(cand) + a * (cand @ cand) - p @ cand
                if phi_c <= phi + 1e-4 * t * slope or t < 1e-10:
                    break
                t *= 0.5
            u, phi = cand, phi_c
        return u, "newton:maxiter"

    def _lbfgs(self, a: float, p: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, str]:
        from scipy.optimize import minimize

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            return (self._value_u(x) + a * (x @ x) - p @ x,
                    self.agent.grad(x) + 2.0 * a * x - p)

        res = minimize(fun, u, jac=True, method="L-BFGS-B",
                       options={"maxiter": 5000, "gtol": self.tol * (1.0 + float(np.linalg.norm(p))),
                                "ftol": 1e-16, "maxcor": 20})
        return np.asarray(res.x, dtype=float), f"lbfgs:{res.nit}"

    def _cvxpy(self, a: float, p_val: np.ndarray, u: np.ndarray, round: int | None) -> tuple[np.ndarray, str]:
        if self._problem is None:
            x = self.agent.u_expression()
            s = cp.Parameter(nonneg=True, name="sqrt_penalty")
            p = cp.Parameter(x.size, name="linear")
            obj = self.agent.objective + cp.sum_squares(s * x) - p @ x
            self._problem = (cp.Problem(cp.Minimize(obj), self.agent.constraints), s, p)
        prob, s, p = self._problem
        s.value = math.sqrt(a)
        p.value = p_val
        for var, val in self.agent.layout.split(u).items():
            var.value = val
        name, failures = solve_chain(prob, self.solvers)
        if name is not None:
            layout = self.agent.layout
            return layout.flatten({var: var.value for var in layout.variables}), name
        raise SolverFailedError(f"Agent {self.agent.name!r}: every solver failed on the primal update in "
                                f"iteration {round} ({', '.join(failures)}).", agent=self.agent.name, round=round,
                                status=failures[-1] if failures else None)

    def solve(self, a: float, p: np.ndarray, warm: np.ndarray, *, round: int | None = None
              ) -> tuple[np.ndarray, SolveReport]:
        """The minimiser (a consensus vector f), warm-started at ``warm``, and what it cost.

        ``p`` and ``warm`` are consensus vectors too (``||f||^2`` does not depend on the layout).
        """
        self.calls += 1
        start = time.perf_counter()
        p, warm = self.to_u(p), self.to_u(warm)
        if self.method == "newton":
            u, solver = self._newton(a, p, warm.copy())
        elif self.method == "lbfgs":
            u, solver = self._lbfgs(a, p, warm.copy())
        else:
            u, solver = self._cvxpy(a, p, warm, round)
        if not np.all(np.isfinite(u)):
            raise SolverFailedError(f"Agent {self.agent.name!r}: the primal update in iteration {round} returned "
                                    f"non-finite values ({solver}).", agent=self.agent.name, round=round,
                                    status="non-finite")
        return self.to_f(u), SolveReport(solver=solver, seconds=time.perf_counter() - start)


def recycled_step(f_odd: np.ndarray, recycled: np.ndarray, lam: np.ndarray, eta: float, disagreement: np.ndarray,
                  degree: float, gamma: float) -> np.ndarray:
    """The even update (16)/(19) from stored quantities only (no data).

    ``f(2k) = f(2k-1) - (g + 2 lambda(2k-1) + eta sum_j (f_i(2k-1) - f_j(2k-1))) / (2 eta V + gamma)`` where
    ``recycled`` is ``g = eps + grad O(f(2k-1))`` from the odd iteration's KKT condition and ``disagreement``
    is ``sum_j (f_i(2k-1) - f_j(2k-1))``.
    """
    return f_odd - (recycled + 2.0 * lam + eta * disagreement) / (2.0 * eta * degree + gamma)


# --------------------------------------------------------------------------- checks
def _check_privacy(privacy: Any, owner: str) -> Any:
    from .mechanism import PenaltyPerturbation

    if privacy is None:
        return None
    if not isinstance(privacy, PenaltyPerturbation):
        raise fail("privacy", owner, "None or a cvxdp.PenaltyPerturbation (Gamma-norm noise; the Laplace/Gaussian "
                   "mechanisms belong to LinearizedADMM)", type(privacy).__name__)
    return privacy.validate()


def _check_nodes(agents: Sequence[Agent], owner: str) -> tuple[int, dict[str, int]]:
    sizes = check_agents(agents, private=False)
    keys = sorted(sizes)
    dims = set()
    for agent in agents:
        layout = agent.layout
        if sorted(layout.shared) != keys:
            raise DeclarationError(f"Agent {agent.name!r}: {owner} needs every node to share the same keys "
                                   f"{keys}; it shares {sorted(layout.shared)}.")
        if not np.all(layout.shared_mask):
            raise DeclarationError(f"Agent {agent.name!r}: {owner} needs every variable shared (every node shares "
                                   f"the full f); {int(np.sum(~layout.shared_mask))} local-only coordinate(s) found.")
        dims.add(layout.size)
    if len(dims) != 1:  # pragma: no cover - implied by equal shared sizes covering everything
        raise DeclarationError(f"{owner}: the nodes' local vectors differ in size ({sorted(dims)}).")
    return dims.pop(), sizes


# --------------------------------------------------------------------------- schedules and claims
def _penalty_schedule(algorithm: Any, names: Sequence[str]) -> Callable[[int], np.ndarray]:
    """``t -> eta_i(t)`` per node: ``eta_i(1) q_i^(t-1)`` (M-ADMM) or ``eta_hat_i q_i^ceil(t/2)`` (MR-ADMM)."""
    eta1, q = algorithm.penalties(names)
    if algorithm.kind == "radmm":
        return lambda t: eta1 * q ** ((t + 1) // 2)
    return lambda t: eta1 * q ** (t - 1)


def _step_epsilons(erm: Sequence[Any], alpha: np.ndarray, eta: np.ndarray, V: np.ndarray,
                   recycled: bool) -> np.ndarray:
    """The per-node claims of one perturbed iteration: the summands of (26) or, for MR-ADMM, (32)."""
    from .mechanism import madmm_step_epsilon, mradmm_step_epsilon

    if recycled:
        return np.array([mradmm_step_epsilon(c.C, c.c1, a, e, v, c.B, c.reg)
                         for c, a, e, v in zip(erm, alpha, eta, V)])
    return np.array([madmm_step_epsilon(c.C, c.c1, a, e, v, c.B) for c, a, e, v in zip(erm, alpha, eta, V)])


def privacy_plan(algorithm: Any, agents: Sequence[Agent], privacy: Any) -> pd.DataFrame:
    """The per-iteration claims of a run, computed before running it (no data read, no noise drawn).

    Returns a DataFrame indexed by iteration t = 1..T with one column per node (0 on recycled iterations);
    ``plan.sum().max()`` is the papers' bound (26)/(32) of the run, ``plan.cumsum().max(axis=1)`` is P(t).
    """
    from .mechanism import erm_constants

    algorithm.validate()
    privacy = _check_privacy(privacy, type(algorithm).__name__)
    if privacy is None:
        raise fail("privacy", "privacy_plan", "a cvxdp.PenaltyPerturbation", None)
    names = [a.name for a in agents]
    topo = check_graph(algorithm.build_graph(names), names, owner=f"{type(algorithm).__name__}'s graph")
    erm = [erm_constants(a) for a in agents]
    eta_of = _penalty_schedule(algorithm, names)
    recycled = algorithm.kind == "radmm"
    alpha1 = privacy.alphas(names)
    rows = []
    for t in range(1, algorithm.rounds + 1):
        if recycled and t % 2 == 0:
            rows.append(np.zeros(len(names)))
            continue
        alpha = privacy.alpha_at(alpha1, (t + 1) // 2 if recycled else t)
        rows.append(_step_epsilons(erm, alpha, eta_of(t), topo.degrees, recycled))
    return pd.DataFrame(rows, columns=names, index=pd.RangeIndex(1, algorithm.rounds + 1, name="round"))
