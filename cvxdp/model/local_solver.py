"""Compiled local subproblems (SPEC §2 step 2, §7 fast path).

The linearized update is a weighted Euclidean projection ``argmin_{u in W} sum_i c_i/2 (u_i - v_i)^2``.
It is compiled once per agent and data (the canonical data come from :mod:`cvxdp.model.compiled`):

* :class:`BoxProjection` — when ``W`` is a box (every constraint bounds one coordinate), the projection is
  a clip, whatever the weights. A box declared as such (``lb <= x``, ``x[i] <= ub``: :func:`declared_box`) is
  read off the constraint objects, without canonicalizing.
* :class:`ConicProjection` — otherwise CVXPY canonicalizes ``W`` once; each call only writes the linear
  term ``q = -c*v`` (and the diagonal of ``P`` when the weights change) and hands the cached canonical data
  into a live Clarabel solver — no CVXPY work in the loop.
  If Clarabel does not solve the problem (see :class:`LiveClarabel` for the accepted statuses and the retry)
  the call falls back to ECOS, then OSQP (QP-representable sets), through a CVXPY problem whose only changing
  data are Parameters (DPP, warm-started). Every failed attempt is recorded in the history's ``fallbacks``,
  an answer accepted at a looser tolerance or from the retry in its ``solver`` label. When every solver fails
  a :class:`~cvxdp.errors.SolverFailedError` names the agent and status.

:class:`ProxSolver` is the exact ADMM local step ``argmin_{u in W} f(u) + rho/2 ||E u - t||^2``, on the same
compiled data and the same live-Clarabel-then-fallbacks scheme.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import clarabel
import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..errors import DeclarationError, InvalidParameterError, SolverFailedError
from .agent import Agent, declared_box
from .compiled import ConeData, NotCompilable, constraint_data, prox_constraint_data, prox_data

DEFAULT_SOLVERS = ("CLARABEL", "ECOS", "OSQP")
_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
#: an AlmostSolved (or stalled) Clarabel answer is accepted only when its primal residual is at most
#: ``LOOSE_PRIMAL`` (the iterate is feasible to 1e-6), its dual residual at most ``LOOSE_DUAL`` (Clarabel's
#: ``reduced_tol_feas``) and its relative duality gap ``|p - d| / max(1, |p|)`` at most ``LOOSE_GAP`` (Clarabel's
#: ``reduced_tol_gap_rel``); the solver label then says so
LOOSE_PRIMAL = 1e-6
LOOSE_DUAL = 1e-4
LOOSE_GAP = 5e-5
#: Clarabel settings of the retries after a failed solve (in turn, before the fallback solvers; each on a fresh
#: solver set up with the actual q): first the same settings (at least 500 iterations) -- the fresh set-up
#: equilibrates for this q, where the live solver kept the scaling of its set-up q (a zone of case2869pegase
#: whose live solve ends NumericalError solves this way in 0.06 s, where it went on to ECOS for 2.8 s); then
#: more iterative refinement and dynamic regularization (the failures seen on case1354pegase zones are KKT
#: solves losing precision); then no equilibration and more static regularization
ROBUST_SETTINGS = (
    {"max_iter": 500},
    {"iterative_refinement_max_iter": 50, "iterative_refinement_reltol": 1e-15,
     "iterative_refinement_abstol": 1e-15, "dynamic_regularization_delta": 1e-5, "max_iter": 500},
    {"equilibrate_enable": False, "static_regularization_constant": 1e-7, "max_iter": 500},
)
_ACCEPTABLE = (clarabel.SolverStatus.AlmostSolved, clarabel.SolverStatus.InsufficientProgress,
               clarabel.SolverStatus.MaxIterations)


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


def clarabel_settings(overrides: dict | None = None, *, tight: bool = False,
                      robust: dict | None = None) -> clarabel.DefaultSettings:
    """Quiet Clarabel settings without presolve (q updates need the un-presolved problem).

    ``tight`` asks for a small duality gap: a gap g leaves a strongly convex projection sqrt(2g/c) from its
    optimum. ``robust`` (one of :data:`ROBUST_SETTINGS`) applies on top of ``overrides`` (``max_iter``: at
    least the larger of the two).
    """
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.presolve_enable = False
    if tight:
        settings.tol_gap_abs = 1e-10
        settings.tol_gap_rel = 1e-10
    for key, value in (overrides or {}).items():
        setattr(settings, key, value)
    for key, value in (robust or {}).items():
        setattr(settings, key, max(value, settings.max_iter) if key == "max_iter" else value)
    return settings


def _loose_enough(sol: object) -> bool:
    """Whether a not-quite-solved Clarabel answer meets the stated looser tolerance (:data:`LOOSE_PRIMAL`)."""
    if sol.status not in _ACCEPTABLE:
        return False
    p, d = float(sol.obj_val), float(sol.obj_val_dual)
    residuals = (float(sol.r_prim), float(sol.r_dual), p, d)
    if not all(np.isfinite(residuals)) or not np.all(np.isfinite(sol.x)):
        return False
    return residuals[0] <= LOOSE_PRIMAL and residuals[1] <= LOOSE_DUAL and abs(p - d) <= LOOSE_GAP * max(1.0, abs(p))


class LiveClarabel:
    """A Clarabel solver on fixed ``A, b, K`` that is set up once per quadratic term and then only receives q.

    The solver is always set up with the same fixed linear term ``setup_q`` (whenever ``key``, which identifies
    ``P``, changes) and then only receives ``update(q=...)``. Clarabel's setup-time scalings therefore never
    depend on earlier calls: the answer is a function of (P, q) alone — bit for bit — so resumed runs and other
    backends give the same numbers. ``setup_q`` is the problem's own linear term (the exact ADMM step passes
    ``f``'s, so Clarabel scales the cost from the objective rather than from zero: on case1354pegase's zones
    that cuts the answers that end AlmostSolved over 100 rounds from 316 to 129 of 800); zero by default.

    What counts as solved: ``Solved``; ``AlmostSolved`` (or a stalled ``InsufficientProgress`` /
    ``MaxIterations``) only when it meets :data:`LOOSE_PRIMAL` / :data:`LOOSE_DUAL` / :data:`LOOSE_GAP`, reported as the
    status ``"AlmostSolved"``. Anything else is retried on fresh solvers set up with the actual q, one per
    entry of ``retry_settings`` (:data:`ROBUST_SETTINGS`; a function of (P, q) too), reported as ``"retry"``
    (``"retry2"``...) or ``"retry,AlmostSolved"`` with the failed statuses recorded as failed attempts.
    """

    def __init__(self, data: ConeData, settings: clarabel.DefaultSettings,
                 retry_settings: tuple[clarabel.DefaultSettings, ...] = (), setup_q: np.ndarray | None = None) -> None:
        self.data = data
        self.setup_q = np.zeros(data.n_x) if setup_q is None else np.asarray(setup_q, dtype=float).copy()
        self.cones = data.cones()
        self.settings = settings
        self.retry_settings = tuple(retry_settings)
        self._key: object = None
        self._P: sp.csc_matrix | None = None
        self._solver: clarabel.DefaultSolver | None = None

    def solve(self, key: object, make_P: Callable[[], sp.csc_matrix], q: np.ndarray
              ) -> tuple[np.ndarray | None, str, list[str]]:
        """``x`` (None on failure), the status and the failed attempts before ``x``; ``key`` (compared with ==)
        identifies ``P``."""
        d = self.data
        if self._solver is None or key != self._key:
            self._P = sp.triu(make_P(), format="csc")
            self._solver = clarabel.DefaultSolver(self._P, self.setup_q, d.A, d.b, self.cones, self.settings)
            self._key = key
        self._solver.update(q=q)
        sol = self._solver.solve()
        if sol.status == clarabel.SolverStatus.Solved:
            return np.asarray(sol.x), "Solved", []
        if _loose_enough(sol):
            return np.asarray(sol.x), "AlmostSolved", []
        statuses = [str(sol.status)]
        for k, settings in enumerate(self.retry_settings, start=1):
            retry = clarabel.DefaultSolver(self._P, np.asarray(q, dtype=float), d.A, d.b, self.cones,
                                           settings).solve()
            label = "retry" if k == 1 else f"retry{k}"
            failed = [f"CLARABEL:{statuses[0]}"] + [f"CLARABEL {'retry' if i == 1 else f'retry{i}'}:{st}"
                                                    for i, st in enumerate(statuses[1:], start=1)]
            if retry.status == clarabel.SolverStatus.Solved:
                return np.asarray(retry.x), label, failed
            if _loose_enough(retry):
                return np.asarray(retry.x), f"{label},AlmostSolved", failed
            statuses.append(str(retry.status))
        return None, "; ".join([statuses[0]] + [f"retry {st}" for st in statuses[1:]]), []


def _diag_on(n_x: int, cols: np.ndarray, weights: np.ndarray) -> sp.csc_matrix:
    diag = np.zeros(n_x)
    diag[cols] = weights
    return sp.diags(diag, format="csc")


def _solve_cvxpy(prob: cp.Problem, name: str, agent: Agent, *, warm_start: bool = True,
                 ) -> tuple[np.ndarray | None, str]:
    """One fallback attempt through a (DPP, by default warm-started) CVXPY problem; the flat ``u`` or None."""
    if name == "OSQP" and not prob.is_qp():
        return None, "not a QP"
    try:
        prob.solve(solver=name, warm_start=warm_start)
    except (cp.SolverError, ValueError) as exc:
        return None, f"error ({exc.__class__.__name__})"
    if prob.status not in _OK:
        return None, str(prob.status)
    return agent.layout.flatten({var: var.value for var in agent.layout.variables}), prob.status


def _run_chain(attempt: Callable[[str], tuple], solvers: tuple[str, ...], agent: Agent,
               what: str, round: int | None) -> tuple[np.ndarray, SolveReport]:
    """Try each solver in turn; record the failed ones; raise :class:`SolverFailedError` if all fail.

    ``attempt(name)`` returns ``(u or None, status)`` or ``(u or None, status, failed attempts before u)``. A
    solution with a status other than an optimal one ("Solved", "optimal") is labelled ``"NAME(status)"``.
    """
    report = SolveReport()
    start = time.perf_counter()
    for name in solvers:
        u, status, *notes = attempt(name)
        if u is not None:
            report.fallbacks += notes[0] if notes else []
            report.solver = name if status in ("Solved", cp.OPTIMAL) else f"{name}({status})"
            report.seconds = time.perf_counter() - start
            return u, report
        report.fallbacks.append(f"{name}:{status}")
    where = {None: "", 0: " for the initial point (round 0)"}.get(round, f" in round {round}")
    raise SolverFailedError(f"Agent {agent.name!r}: every solver failed on the {what}{where} "
                            f"({', '.join(report.fallbacks)}).", agent=agent.name, round=round,
                            status=report.fallbacks[-1] if report.fallbacks else None)


class BoxProjection:
    """Closed-form projection onto ``{lo <= u <= hi}`` (a clip; independent of the weights)."""

    is_box = True

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        # the same bounds on every coordinate: clip to two numbers (the same values; reads one array, not three)
        uniform = np.size(lo) > 0 and np.all(lo == np.ravel(lo)[0]) and np.all(hi == np.ravel(hi)[0])
        self._bounds = (float(np.ravel(lo)[0]), float(np.ravel(hi)[0])) if uniform else (lo, hi)

    def project(self, v: np.ndarray, c: np.ndarray, *, round: int | None = None) -> tuple[np.ndarray, SolveReport]:
        return np.clip(v, *self._bounds), SolveReport()


def _box_bounds(data: ConeData) -> tuple[np.ndarray, np.ndarray] | None:
    """Read ``lo <= u <= hi`` off the canonical data, or ``None`` if W is not a box."""
    cols, n_x, dims = data.cols, data.n_x, data.dims
    if n_x != len(cols) or not dims.only_linear:
        return None
    A = sp.csr_matrix(data.A, copy=True)
    A.eliminate_zeros()
    b = data.b
    col_to_u = np.full(n_x, -1)
    col_to_u[cols] = np.arange(len(cols))
    lo = np.full(len(cols), -np.inf)
    hi = np.full(len(cols), np.inf)
    nnz = np.diff(A.indptr)
    if np.any(nnz > 1):
        return None
    rows = np.flatnonzero(nnz == 1)
    a = A.data[A.indptr[rows]]
    j = col_to_u[A.indices[A.indptr[rows]]]
    bound = b[rows] / a
    equality = rows < dims.zero  # a x + s = b, s = 0
    upper = equality | (a > 0)  # a x <= b
    lower = equality | (a < 0)
    np.minimum.at(hi, j[upper], bound[upper])
    np.maximum.at(lo, j[lower], bound[lower])
    return lo, hi


class ConicProjection:
    """Weighted projection onto a general convex ``W``, compiled once, Clarabel first then fallbacks."""

    is_box = False

    def __init__(self, agent: Agent, data: ConeData, *, solvers: tuple[str, ...] = DEFAULT_SOLVERS,
                 settings: dict | None = None) -> None:
        self.agent = agent
        self.data = data
        self.cols = data.cols
        self.n_x = data.n_x
        self.A, self.b, self.cones = data.A, data.b, data.cones()
        self.solvers = tuple(solvers)
        self.settings = clarabel_settings(settings, tight=True)
        self._live = LiveClarabel(data, self.settings, tuple(clarabel_settings(settings, tight=True, robust=r)
                                                             for r in ROBUST_SETTINGS))
        self._fallback: dict[bytes, tuple[cp.Problem, cp.Parameter]] = {}

    # -- direct Clarabel path -------------------------------------------------
    def _P(self, c: np.ndarray) -> sp.csc_matrix:
        return sp.triu(_diag_on(self.n_x, self.cols, c), format="csc")

    def _clarabel(self, v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray | None, str, list[str]]:
        q = np.zeros(self.n_x)
        q[self.cols] = -c * v
        x, status, failed = self._live.solve(c.tobytes(), lambda: self._P(c), q)
        return (None if x is None else x[self.cols]), status, failed

    # -- CVXPY fallback path ----------------------------------------------------
    def _cvxpy(self, name: str, v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray | None, str]:
        key = c.tobytes()
        if key not in self._fallback:
            u = self.agent.u_expression()
            p = cp.Parameter(len(c))
            obj = 0.5 * cp.sum(cp.multiply(c, cp.square(u))) - p @ u
            self._fallback[key] = (cp.Problem(cp.Minimize(obj), self.agent.constraints), p)
        prob, p = self._fallback[key]
        p.value = c * v
        return _solve_cvxpy(prob, name, self.agent)

    def project(self, v: np.ndarray, c: np.ndarray, *, round: int | None = None) -> tuple[np.ndarray, SolveReport]:
        def attempt(name: str) -> tuple:
            return self._clarabel(v, c) if name == "CLARABEL" else self._cvxpy(name, v, c)
        return _run_chain(attempt, self.solvers, self.agent, "local update", round)


def compile_projection(agent: Agent, *, solvers: tuple[str, ...] = DEFAULT_SOLVERS,
                       settings: dict | None = None, exact: bool = False,
                       closed_form: bool = True) -> BoxProjection | ConicProjection:
    """The fastest projection onto ``W_p`` that fits, from its compiled data (canonicalized once per data).

    A box declared as such (:func:`declared_box`: variables or slices bounded by constants) is a clip built
    from the constraint objects, with no canonicalization (``closed_form=False`` forces the compiled path,
    which finds the same box in the canonical data). ``exact=True`` (exact ADMM) reads ``W_p``'s rows out of
    the prox step's compiled data (:func:`cvxdp.model.compiled.prox_constraint_data`) instead of compiling
    ``W_p`` on its own.
    """
    box = declared_box(agent) if closed_form else None
    if box is not None:
        return BoxProjection(*box)
    try:
        data = prox_constraint_data(agent) if exact else constraint_data(agent)
    except NotCompilable as exc:
        raise DeclarationError(f"Agent {agent.name!r}: the feasible set cannot be compiled ({exc}); declare "
                               "sign or structure attributes of variables as constraints instead.") from exc
    return projection_onto(agent, data, solvers=solvers, settings=settings)


def projection_onto(agent: Agent, data: ConeData, *, solvers: tuple[str, ...] = DEFAULT_SOLVERS,
                    settings: dict | None = None) -> BoxProjection | ConicProjection:
    """The projection onto ``W_p`` given its compiled ``data``: a clip when ``W_p`` is a box, else conic."""
    box = _box_bounds(data)
    if box is not None:
        return BoxProjection(*box)
    return ConicProjection(agent, data, solvers=solvers, settings=settings)


def _rho_key(rho: float | np.ndarray) -> object:
    """A hashable key of the penalty (a scalar, or one weight per shared coordinate)."""
    return float(rho) if np.ndim(rho) == 0 else np.asarray(rho, dtype=float).tobytes()


class ProxSolver:
    """Exact ADMM local step ``argmin_{u in W} f(u) + rho/2 ||E u||^2 - p^T E u`` with ``p = rho*target``.

    Compiled path (default): the data of ``min f(u) s.t. u in W`` come from :func:`cvxdp.model.compiled.prox_data`
    (one canonicalization, shared with the checks and the projection); ``rho/2 ||E u||^2`` is added to ``P`` on the shared columns and
    ``-p^T E u`` is written into ``q`` on the same columns — that is exactly where CVXPY would put a linear
    Parameter term of ``u``, so no parameter mapping is needed. A live Clarabel solver is set up (with f's q)
    once per value of rho and then only receives ``update(q=...)``. Fallbacks ECOS -> OSQP (QPs only) go through
    a DPP CVXPY problem per rho (``p`` a Parameter, warm-started), recorded like the linearized path's.

    Where the canonical data cannot be mapped back to the agent's variables (a variable declared with
    attributes such as ``nonneg=True``, generalized power cones) — or with ``compiled=False`` — every solve goes
    through that CVXPY problem (``path == "cvxpy"``).
    """

    def __init__(self, agent: Agent, *, solvers: tuple[str, ...] = DEFAULT_SOLVERS, settings: dict | None = None,
                 compiled: bool = True) -> None:
        self.agent = agent
        self.solvers = tuple(solvers)
        self.sidx = agent.layout.shared_indices
        self._problems: dict[float, tuple[cp.Problem, cp.Parameter]] = {}
        self._overrides = settings
        self._polish_A: sp.csc_matrix | None = None  # the polish's constraint data, built on the first polish
        self._polish_problem: tuple[cp.Problem, cp.Parameter] | None = None
        self.data: ConeData | None = None
        if compiled:
            try:
                self.data = prox_data(agent)
            except NotCompilable:
                self.data = None
        self.path = "compiled" if self.data is not None else "cvxpy"
        if self.data is not None:
            self.settings = clarabel_settings(settings)
            self._live = LiveClarabel(self.data, self.settings,
                                      tuple(clarabel_settings(settings, robust=r) for r in ROBUST_SETTINGS),
                                      setup_q=self.data.q)
            self._scols = self.data.cols[self.sidx]

    def _problem(self, rho: float | np.ndarray) -> tuple[cp.Problem, cp.Parameter]:
        key = _rho_key(rho)
        if key not in self._problems:
            shared = self.agent.u_expression()[self.sidx]
            p = cp.Parameter(shared.size)
            quad = (rho / 2 * cp.sum_squares(shared) if np.ndim(rho) == 0
                    else cp.sum(cp.multiply(np.asarray(rho) / 2, cp.square(shared))))
            obj = self.agent.objective + quad - p @ shared
            self._problems[key] = (cp.Problem(cp.Minimize(obj), self.agent.constraints), p)
        return self._problems[key]

    def _clarabel(self, target: np.ndarray, rho: float | np.ndarray) -> tuple[np.ndarray | None, str, list[str]]:
        d = self.data
        q = d.q.copy()
        q[self._scols] -= rho * target
        weights = np.broadcast_to(np.asarray(rho, dtype=float), self._scols.shape)
        x, status, failed = self._live.solve(_rho_key(rho), lambda: d.P + _diag_on(d.n_x, self._scols, weights), q)
        return (None if x is None else x[d.cols]), status, failed

    def _cvxpy(self, name: str, target: np.ndarray, rho: float) -> tuple[np.ndarray | None, str]:
        prob, p = self._problem(rho)
        p.value = rho * target
        return _solve_cvxpy(prob, name, self.agent)

    def solve(self, target: np.ndarray, rho: float, *, round: int | None = None) -> tuple[np.ndarray, SolveReport]:
        def attempt(name: str) -> tuple:
            if name == "CLARABEL" and self.data is not None:
                return self._clarabel(target, rho)
            return self._cvxpy(name, target, rho)
        return _run_chain(attempt, self.solvers, self.agent, "exact local step", round)

    # ------------------------------------------------------------------ consensus polishing
    def polish(self, target: np.ndarray, *, round: int | None = None) -> tuple[np.ndarray | None, SolveReport]:
        """``argmin_{u in W} f(u)`` subject to ``E u = target`` (the shared block fixed), or None when no point
        of ``W`` has that shared block.

        Compiled path: the same compiled data with ``E u = target`` prepended as zero-cone rows, a fresh Clarabel
        set-up per call (so the answer depends on ``target`` only, never on earlier polishes: a resumed run
        repeats the uninterrupted one); a failure other than infeasibility tries the
        other solvers on a DPP CVXPY problem. Unlike :meth:`solve`, nothing raises: a polish that no solver
        answers is reported as not polished (``report.solver == "none"``, the statuses in its fallbacks).
        """
        start = time.perf_counter()
        report = SolveReport(solver="none")
        names = list(self.solvers)
        if self.data is not None and "CLARABEL" in names:
            names.remove("CLARABEL")
            x, status = self._polish_clarabel(np.asarray(target, dtype=float))
            if status == "infeasible" or x is not None:
                report.solver = "CLARABEL" if status == "Solved" else f"CLARABEL({status})"
                report.seconds = time.perf_counter() - start
                return x, report
            report.fallbacks.append(f"CLARABEL:{status}")
        for name in names:
            x, status = self._polish_cvxpy(name, target)
            if x is not None or status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
                report.solver = name if x is None or status == cp.OPTIMAL else f"{name}({status})"
                break
            report.fallbacks.append(f"{name}:{status}")
        report.seconds = time.perf_counter() - start
        return (x if report.solver != "none" else None), report

    def _polish_clarabel(self, target: np.ndarray) -> tuple[np.ndarray | None, str]:
        d, k = self.data, self._scols.size
        b = np.concatenate([target, d.b])
        if self._polish_A is None:
            rows = sp.csc_matrix((np.ones(k), (np.arange(k), self._scols)), shape=(k, d.n_x))
            self._polish_A = sp.vstack([rows, d.A], format="csc")
            self._polish_cones = [clarabel.ZeroConeT(k)] + d.cones()
            self._polish_P = sp.triu(d.P, format="csc")
        # a fresh set-up on every polish: a solver updated in place (update(b=...)) answers differently after
        # earlier polishes (up to 1e-2 in x on case14 after an infeasible one), and a resumed node has none of
        # them; the polish must depend on its target only, so that a resumed run repeats the uninterrupted one
        sol = clarabel.DefaultSolver(self._polish_P, d.q, self._polish_A, b, self._polish_cones, self.settings).solve()
        for attempt, settings in enumerate((None, *ROBUST_SETTINGS)):
            if attempt:  # a fresh set-up on this b, with the robust settings in turn
                sol = clarabel.DefaultSolver(self._polish_P, d.q, self._polish_A, b, self._polish_cones,
                                             clarabel_settings(self._overrides, robust=settings)).solve()
            if sol.status in (clarabel.SolverStatus.PrimalInfeasible, clarabel.SolverStatus.AlmostPrimalInfeasible):
                return None, "infeasible"
            if sol.status == clarabel.SolverStatus.Solved:
                return np.asarray(sol.x)[d.cols], "Solved"
            if _loose_enough(sol):
                return np.asarray(sol.x)[d.cols], "AlmostSolved"
        return None, str(sol.status)

    def _polish_cvxpy(self, name: str, target: np.ndarray) -> tuple[np.ndarray | None, str]:
        if self._polish_problem is None:
            shared = self.agent.u_expression()[self.sidx]
            m = cp.Parameter(shared.size)
            self._polish_problem = (cp.Problem(cp.Minimize(self.agent.objective),
                                               [*self.agent.constraints, shared == m]), m)
        prob, m = self._polish_problem
        m.value = np.asarray(target, dtype=float)
        return _solve_cvxpy(prob, name, self.agent, warm_start=False)  # a cold start: the target alone decides


# --------------------------------------------------------------------------- the sharing family's x-update (eq. 6)
def ball_ridge_solve(eigvals: np.ndarray, eigvecs: np.ndarray, g: np.ndarray, lam: float, rho: float,
                     bound: float | None, *, tol: float = 1e-13, max_iter: int = 100) -> np.ndarray:
    """``argmin_{||x|| <= bound} lam/2 ||x||^2 + g^T x + rho/2 x^T G x`` with ``G = V diag(e) V^T``.

    This is eq. (6) for ``R_m = ||x||^2 / 2`` and ``X_m`` an l2 ball (``g = D_m^T (y + rho s_m)``,
    ``G = D_m^T D_m``): a trust-region subproblem. With ``h = lam + rho e`` and ``c = -V^T g`` the solution is
    ``x(mu) = V (c / (h + mu))`` with ``mu = 0`` when that lies in the ball, else the root of the secular
    equation ``1/||x(mu)|| = 1/bound`` (Newton, Moré & Sorensen 1983; monotone from the left).
    """
    c = -(eigvecs.T @ g)
    h = lam + rho * np.maximum(eigvals, 0.0)
    scale = max(float(np.max(h, initial=0.0)), 1e-300)
    zero = h <= 1e-14 * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.where(zero, 0.0, c / np.where(zero, 1.0, h))
    unbounded = bool(np.any(zero & (np.abs(c) > 1e-14 * (1.0 + np.max(np.abs(c), initial=0.0)))))
    if bound is None:
        if unbounded:
            raise InvalidParameterError("The party's x-update is unbounded (lam = 0 and D_m^T D_m is singular "
                                        "along the gradient); give the party a bound or use lam > 0.")
        return eigvecs @ coef
    if not unbounded and float(np.linalg.norm(coef)) <= bound:
        return eigvecs @ coef
    # secular equation phi(mu) = 1/||p(mu)|| - 1/bound = 0, phi increasing and concave in mu
    mu = 0.0 if not unbounded else 1e-12 * scale
    for _ in range(max_iter):
        d = h + mu
        p = c / d
        norm = float(np.linalg.norm(p))
        if abs(norm - bound) <= tol * bound:
            break
        dnorm = -float(np.sum(p * p / d)) / norm  # d||p||/dmu
        mu_new = mu - (1.0 / norm - 1.0 / bound) / (-dnorm / norm ** 2)
        mu = mu_new if mu_new > mu else mu * 2.0 + 1e-300
    x = eigvecs @ (c / (h + mu))
    nrm = float(np.linalg.norm(x))
    return x * (bound / nrm) if nrm > bound else x


class PartyUpdate:
    """Eq. (6) for one party: closed form (ball + ||x||^2/2) or a compiled CVXPY problem in d_m variables."""

    def __init__(self, party: Any, rho: float, lam: float, solvers: tuple[str, ...]) -> None:
        self.party, self.rho, self.lam, self.solvers = party, rho, lam, solvers
        D = party.data
        eigvals, eigvecs = np.linalg.eigh(D.T @ D)
        self.eigvals, self.eigvecs = eigvals, eigvecs
        self.bound = None if party.bound is None else float(party.bound)
        self.closed = party.closed_form
        if not self.closed:
            x = party.variable
            self.g = cp.Parameter(party.n_features, name=f"g_{party.name}")
            root = np.sqrt(np.maximum(eigvals, 0.0))[:, None] * eigvecs.T  # ||root x||^2 = ||D x||^2
            objective = self.g @ x + (rho / 2.0) * cp.sum_squares(root @ x)
            if lam > 0:
                objective = objective + lam * party.objective
            self.problem = cp.Problem(cp.Minimize(objective), party.constraints)

    def solve(self, g: np.ndarray, epoch: int) -> tuple[np.ndarray, str, list[str]]:
        if self.closed:
            return ball_ridge_solve(self.eigvals, self.eigvecs, g, self.lam, self.rho, self.bound), "closed-form", []
        self.g.value = g
        name, fallbacks = solve_chain(self.problem, self.solvers)
        if name is not None:
            return np.asarray(self.party.variable.value, dtype=float).ravel(), name, fallbacks
        raise SolverFailedError(f"Party {self.party.name!r}: every solver failed on the x-update in epoch {epoch} "
                                f"({', '.join(fallbacks)}).", agent=self.party.name, round=epoch,
                                status=fallbacks[-1] if fallbacks else None)
