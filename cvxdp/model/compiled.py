"""Compiled agent data: each agent's CVXPY problem is canonicalized once per data (SPEC §7 fast path).

:func:`canonicalize` is the only place in the engine's consensus loop that calls CVXPY's
``get_problem_data``. What it returns (:class:`ConeData`: ``min 1/2 x'Px + q'x  s.t.  A x + s = b, s in K``,
plus the columns of the agent's flat vector ``u`` in ``x``) is cached per agent, keyed by a hash of the
parameter values it was compiled with, so every run — and every cell of a study — over the same agents and
data reuses it:

* :func:`constraint_data` — the feasible set ``W_p`` (LinearizedADMM: ``f_p`` is never compiled): the
  linearized projection, the feasibility and boundedness checks (:func:`set_verdict`, raw Clarabel solves on
  the same data) and the initial point;
* :func:`prox_data` — exact ADMM: ``min f_p s.t. W_p`` canonicalized once; :func:`split_constraints` reads
  ``W_p``'s own rows out of the same data (:func:`prox_constraint_data`) for the checks, the projection and
  the initial point, so exact ADMM also compiles each agent once. Only when the split is ambiguous is ``W_p``
  compiled on its own as well (:class:`ProxData` records how many compiles it took).

Cached data is immutable and a deterministic function of model and data; solvers, generators and duals are
per run (they live in the workers). The cache holds no reference to the agents (weak keys). Constants inside
the expressions are part of the model: mutating their arrays in place after a run is not detected.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import clarabel
import cvxpy as cp
import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:  # type hints only: cvxdp.model.agent imports this module
    from .agent import Agent


class NotCompilable(Exception):
    """CVXPY's canonical data cannot be mapped back to the agent's variables (e.g. a variable declared with
    attributes such as ``nonneg=True`` is replaced by another one during canonicalization)."""


@dataclass(frozen=True)
class ConeDims:
    """Cone sizes of ``K`` in Clarabel's order (zero, nonneg, soc, psd, exp, 3d power)."""

    zero: int = 0
    nonneg: int = 0
    soc: tuple[int, ...] = ()
    psd: tuple[int, ...] = ()
    exp: int = 0
    p3d: tuple[float, ...] = ()

    def row_blocks(self) -> list[int]:
        """Number of rows of each cone family, in the order of the rows of ``A``."""
        return [self.zero, self.nonneg, int(sum(self.soc)), int(sum(n * (n + 1) // 2 for n in self.psd)),
                3 * self.exp, 3 * len(self.p3d)]

    def cones(self) -> list:
        """The Clarabel cone list (same order as ``cvxpy``'s own Clarabel interface)."""
        out: list = []
        if self.zero:
            out.append(clarabel.ZeroConeT(self.zero))
        if self.nonneg:
            out.append(clarabel.NonnegativeConeT(self.nonneg))
        out += [clarabel.SecondOrderConeT(n) for n in self.soc]
        out += [clarabel.PSDTriangleConeT(n) for n in self.psd]
        out += [clarabel.ExponentialConeT() for _ in range(self.exp)]
        out += [clarabel.PowerConeT(a) for a in self.p3d]
        return out

    @property
    def only_linear(self) -> bool:
        return not (self.soc or self.psd or self.exp or self.p3d)

    def __add__(self, other: ConeDims) -> ConeDims:
        return ConeDims(self.zero + other.zero, self.nonneg + other.nonneg, self.soc + other.soc,
                        self.psd + other.psd, self.exp + other.exp, self.p3d + other.p3d)


@dataclass(frozen=True)
class ConeData:
    """``min 1/2 x'Px + q'x  s.t.  A x + s = b, s in K``; ``cols[i]`` is the column of ``u_i`` (-1: absent)."""

    P: sp.csc_matrix  # full symmetric (n_x, n_x)
    q: np.ndarray
    A: sp.csc_matrix
    b: np.ndarray
    dims: ConeDims
    cols: np.ndarray

    @property
    def n_x(self) -> int:
        return self.A.shape[1]

    def cones(self) -> list:
        return self.dims.cones()


#: number of canonicalizations so far (tests count compilations with it)
COMPILE_COUNT = {"n": 0}


def _problem_data(objective: cp.Expression, constraints: list) -> tuple[dict, Any]:
    """CVXPY's Clarabel data of ``min objective s.t. constraints`` and its parametrized cone program."""
    COMPILE_COUNT["n"] += 1
    data, _, _ = cp.Problem(cp.Minimize(objective), constraints).get_problem_data(cp.CLARABEL)
    return data, data[cp.settings.PARAM_PROB]


def _cone_data(data: dict, agent: Agent, *, complete: bool) -> ConeData:
    dims = data["dims"]
    if getattr(dims, "pnd", None):
        raise NotCompilable("generalized power cones")
    var_to_col = data[cp.settings.PARAM_PROB].var_id_to_col
    layout = agent.layout
    cols = np.full(layout.size, -1)
    for var, off in zip(layout.variables, layout.offsets):
        if var.id in var_to_col:
            cols[off:off + var.size] = var_to_col[var.id] + np.arange(var.size)
        elif complete:
            raise NotCompilable(f"variable {var.name()!r} has no column of its own in CVXPY's canonical data")
    A = sp.csc_matrix(data["A"])
    n_x = A.shape[1]
    P = sp.csc_matrix(data["P"]) if "P" in data else sp.csc_matrix((n_x, n_x))
    return ConeData(P=P, q=np.asarray(data["c"], dtype=float), A=A, b=np.asarray(data["b"], dtype=float),
                    dims=ConeDims(int(dims.zero), int(dims.nonneg), tuple(int(n) for n in dims.soc),
                                  tuple(int(n) for n in dims.psd), int(dims.exp), tuple(float(a) for a in dims.p3d)),
                    cols=cols)


def canonicalize(objective: cp.Expression, constraints: list, agent: Agent, *, complete: bool) -> ConeData:
    """Canonicalize ``min objective s.t. constraints`` for Clarabel once; map ``u`` to its columns.

    ``complete=True`` requires every variable of the agent to have a column.
    """
    data, _ = _problem_data(objective, constraints)
    return _cone_data(data, agent, complete=complete)


def merge(W: ConeData, F: ConeData) -> ConeData:
    """The data of ``min f(u) s.t. u in W`` from the data of ``W`` and of ``f`` alone (no recompilation).

    ``f``'s columns of ``u`` become ``W``'s; its auxiliary columns are appended; rows are interleaved cone
    family by cone family. ``P`` and ``q`` are ``f``'s (``W``'s objective is a placeholder).
    """
    fmap = np.full(F.n_x, -1)
    present = F.cols >= 0
    fmap[F.cols[present]] = W.cols[present]
    extra = np.flatnonzero(fmap < 0)
    fmap[extra] = W.n_x + np.arange(extra.size)
    n_x = W.n_x + extra.size
    to_merged = sp.csc_matrix((np.ones(F.n_x), (fmap, np.arange(F.n_x))), shape=(n_x, F.n_x))
    AW = sp.hstack([W.A, sp.csc_matrix((W.A.shape[0], extra.size))], format="csr")
    AF = sp.csr_matrix(F.A @ to_merged.T)
    blocks, b = [], []
    rw = rf = 0
    for nw, nf in zip(W.dims.row_blocks(), F.dims.row_blocks()):
        blocks += [AW[rw:rw + nw], AF[rf:rf + nf]]
        b += [W.b[rw:rw + nw], F.b[rf:rf + nf]]
        rw, rf = rw + nw, rf + nf
    # within a family W's cones come first, then F's: the same order as ``W.dims + F.dims``
    return ConeData(P=sp.csc_matrix(to_merged @ F.P @ to_merged.T), q=to_merged @ F.q,
                    A=sp.vstack(blocks, format="csc"), b=np.concatenate(b), dims=W.dims + F.dims, cols=W.cols)


# ---------------------------------------------------------------------------------------------- the cache
_CACHE: weakref.WeakKeyDictionary[Agent, dict[str, tuple[str, Any]]] = weakref.WeakKeyDictionary()


def data_key(*exprs: Any) -> str:
    """Hash of the values of every parameter in ``exprs`` (expressions or constraints)."""
    params: dict[int, cp.Parameter] = {}
    for expr in exprs:
        for param in expr.parameters():
            params[param.id] = param
    h = hashlib.sha256()
    for pid in sorted(params):
        value = params[pid].value
        arr = np.ascontiguousarray(np.asarray(value)) if value is not None else None
        h.update(f"{pid}:{None if arr is None else (arr.dtype.str, arr.shape)}".encode())
        if arr is not None:
            h.update(arr.tobytes())
    return h.hexdigest()


def cached(agent: Agent, name: str, key: str, build: Callable[[], Any]) -> Any:
    """``build()`` once per (agent, name, key); later calls with the same key return the same object."""
    slot = _CACHE.setdefault(agent, {})
    hit = slot.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    slot[name] = (key, value)
    return value


def _constraint_key(agent: Agent) -> str:
    return data_key(*agent.constraints)


def constraint_data(agent: Agent) -> ConeData:
    """Canonical data of ``W_p`` (placeholder objective ``1/2 ||u||^2`` so every variable has a column)."""
    def build() -> ConeData:
        quad = cp.sum([cp.sum_squares(var) for var in agent.layout.variables])
        return canonicalize(0.5 * quad, agent.constraints, agent, complete=True)
    return cached(agent, "constraints", _constraint_key(agent), build)


def objective_data(agent: Agent) -> ConeData:
    """Canonical data of ``f_p`` alone (no constraints); only the fallback of :func:`prox_data` needs it."""
    return cached(agent, "objective", data_key(agent.objective),
                  lambda: canonicalize(agent.objective, [], agent, complete=False))


def _rows_of(con: Any) -> int:
    """Rows of one canonical constraint in Clarabel's data (PSD: the scaled lower triangle)."""
    if type(con).__name__ == "PSD":
        n = int(con.args[0].shape[0])
        return n * (n + 1) // 2
    return int(con.size)


def _dims_of(cons: list) -> ConeDims:
    """The cone sizes of canonical constraints (in their order)."""
    by_type: dict[str, list] = {"Zero": [], "NonNeg": [], "SOC": [], "PSD": [], "ExpCone": [], "PowCone3D": []}
    for con in cons:
        name = type(con).__name__
        if name not in by_type:
            raise NotCompilable(f"canonical constraint {name}")
        by_type[name].append(con)
    return ConeDims(zero=sum(_rows_of(c) for c in by_type["Zero"]),
                    nonneg=sum(_rows_of(c) for c in by_type["NonNeg"]),
                    soc=tuple(int(n) for c in by_type["SOC"] for n in c.cone_sizes()),
                    psd=tuple(int(c.args[0].shape[0]) for c in by_type["PSD"]),
                    exp=sum(int(c.num_cones()) for c in by_type["ExpCone"]),
                    p3d=tuple(float(a) for c in by_type["PowCone3D"]
                              for a in np.ravel(np.asarray(c.alpha.value, dtype=float), order="F")))


def split_constraints(full: ConeData, cons: list, user_ids: set[int]) -> ConeData | None:
    """The rows of ``W_p`` only, out of the data of ``min f_p s.t. W_p`` (None when they cannot be told apart).

    Each canonical constraint (``cons``: CVXPY's, in row order) comes either from canonicalizing ``f_p`` or from
    one of the agent's constraints; CVXPY keeps the ids of the latter (``user_ids``). Constraints and the
    auxiliary columns they share form connected groups: a group holding an auxiliary column of the objective
    (a column of ``P`` or ``q`` that is not ``u``) is ``f_p``'s — its epigraph and its *domain* rows (``log``,
    ``entr``...), which must not restrict a projection onto ``W_p`` —, a group holding one of the agent's
    constraints is ``W_p``'s. A group that is both (CVXPY shared a subexpression of ``f_p`` and ``W_p``) or
    neither (a constraint of ``f_p`` on ``u`` alone) makes the split ambiguous: the caller then compiles
    ``W_p`` on its own (:func:`constraint_data`).
    """
    rows = np.array([_rows_of(c) for c in cons], dtype=int)
    if int(rows.sum()) != full.A.shape[0] or _dims_of(cons) != full.dims:
        return None
    n_con, n_x = len(cons), full.n_x
    aux = np.ones(n_x, dtype=bool)
    aux[full.cols] = False
    con_of_row = np.repeat(np.arange(n_con), rows)
    A = sp.coo_matrix(full.A)
    touched = aux[A.col]
    # bipartite graph: constraints 0..n_con-1, auxiliary columns n_con + column
    edges = sp.coo_matrix((np.ones(int(touched.sum())), (con_of_row[A.row[touched]], n_con + A.col[touched])),
                          shape=(n_con + n_x, n_con + n_x))
    from scipy.sparse.csgraph import connected_components

    _, label = connected_components(edges, directed=False)
    P = sp.csc_matrix(full.P)
    f_cols = np.flatnonzero(aux & ((full.q != 0) | (np.diff(P.indptr) > 0)))  # P is full symmetric
    w_cons = np.array([c.id in user_ids for c in cons], dtype=bool)
    f_groups = set(label[n_con + f_cols].tolist())
    w_groups = set(label[np.flatnonzero(w_cons)].tolist())
    con_groups = label[:n_con]
    if f_groups & w_groups or not np.all(np.isin(con_groups, list(f_groups | w_groups))):
        return None
    is_w_con = np.isin(con_groups, list(w_groups))
    keep_rows = np.repeat(is_w_con, rows)
    keep_cols = ~aux | np.isin(label[n_con:], list(w_groups)) & aux
    new_col = np.cumsum(keep_cols) - 1
    A_w = sp.csc_matrix(sp.csr_matrix(full.A)[keep_rows][:, keep_cols])
    n_w = A_w.shape[1]
    cols = new_col[full.cols]
    diag = np.zeros(n_w)
    diag[cols] = 1.0
    return ConeData(P=sp.diags(diag, format="csc"), q=np.zeros(n_w), A=A_w, b=full.b[keep_rows],
                    dims=_dims_of([c for c, w in zip(cons, is_w_con) if w]), cols=cols)


@dataclass(frozen=True)
class ProxData:
    """The exact prox step's data (``min f_p s.t. W_p``) and ``W_p``'s own rows, with how they were compiled.

    ``compiles`` is 1 when both come from one canonicalization (:func:`split_constraints`), 2 when ``W_p`` had
    to be compiled on its own as well (an ambiguous split), 3 when a variable of the agent appears in neither
    ``f_p`` nor ``W_p`` (no column of its own): then ``W_p`` and ``f_p`` are compiled apart and merged.
    """

    full: ConeData
    constraints: ConeData
    compiles: int


def _prox_key(agent: Agent) -> str:
    return _constraint_key(agent) + data_key(agent.objective)


def _prox_pair(agent: Agent) -> ProxData:
    def build() -> ProxData:
        data, prog = _problem_data(agent.objective, agent.constraints)
        full = _cone_data(data, agent, complete=False)
        if np.any(full.cols < 0):  # a variable f_p and W_p never mention: compile them apart and merge
            W = constraint_data(agent)
            return ProxData(merge(W, objective_data(agent)), W, 3)
        try:
            W = split_constraints(full, list(prog.constraints), {c.id for c in agent.constraints})
        except NotCompilable:
            W = None
        if W is None:
            return ProxData(full, constraint_data(agent), 2)
        return ProxData(full, W, 1)
    return cached(agent, "prox", _prox_key(agent), build)


def prox_data(agent: Agent) -> ConeData:
    """Canonical data of ``min f_p(u) s.t. u in W_p``: one canonicalization per agent and data.

    The same compile also yields ``W_p``'s rows (:func:`prox_constraint_data`) for the feasibility and
    boundedness verdict, the projection and the initial point; see :func:`split_constraints` for when ``W_p`` is
    compiled on its own instead.
    """
    return _prox_pair(agent).full


def prox_constraint_data(agent: Agent) -> ConeData:
    """``W_p``'s data that go with :func:`prox_data` (the exact-ADMM path's projection and checks)."""
    return _prox_pair(agent).constraints


def feasible_set_data(agent: Agent) -> ConeData:
    """``W_p``'s data from whichever compile of this agent and data is already cached (the exact prox step's or
    the projection's); compiled once (:func:`constraint_data`) when neither is. The post-run check of the
    consensus solution (:mod:`cvxdp.model.central`) reads it, so that check compiles nothing after a run."""
    hit = _CACHE.get(agent, {}).get("prox")
    if hit is not None and hit[0] == _prox_key(agent):
        return hit[1].constraints
    return constraint_data(agent)


# ------------------------------------------------------------------------------ feasibility and boundedness
@dataclass(frozen=True)
class SetVerdict:
    """What the compiled data say about ``W_p``: empty or not, unbounded or not (None: undecided)."""

    infeasible: bool | None
    status: str
    unbounded: bool | None


_DECIDED = {clarabel.SolverStatus.Solved, clarabel.SolverStatus.AlmostSolved,
            clarabel.SolverStatus.PrimalInfeasible, clarabel.SolverStatus.AlmostPrimalInfeasible,
            clarabel.SolverStatus.DualInfeasible, clarabel.SolverStatus.AlmostDualInfeasible}


def _quiet_settings() -> clarabel.DefaultSettings:
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.presolve_enable = False
    return settings


def set_verdict(agent: Agent, data: ConeData | None = None) -> SetVerdict:
    """Emptiness and boundedness of ``W_p`` from its compiled data (raw Clarabel solves; cached).

    Two LPs, ``max sum(u)`` and ``max -sum(u)`` over ``W_p``: a primal infeasibility certificate means ``W_p``
    is empty; a dual one (the LP is unbounded) means it is unbounded — confirmed non-empty by ``min 0``.
    ``data`` are ``W_p``'s compiled data (default :func:`constraint_data`); the verdict is cached per agent and
    data of ``W_p`` whichever compiled data it came from.
    """
    def build() -> SetVerdict:
        W = constraint_data(agent) if data is None else data
        P0 = sp.csc_matrix((W.n_x, W.n_x))
        solver: list = []

        def status_of(q: np.ndarray) -> clarabel.SolverStatus:  # one setup; later LPs only change q
            if not solver:
                solver.append(clarabel.DefaultSolver(P0, q, W.A, W.b, W.cones(), _quiet_settings()))
            else:
                solver[0].update(q=q)
            return solver[0].solve().status

        unbounded: bool | None = False
        last = None
        for sign in (1.0, -1.0):
            q = np.zeros(W.n_x)
            q[W.cols] = -sign  # maximize sign * sum(u)
            last = status_of(q)
            if last in (clarabel.SolverStatus.PrimalInfeasible, clarabel.SolverStatus.AlmostPrimalInfeasible):
                return SetVerdict(True, str(last), None)
            if last in (clarabel.SolverStatus.DualInfeasible, clarabel.SolverStatus.AlmostDualInfeasible):
                unbounded = True
                break
            if last not in _DECIDED:
                unbounded = None
        if unbounded is not False:  # no optimal LP solution seen: decide feasibility on its own
            last = status_of(np.zeros(W.n_x))
            if last not in _DECIDED:
                return SetVerdict(None, str(last), None)
            if last in (clarabel.SolverStatus.PrimalInfeasible, clarabel.SolverStatus.AlmostPrimalInfeasible):
                return SetVerdict(True, str(last), None)
        return SetVerdict(False, str(last), unbounded)
    return cached(agent, "verdict", _constraint_key(agent), build)


__all__ = ["COMPILE_COUNT", "ConeData", "ConeDims", "NotCompilable", "ProxData", "canonicalize", "constraint_data",
           "feasible_set_data", "merge", "objective_data", "prox_constraint_data", "prox_data", "set_verdict",
           "split_constraints"]
