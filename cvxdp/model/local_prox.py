"""The graph family's exact primal update (:class:`LocalProx`): node i's ``argmin_{u in W} O(u) + a ||u||^2 - p^T u``
(a > 0), compiled once per agent.

Three methods: ``"newton"`` (damped Newton with a backtracking line search, for an unconstrained node whose
gradient is a :class:`~cvxdp.SmoothObjective` with a Hessian), ``"lbfgs"`` (SciPy's L-BFGS-B, for an
unconstrained node with a gradient) and ``"cvxpy"`` (the CVXPY problem with the penalty and the linear term as
parameters, solved through the solver chain of :func:`cvxdp.model.local_solver.solve_chain`; any feasible set).

Split from :mod:`cvxdp.model.local_solver` (issue 49).
"""

from __future__ import annotations

import math
import time

import cvxpy as cp
import numpy as np

from ..errors import InvalidParameterError, SolverFailedError
from .agent import Agent, SmoothObjective
from .evaluation import compiled_metrics
from .local_solver import SolveReport, solve_chain

__all__ = ["LocalProx"]


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
                                        "cvxdp.SmoothObjective(value, gradient, hessian).")
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
