"""Compiled local subproblems (SPEC §2 step 2, §7 fast path).

The linearized update is a weighted Euclidean projection ``argmin_{u in W} sum_i c_i/2 (u_i - v_i)^2``.
It is compiled once per agent:

* :class:`BoxProjection` — when ``W`` is a box (every constraint bounds one coordinate), the projection is
  a clip, whatever the weights.
* :class:`ConicProjection` — otherwise CVXPY canonicalizes ``W`` once; each call only writes the linear
  term ``q = -c*v`` (and the diagonal of ``P`` when the weights change) and hands the cached canonical data
  into a live Clarabel solver — no CVXPY work in the loop.
  If Clarabel fails the call falls back to ECOS, then OSQP (QP-representable sets), through a CVXPY
  problem whose only changing data are Parameters (DPP, warm-started). When every solver fails a
  :class:`~cvxdp.errors.SolverFailedError` names the agent and status.

:class:`ProxSolver` is the exact ADMM local step ``argmin_{u in W} f(u) + rho/2 ||E u - t||^2``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import clarabel
import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from cvxpy.reductions.solvers.conic_solvers.clarabel_conif import dims_to_solver_cones

from .agent import Agent
from .errors import SolverFailedError

DEFAULT_SOLVERS = ("CLARABEL", "ECOS", "OSQP")
_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)


@dataclass
class SolveReport:
    """What one local solve cost and which solver produced it."""

    solver: str = "closed-form"
    seconds: float = 0.0
    fallbacks: list[str] = field(default_factory=list)  # "SOLVER:status" of each failed attempt


def solve_chain(prob: cp.Problem, solvers: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """Solve a compiled CVXPY problem with each solver in turn (warm-started).

    Returns the name of the first solver that reached an optimal status (None if none did) and the
    ``"SOLVER:status"`` of every failed attempt.
    """
    failures: list[str] = []
    for name in solvers:
        try:
            prob.solve(solver=name, warm_start=True)
            status = prob.status
        except (cp.SolverError, ValueError) as exc:
            status = f"error ({exc.__class__.__name__})"
        if status in _OK:
            return name, failures
        failures.append(f"{name}:{status}")
    return None, failures


class BoxProjection:
    """Closed-form projection onto ``{lo <= u <= hi}`` (a clip; independent of the weights)."""

    is_box = True

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi

    def project(self, v: np.ndarray, c: np.ndarray, *, round: int | None = None) -> tuple[np.ndarray, SolveReport]:
        return np.clip(v, self.lo, self.hi), SolveReport()


def _box_bounds(data: dict, cols: np.ndarray, n_x: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Read ``lo <= u <= hi`` off the canonical data, or ``None`` if W is not a box."""
    dims = data["dims"]
    if n_x != len(cols) or dims.soc or dims.exp or dims.psd or getattr(dims, "p3d", None):
        return None
    A = sp.csr_matrix(data["A"], copy=True)
    A.eliminate_zeros()
    b = np.asarray(data["b"], dtype=float)
    col_to_u = np.full(n_x, -1)
    col_to_u[cols] = np.arange(len(cols))
    lo = np.full(len(cols), -np.inf)
    hi = np.full(len(cols), np.inf)
    nnz = np.diff(A.indptr)
    if np.any(nnz > 1):
        return None
    for row in range(A.shape[0]):
        if nnz[row] == 0:
            continue
        a = A.data[A.indptr[row]]
        j = col_to_u[A.indices[A.indptr[row]]]
        bound = b[row] / a
        if row < dims.zero:  # a x + s = b, s = 0
            lo[j] = max(lo[j], bound)
            hi[j] = min(hi[j], bound)
        elif a > 0:  # a x <= b
            hi[j] = min(hi[j], bound)
        else:
            lo[j] = max(lo[j], bound)
    return lo, hi


class ConicProjection:
    """Weighted projection onto a general convex ``W``, compiled once, Clarabel first then fallbacks."""

    is_box = False

    def __init__(self, agent: Agent, data: dict, cols: np.ndarray, *,
                 solvers: tuple[str, ...] = DEFAULT_SOLVERS, settings: dict | None = None) -> None:
        self.agent = agent
        self.cols = cols
        self.n_x = data["A"].shape[1]
        self.A = sp.csc_matrix(data["A"])
        self.b = np.asarray(data["b"], dtype=float)
        self.cones = dims_to_solver_cones(data["dims"])
        self.solvers = tuple(solvers)
        self.settings = clarabel.DefaultSettings()
        self.settings.verbose = False
        self.settings.presolve_enable = False  # q updates need the un-presolved problem
        # a duality gap g leaves the strongly convex projection sqrt(2g/c) from the optimum: ask for a small gap
        self.settings.tol_gap_abs = 1e-10
        self.settings.tol_gap_rel = 1e-10
        for key, value in (settings or {}).items():
            setattr(self.settings, key, value)
        self._weights: np.ndarray | None = None
        self._solver: clarabel.DefaultSolver | None = None
        self._fallback: dict[bytes, tuple[cp.Problem, cp.Parameter]] = {}

    # -- direct Clarabel path -------------------------------------------------
    def _P(self, c: np.ndarray) -> sp.csc_matrix:
        diag = np.zeros(self.n_x)
        diag[self.cols] = c
        return sp.triu(sp.diags(diag), format="csc")

    def _clarabel(self, v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray | None, str]:
        # The live solver is always set up with q = 0 (when the weights change) and then only receives
        # update(q=...). Clarabel's setup-time scalings therefore never depend on earlier calls: the answer is a
        # function of (v, c) alone — bit for bit — so resumed runs and other backends give the same numbers.
        if self._solver is None or not np.array_equal(c, self._weights):
            self._solver = clarabel.DefaultSolver(self._P(c), np.zeros(self.n_x), self.A, self.b, self.cones,
                                                  self.settings)
            self._weights = c.copy()
        q = np.zeros(self.n_x)
        q[self.cols] = -c * v
        self._solver.update(q=q)
        sol = self._solver.solve()
        status = str(sol.status)
        if sol.status in (clarabel.SolverStatus.Solved, clarabel.SolverStatus.AlmostSolved):
            return np.asarray(sol.x)[self.cols], status
        return None, status

    # -- CVXPY fallback path ----------------------------------------------------
    def _cvxpy(self, name: str, v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray | None, str]:
        key = c.tobytes()
        if key not in self._fallback:
            u = self.agent.u_expression()
            p = cp.Parameter(len(c))
            obj = 0.5 * cp.sum(cp.multiply(c, cp.square(u))) - p @ u
            self._fallback[key] = (cp.Problem(cp.Minimize(obj), self.agent.constraints), p)
        prob, p = self._fallback[key]
        if name == "OSQP" and not prob.is_qp():
            return None, "not a QP"
        p.value = c * v
        try:
            prob.solve(solver=name, warm_start=True)
        except (cp.SolverError, ValueError) as exc:
            return None, f"error ({exc.__class__.__name__})"
        if prob.status not in _OK:
            return None, str(prob.status)
        return self.agent.layout.flatten({var: var.value for var in self.agent.layout.variables}), prob.status

    def project(self, v: np.ndarray, c: np.ndarray, *, round: int | None = None) -> tuple[np.ndarray, SolveReport]:
        report = SolveReport()
        start = time.perf_counter()
        for name in self.solvers:
            if name == "CLARABEL":
                u, status = self._clarabel(v, c)
            else:
                u, status = self._cvxpy(name, v, c)
            if u is not None:
                report.solver, report.seconds = name, time.perf_counter() - start
                return u, report
            report.fallbacks.append(f"{name}:{status}")
        where = {None: "", 0: " for the initial point (round 0)"}.get(round, f" in round {round}")
        raise SolverFailedError(f"Agent {self.agent.name!r}: every solver failed on the local update{where} "
                                f"({', '.join(report.fallbacks)}).", agent=self.agent.name, round=round,
                                status=report.fallbacks[-1] if report.fallbacks else None)


def compile_projection(agent: Agent, *, solvers: tuple[str, ...] = DEFAULT_SOLVERS,
                       settings: dict | None = None) -> BoxProjection | ConicProjection:
    """Canonicalize ``W_p`` once and return the fastest projection that fits it."""
    quad = cp.sum([cp.sum_squares(var) for var in agent.layout.variables])
    prob = cp.Problem(cp.Minimize(0.5 * quad), agent.constraints)
    data, _, _ = prob.get_problem_data(cp.CLARABEL)
    var_to_col = data[cp.settings.PARAM_PROB].var_id_to_col
    cols = np.concatenate([var_to_col[var.id] + np.arange(var.size) for var in agent.layout.variables])
    box = _box_bounds(data, cols, data["A"].shape[1])
    if box is not None:
        return BoxProjection(*box)
    return ConicProjection(agent, data, cols, solvers=solvers, settings=settings)


class ProxSolver:
    """Exact ADMM local step ``argmin_{u in W} f(u) + rho/2 ||E u||^2 - p^T E u`` with ``p = rho*target``.

    Compiled once per value of rho (DPP: only ``p`` changes between calls), warm-started.
    """

    def __init__(self, agent: Agent, *, solvers: tuple[str, ...] = ("CLARABEL", "ECOS")) -> None:
        self.agent = agent
        self.solvers = solvers
        self._problems: dict[float, tuple[cp.Problem, cp.Parameter]] = {}

    def _problem(self, rho: float) -> tuple[cp.Problem, cp.Parameter]:
        if rho not in self._problems:
            shared = self.agent.u_expression()[self.agent.layout.shared_indices]
            p = cp.Parameter(shared.size)
            obj = self.agent.objective + rho / 2 * cp.sum_squares(shared) - p @ shared
            self._problems[rho] = (cp.Problem(cp.Minimize(obj), self.agent.constraints), p)
        return self._problems[rho]

    def solve(self, target: np.ndarray, rho: float, *, round: int | None = None) -> tuple[np.ndarray, SolveReport]:
        prob, p = self._problem(rho)
        p.value = rho * target
        start = time.perf_counter()
        name, failures = solve_chain(prob, self.solvers)
        report = SolveReport(solver=name or "", seconds=time.perf_counter() - start, fallbacks=failures)
        if name is None:
            raise SolverFailedError(f"Agent {self.agent.name!r}: every solver failed on the exact local step in "
                                    f"round {round} ({', '.join(failures)}).", agent=self.agent.name,
                                    round=round, status=failures[-1])
        layout = self.agent.layout
        return layout.flatten({var: var.value for var in layout.variables}), report
