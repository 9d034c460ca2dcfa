"""Declaring agents: a local objective and feasible set in CVXPY over private data (SPEC §1, §8).

An :class:`Agent` only stores what it is given and runs the cheap structural checks. The flat layout of
its local vector ``u`` (all variables of its problem, each flattened in column-major order, in the order
CVXPY lists them) is computed once by :meth:`Agent.layout`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import cvxpy as cp
import numpy as np
from cvxpy.atoms.affine.index import index as _index_atom
from cvxpy.atoms.affine.index import special_index as _special_index_atom
from cvxpy.constraints import Equality, Inequality
from cvxpy.lin_ops import lin_utils as lu

from ..errors import (
    DeclarationError,
    InfeasibleAgentError,
    check_float,
    check_int,
    convexity_advice,
    fail,
    missing_sensitivity,
)
from .compiled import NotCompilable, set_verdict
from .gradients import CompiledGradient, OutsideDomain, compile_gradient

GradientFn = Callable[[np.ndarray], np.ndarray]


def shared_indices(shared: Mapping[str, np.ndarray]) -> np.ndarray:
    """All shared coordinates of a layout's ``shared`` map, key by key in sorted key order."""
    keys = sorted(shared)
    return np.concatenate([shared[k] for k in keys]) if keys else np.zeros(0, dtype=int)


def rho_weights(rho_scale: Mapping[str, Any] | None, size: int, key: str) -> np.ndarray:
    """The declared relative penalty weights of shared key ``key`` of ``size`` coordinates (ones when none)."""
    if rho_scale is None or key not in rho_scale:
        return np.ones(size)
    return np.broadcast_to(np.asarray(rho_scale[key], dtype=float), (size,)).copy()


@dataclass(frozen=True)
class Sensitivity:
    """Gradient sensitivity of an agent's objective under a declared neighbouring relation (SPEC §2.1).

    Parameters
    ----------
    l1, l2 : float or None
        ``sup_{u in W, D ~ D'} ||grad f(u; D) - grad f(u; D')||_q`` for q = 1 (Laplace) and q = 2 (Gaussian).
    relation : str
        Words naming the neighbouring relation these bounds hold for, e.g. ``"add/remove one sample"``.
    alpha : float or None
        The adjacency size used by the "paper" calibration preset (Delta = alpha for OutPert and
        2 alpha for ObjPert, Ryu & Kim §6.1.1).
    """

    l1: float | None = None
    l2: float | None = None
    relation: str = "unspecified"
    alpha: float | None = None

    def __post_init__(self) -> None:
        for name in ("l1", "l2", "alpha"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise fail(name, "Sensitivity", "a float in (0, inf) or None", value)

    def norm(self, q: int) -> float | None:
        """The l_q bound (q = 1 or 2)."""
        return self.l1 if q == 1 else self.l2


@dataclass(frozen=True)
class PerExample:
    """An agent's per-example gradients, for subsampled local updates (``sampling_rate`` of ObjG / OutG).

    The agent's objective must be ``f(u) = (1/N) sum_i l(u; record_i) + r(u)`` over its ``records`` records with a
    public normaliser ``N`` fixed across neighbours (add/remove one record) and an optional part ``r`` that reads no
    record (a regulariser). The party draws a Poisson sample ``B`` (each record in independently with probability
    q, from its own generator) and its local gradient is ``(1/(q N)) sum_{i in B} clip(grad l(u; record_i), C) +
    grad r(u)``, an unbiased estimate of the clipped full gradient; adding or removing one record moves it by at most
    ``C / (q N)`` in l2 (the mechanism's sensitivity): ``grad r`` is the same on neighbouring data sets.

    Parameters
    ----------
    records : int
        The agent's number of records (private: it stays on the party, which draws the sample).
    total : int
        The public normaliser ``N`` of the loss.
    clipped_sum : callable
        ``clipped_sum(u, index, clip) -> flat ndarray``: ``sum_{i in index} clip(grad l(u; record_i), clip)``,
        every per-example gradient rescaled to l2 norm at most ``clip`` (``u`` flat, like the agent's gradient).
    relation : str
        The neighbouring relation the sampling is accounted for: "add_remove" (the only one amplification by
        Poisson sampling is accounted under here).
    public_gradient : callable, optional
        ``public_gradient(u) -> flat ndarray``: the gradient of ``r``, the part of the objective that reads no
        record (e.g. ``reg * u`` for ``(reg/2) ||u||^2``), added to every estimate unsampled and unclipped. It must
        not read the records: it is not covered by the sensitivity.
    """

    records: int
    total: int
    clipped_sum: Callable[[np.ndarray, np.ndarray, float], np.ndarray]
    relation: str = "add_remove"
    public_gradient: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self) -> None:
        check_int(self.records, "records", "PerExample", 1)
        check_int(self.total, "total", "PerExample", 1)
        if not callable(self.clipped_sum):
            raise fail("clipped_sum", "PerExample", "a callable (u, index, clip) -> flat ndarray", self.clipped_sum)
        if self.public_gradient is not None and not callable(self.public_gradient):
            raise fail("public_gradient", "PerExample", "None or a callable u -> flat ndarray", self.public_gradient)

    def public(self) -> dict[str, Any]:
        """What the coordinator may know (the agent's :class:`Declaration` carries it): ``{"total", "relation"}``."""
        return {"total": int(self.total), "relation": str(self.relation)}

    def gradient(self, u: np.ndarray, rng: np.random.Generator, q: float, clip: float) -> np.ndarray:
        """One subsampled, clipped gradient estimate at ``u`` (the sample drawn with :func:`poisson_sample`)."""
        index = poisson_sample(rng, self.records, q)
        out = np.asarray(self.clipped_sum(u, index, clip), dtype=float).ravel() if index.size else np.zeros(np.size(u))
        out = out / (q * self.total)  # a new array: the callable's own stays as it returned it
        if self.public_gradient is not None:  # the same on neighbouring data sets: no sensitivity
            out += np.asarray(self.public_gradient(u), dtype=float).ravel()
        return out


def poisson_sample(rng: np.random.Generator, n: int, q: float) -> np.ndarray:
    """Indexes of a Poisson sample of ``n`` records: each in independently with probability ``q`` (``rng`` is the
    party's own generator, never reseeded)."""
    return np.flatnonzero(rng.random(n) < q)


@dataclass(frozen=True)
class Layout:
    """Where each variable and each shared block sits in an agent's flat local vector ``u``."""

    variables: tuple[cp.Variable, ...]
    offsets: tuple[int, ...]
    size: int
    shared: Mapping[str, np.ndarray]  # key -> indices into u (column-major order of the expression)
    shared_mask: np.ndarray = field(repr=False)  # bool, True where the coordinate is shared

    @property
    def shared_indices(self) -> np.ndarray:
        """All shared coordinates of u, key by key in sorted key order."""
        return shared_indices(self.shared)

    def split(self, u: np.ndarray) -> dict[cp.Variable, np.ndarray]:
        """Cut a flat vector into per-variable arrays of the variables' shapes."""
        out = {}
        for var, off in zip(self.variables, self.offsets):
            out[var] = np.reshape(u[off:off + var.size], var.shape, order="F")
        return out

    def flatten(self, values: Mapping[cp.Variable, np.ndarray]) -> np.ndarray:
        """Inverse of :meth:`split`."""
        u = np.zeros(self.size)
        for var, off in zip(self.variables, self.offsets):
            u[off:off + var.size] = np.ravel(np.asarray(values[var], dtype=float), order="F")
        return u


def _all_finite(value) -> bool:
    data = value.data if hasattr(value, "tocoo") else np.asarray(value)
    return bool(np.all(np.isfinite(data)))


_UNSUPPORTED = ("integer", "boolean", "complex", "imag", "hermitian")


def _label(leaf) -> str:
    return f"{type(leaf).__name__.lower()} {leaf.name()!r} (shape {leaf.shape})"


def reserve_cvxpy_ids(roots: Sequence) -> None:
    """Advance CVXPY's id counter past every id used in the expression trees under ``roots``."""
    top, stack, seen = -1, list(roots), set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for attr in ("id", "constr_id"):
            value = node.__dict__.get(attr) if hasattr(node, "__dict__") else None
            if isinstance(value, int):
                top = max(top, value)
        stack.extend(getattr(node, "args", ()))
        stack.extend(getattr(node, "dual_variables", ()))
    if top >= lu.ID_COUNTER.count:
        lu.ID_COUNTER.count = top + 1


def _is_selection(expr: cp.Expression) -> bool:
    if isinstance(expr, cp.Variable):
        return True
    if isinstance(expr, (_index_atom, _special_index_atom)):
        return _is_selection(expr.args[0])
    return False


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


def _bound_value(expr: cp.Expression, shape: tuple[int, ...]) -> np.ndarray | None:
    """The value of a constant or parameter leaf broadcast to ``shape``, flat in column-major order (None when
    it is not a dense numeric leaf with a value)."""
    if not isinstance(expr, (cp.Constant, cp.Parameter)) or expr.value is None or hasattr(expr.value, "tocoo"):
        return None
    value = np.asarray(expr.value, dtype=float)
    try:
        return np.ravel(np.broadcast_to(value, shape), order="F")
    except ValueError:
        return None


def _selected_positions(layout: Any, selections: list[cp.Expression]) -> list[np.ndarray]:
    """The coordinates of ``u`` each selection (a variable, or a slice of one) picks, in column-major order.

    A whole variable picks its own offsets; a slice picks the value it takes when every variable holds its own
    offsets (set for the moment and restored: CVXPY validates every value it is given, so only slices pay for it).
    """
    start = {var.id: off for var, off in zip(layout.variables, layout.offsets)}
    positions: list[np.ndarray | None] = [np.arange(start[sel.id], start[sel.id] + sel.size)
                                          if isinstance(sel, cp.Variable) else None for sel in selections]
    if any(p is None for p in positions):
        saved = [var.value for var in layout.variables]
        try:
            for var, off in zip(layout.variables, layout.offsets):
                var.value = np.reshape(np.arange(off, off + var.size, dtype=float), var.shape, order="F")
            positions = [np.rint(np.ravel(np.asarray(sel.value, dtype=float), order="F")).astype(int) if p is None
                         else p for sel, p in zip(selections, positions)]
        finally:
            for var, val in zip(layout.variables, saved):
                var.value = val
    return positions  # type: ignore[return-value]


def declared_box(agent: Agent) -> tuple[np.ndarray, np.ndarray] | None:
    """``lo <= u <= hi`` read off the agent's constraint objects, without canonicalizing (None when ``W`` is not
    declared as a box).

    A box is a list of ``<=``, ``>=`` and ``==`` constraints each between a variable (or a slice of one) and a
    constant or a parameter (its current value), over variables declared without attributes (``nonneg=True``...
    go through the compiled path). The bounds are the very numbers
    :func:`cvxdp.model.local_solver._box_bounds` reads off the canonical
    data (``b / a`` with ``a = +-1``: exact), so both paths project alike bit for bit.
    """
    layout = agent.layout
    if any(any(value for value in var.attributes.values()) for var in layout.variables):
        return None
    sides = []
    for con in agent.constraints:
        if not isinstance(con, (Inequality, Equality)):
            return None
        lhs, rhs = con.args
        if _is_selection(lhs) and not _is_selection(rhs):
            sel, const, upper = lhs, rhs, True  # sel <= const (or ==)
        elif _is_selection(rhs) and not _is_selection(lhs):
            sel, const, upper = rhs, lhs, False  # const <= sel
        else:
            return None
        bound = _bound_value(const, sel.shape)
        if bound is None:
            return None
        sides.append((sel, bound, upper, isinstance(con, Equality)))
    lo, hi = np.full(layout.size, -np.inf), np.full(layout.size, np.inf)
    if not sides:
        return lo, hi
    positions = _selected_positions(layout, [sel for sel, *_ in sides])
    for idx, (_, bound, upper, equality) in zip(positions, sides):
        if upper or equality:
            np.minimum.at(hi, idx, bound)
        if not upper or equality:
            np.maximum.at(lo, idx, bound)
    return lo, hi


class Agent:
    """One agent: a convex objective and feasible set over private data, and its shared blocks.

    Parameters
    ----------
    name : str
        Unique agent name (used in every error message and in the ledger).
    objective : cvxpy.Expression
        Scalar convex objective ``f_p``; private data enter as :class:`cvxpy.Parameter` values.
    constraints : sequence of cvxpy.Constraint
        The local feasible set ``W_p`` (should be compact).
    shared : mapping str -> cvxpy.Expression
        Global key -> a variable of this problem or a slice of one. Agents sharing a key agree on it.
    gradient : callable, optional
        ``gradient(u) -> ndarray`` of the objective at the flat local vector ``u`` (see :meth:`layout`).
        Without it, a numpy gradient is compiled from the CVXPY objective once per agent
        (:mod:`cvxdp.model.gradients`; the parameters' values are read at every call): ``H u + c`` for a
        quadratic objective (microseconds a call; ``H`` is rebuilt once after the data change), a reverse-mode
        numpy pass otherwise (measured 2-3x a hand-written gradient on a 200-sample logistic loss). An objective
        with an atom it does not cover (``abs``, ``norm1``, ``max``, ``pos``, ``log``, ... see docs/own-agent.md)
        falls back to CVXPY's ``Expression.grad``: tens of milliseconds a call on an 18 + 6 variable dispatch
        agent, growing with the expression tree -- pass ``gradient=`` for such an agent.
    sensitivity : Sensitivity, optional
        Gradient sensitivity under the declared neighbouring relation; required for private runs.
    initial : mapping cvxpy.Variable -> array, optional
        Starting point of the local copy; defaults to the projection of 0 onto ``W_p``. The first message
        is computed from it, so a private run refuses it unless ``initial_public=True``.
    initial_public : bool, default False
        Declares ``initial`` data independent (public), so that a private run may start from it. A starting
        point computed from private data is not accounted for by any mechanism: leave it out instead.
    value : callable, optional
        ``value(u) -> float``: a fast evaluation of the objective at flat ``u`` for the per-round metrics
        (must equal CVXPY's value of ``objective``). Defaults to evaluating the CVXPY expression.
    lipschitz : float, optional
        A public bound ``L`` on the objective's curvature over ``W``: ``f(u) <= f(v) + <grad f(v), u - v> +
        L/2 ||u - v||^2`` for ``u, v`` in ``W`` (a Lipschitz constant of the gradient on ``W`` is one), valid for
        every neighbouring data set. ``LinearizedADMM(eta="auto")`` sets this agent's eta from it; a private run
        with eta="auto" requires it. A non-private run also measures the curvature at the start from the data
        and uses the smaller of the two (the measurement alone when no bound is declared).
    rho_scale : mapping str -> float or array, optional
        Public starting weights of the penalty per shared key (default 1). Exact :class:`~cvxdp.ADMM` with
        ``rho="auto"`` penalizes coordinate ``k`` of ``key`` with ``rho * rho_scale[key][k]`` and balances
        each block of equal weights on its own (:class:`~cvxdp.schedules.BlockBalance`; a per-block penalty,
        like OSQP's larger rho on equality rows); the weights used are in ``result.config["rho_scale"]`` and
        ``["rho_blocks"]``. An explicit rho, and :class:`~cvxdp.LinearizedADMM` (whose noise calibration
        assumes one penalty), use one rho on every coordinate. Every agent holding a key must declare the same
        weights; they must not depend on private data.
    per_example : PerExample, optional
        Per-example gradients of a loss that is a normalised sum over records: needed by the subsampled
        mechanisms (``sampling_rate`` of ObjG / OutG).
    """

    def __init__(self, name: str, objective: cp.Expression, constraints: Sequence[cp.Constraint] = (),
                 *, shared: Mapping[str, cp.Expression] | None = None, gradient: GradientFn | None = None,
                 sensitivity: Sensitivity | None = None,
                 initial: Mapping[cp.Variable, np.ndarray] | None = None,
                 value: Callable[[np.ndarray], float] | None = None, initial_public: bool = False,
                 lipschitz: float | None = None, rho_scale: Mapping[str, Any] | None = None,
                 per_example: PerExample | None = None) -> None:
        self.name = name
        self.objective = objective
        self.constraints = list(constraints)
        self.shared = dict(shared or {})
        self.gradient = gradient
        self.sensitivity = sensitivity
        self.initial = initial
        self.initial_public = initial_public
        self.value = value
        self.lipschitz = lipschitz
        self.rho_scale = rho_scale
        self.per_example = per_example

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, shared={sorted(self.shared)})"

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("compiled_gradient", None)  # numpy closures: rebuilt where the agent lands
        return state

    def __setstate__(self, state: dict) -> None:
        """Unpickling (e.g. inside a Ray actor): CVXPY's ids travel with the expressions, so the receiving
        process's id counter is moved past them; otherwise the auxiliary variables its canonicalization
        creates could reuse an id of this agent's variables or parameters (and mix up their columns)."""
        self.__dict__.update(state)
        reserve_cvxpy_ids([self.objective, *self.constraints, *self.shared.values(), *(self.initial or {})])

    # ------------------------------------------------------------------ checks
    def _fail(self, message: str) -> DeclarationError:
        return DeclarationError(f"Agent {self.name!r}: {message}")

    def check(self) -> None:
        """Structural checks: types, DCP, shared blocks, finite data. Raises :class:`DeclarationError`."""
        if not isinstance(self.name, str) or not self.name:
            raise fail("name", "Agent", "a non-empty str", self.name)
        if not isinstance(self.objective, cp.Expression):
            raise self._fail(f"the objective must be a cvxpy Expression. Got {type(self.objective).__name__}.")
        self._check_kinds()
        if not self.objective.is_scalar():
            raise self._fail(f"the objective must be scalar. Got shape {self.objective.shape}.")
        if not self.objective.is_convex():
            raise self._fail("the objective is not convex under CVXPY's DCP rules "
                             f"(curvature {self.objective.curvature}): {convexity_advice(self.objective)}")
        for k, con in enumerate(self.constraints):
            if not isinstance(con, cp.constraints.constraint.Constraint):
                raise self._fail(f"constraint {k} is not a cvxpy Constraint. Got {type(con).__name__}.")
            if not con.is_dcp():
                raise self._fail(f"constraint {k} ({con}) does not follow CVXPY's DCP rules.")
        if not isinstance(self.shared, dict) or not self.shared:
            raise self._fail("'shared' must map at least one key to a variable or a slice of one.")
        variables = set(self.problem.variables())
        for key, expr in self.shared.items():
            if not isinstance(key, str):
                raise self._fail(f"shared key {key!r} must be a str.")
            if not isinstance(expr, cp.Expression) or not _is_selection(expr):
                raise self._fail(f"shared[{key!r}] must be a cvxpy Variable or a slice of one. Got {expr}.")
            if not set(expr.variables()) <= variables:
                raise self._fail(f"shared[{key!r}] uses a variable that appears in neither the objective "
                                 "nor the constraints.")
        for param in self.problem.parameters():
            value = param.value
            if value is None:
                raise self._fail(f"data parameter {param.name()!r} has no value.")
            if not np.all(np.isfinite(value)):
                raise self._fail(f"data parameter {param.name()!r} holds NaN or infinite values.")
        for where, exprs in (("the objective", [self.objective]), ("constraint", self.constraints)):
            for k, expr in enumerate(exprs):
                for const in expr.constants():
                    value = const.value
                    if np.issubdtype(np.asarray(value).dtype, np.number) and not _all_finite(value):
                        place = where if where == "the objective" else f"constraint {k}"
                        raise self._fail(f"a data constant of {place} holds NaN or infinite values "
                                         f"(shape {const.shape}); data must be finite numbers.")
        for name in ("gradient", "value"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                raise self._fail(f"{name!r} must be callable. Got {type(fn).__name__}.")
        if self.lipschitz is not None:
            check_float(self.lipschitz, "lipschitz", f"Agent {self.name!r}", 0.0, math.inf, closed="left")
        self._check_rho_scale()
        if self.sensitivity is not None and not isinstance(self.sensitivity, Sensitivity):
            raise self._fail(f"'sensitivity' must be a cvxdp.Sensitivity. Got {type(self.sensitivity).__name__}.")
        # overlapping shared blocks inside one agent would double-count consensus
        idx = self.layout.shared_indices
        if len(np.unique(idx)) != len(idx):
            raise self._fail("two shared blocks overlap; each coordinate may belong to one key only.")

    def _check_rho_scale(self) -> None:
        if self.rho_scale is None:
            return
        if not isinstance(self.rho_scale, Mapping):
            raise self._fail(f"'rho_scale' must be a mapping from shared keys to positive weights. "
                             f"Got {type(self.rho_scale).__name__}.")
        for key, weights in self.rho_scale.items():
            if key not in self.shared:
                raise self._fail(f"'rho_scale' names {key!r}, which is not one of its shared keys "
                                 f"({', '.join(sorted(self.shared))}).")
            size = len(self.layout.shared[key])
            arr = np.asarray(weights, dtype=float) if not isinstance(weights, (str, bytes)) else np.array(np.nan)
            if arr.shape not in ((), (size,)) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise self._fail(f"'rho_scale[{key!r}]' must be a positive float or {size} positive floats. "
                                 f"Got {weights!r} instead.")

    def declaration(self) -> Declaration:
        """The agent's public declaration (:class:`Declaration`): what the coordinator may know of it."""
        facts: dict[str, Any] = {"erm": self.erm} if getattr(self, "erm", None) is not None else {}
        if getattr(self, "per_example", None) is not None:  # public: the normaliser and the relation, not the count
            facts["per_example"] = self.per_example.public()
        return Declaration(self.name, self.layout.size, self.layout.shared, sensitivity=self.sensitivity,
                           lipschitz=self.lipschitz, rho_scale=self.rho_scale, initial=self.initial is not None,
                           initial_public=self.initial_public is True, **facts)

    def rho_weights(self, key: str) -> np.ndarray:
        """The declared relative penalty weights of shared key ``key`` (ones when none are declared)."""
        return rho_weights(self.rho_scale, len(self.layout.shared[key]), key)

    def _check_kinds(self) -> None:
        """Integer, boolean and complex variables, complex parameters and constants are not supported."""
        exprs = [self.objective, *[c for c in self.constraints
                                   if isinstance(c, cp.constraints.constraint.Constraint)]]
        for expr in exprs:
            for var in expr.variables():
                kinds = [k for k in _UNSUPPORTED if var.attributes.get(k)]
                if kinds:
                    raise self._fail(f"{_label(var)} is declared {kinds[0]}=True; cvxdp solves continuous, "
                                     "real convex problems only (drop the attribute or relax the variable).")
            for leaf in [*expr.parameters(), *expr.constants()]:
                if leaf.is_complex() or (leaf.value is not None and np.iscomplexobj(leaf.value)):
                    raise self._fail(f"{_label(leaf)} is complex; cvxdp solves real problems only (split real "
                                     "and imaginary parts into real data).")

    def check_box(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """The closed-form version of :meth:`check_feasible` for a box ``lo <= u <= hi``."""
        if np.any(lo > hi):
            k = int(np.argmax(lo > hi))
            raise InfeasibleAgentError(f"Agent {self.name!r}: the local feasible set is empty (coordinate {k} "
                                       f"needs {lo[k]:g} <= u <= {hi[k]:g}).")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            warnings.warn(f"Agent {self.name!r}: the local feasible set is unbounded; the convergence "
                          "and privacy analysis assume a compact set.", stacklevel=3)

    def check_feasible(self) -> None:
        """Raise :class:`InfeasibleAgentError` if ``W_p`` is empty; warn if it is unbounded.

        Decided by raw Clarabel solves on the compiled data of ``W_p`` (the same data as the local
        subproblem, canonicalized once per agent and data; see :func:`cvxdp.model.compiled.set_verdict`). Only when
        those solves are inconclusive (a numerical failure) does it fall back to solving through CVXPY.
        """
        try:
            verdict = set_verdict(self)
        except NotCompilable:
            verdict = None
        if verdict is None or verdict.infeasible is None:
            self._check_feasible_cvxpy()
            return
        if verdict.infeasible:
            raise InfeasibleAgentError(f"Agent {self.name!r}: the local feasible set is empty "
                                       f"(feasibility solve status {verdict.status!r}).")
        if verdict.unbounded:
            warnings.warn(f"Agent {self.name!r}: the local feasible set is unbounded; the convergence "
                          "and privacy analysis assume a compact set.", stacklevel=3)

    def _check_feasible_cvxpy(self) -> None:
        """Fallback of :meth:`check_feasible` through CVXPY (Clarabel, then ECOS)."""
        prob = cp.Problem(cp.Minimize(0), self.constraints)
        try:
            prob.solve(solver=cp.CLARABEL)
        except cp.SolverError:
            prob.solve(solver=cp.ECOS)
        if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            raise InfeasibleAgentError(f"Agent {self.name!r}: the local feasible set is empty "
                                       f"(feasibility solve status {prob.status!r}).")
        for sign in (1.0, -1.0):
            probe = cp.Problem(cp.Maximize(sign * cp.sum(self._u_expr)), self.constraints)
            try:
                probe.solve(solver=cp.CLARABEL)
            except cp.SolverError:
                continue
            if probe.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
                warnings.warn(f"Agent {self.name!r}: the local feasible set is unbounded; the convergence "
                              "and privacy analysis assume a compact set.", stacklevel=4)
                break

    # ------------------------------------------------------------------ structure
    @cached_property
    def problem(self) -> cp.Problem:
        """The agent's own problem ``min f_p s.t. W_p`` (used for checks and the central reference)."""
        return cp.Problem(cp.Minimize(self.objective), self.constraints)

    @cached_property
    def layout(self) -> Layout:
        """The flat layout of the local vector and the indices of each shared block."""
        variables = tuple(sorted(self.problem.variables(), key=lambda v: v.id))
        offsets, off = [], 0
        for var in variables:
            offsets.append(off)
            off += var.size
        saved = [var.value for var in variables]
        try:
            for var, o in zip(variables, offsets):
                var.value = np.reshape(np.arange(o, o + var.size, dtype=float), var.shape, order="F")
            shared = {key: np.rint(np.ravel(np.asarray(expr.value, dtype=float), order="F")).astype(int)
                      for key, expr in self.shared.items()}
        finally:
            for var, val in zip(variables, saved):
                var.value = val
        mask = np.zeros(off, dtype=bool)
        for idx in shared.values():
            mask[idx] = True
        return Layout(variables, tuple(offsets), off, shared, mask)

    @cached_property
    def _u_expr(self) -> cp.Expression:
        parts = [v if v.ndim <= 1 else cp.vec(v, order="F") for v in self.layout.variables]
        return parts[0] if len(parts) == 1 else cp.hstack(parts)

    def u_expression(self) -> cp.Expression:
        """The CVXPY expression of the flat local vector ``u``."""
        return self._u_expr

    # ------------------------------------------------------------------ evaluation
    def _set(self, u: np.ndarray) -> None:
        for var, value in self.layout.split(u).items():
            var.value = value

    def _nonfinite(self, what: str, round: int | None) -> DeclarationError:
        when = f" in round {round}" if round is not None else ""
        return self._fail(f"the {what} returned NaN or infinite values{when}; it must return finite numbers "
                          "(check the data it closes over and the point it is evaluated at).")

    def objective_value(self, u: np.ndarray, *, round: int | None = None) -> float:
        """``f_p(u)`` (the user's ``value`` callable when given; a non-finite value raises naming it)."""
        if self.value is not None:
            v = float(self.value(u))
            if not math.isfinite(v):
                raise self._nonfinite("'value' callable", round)
            return v
        self._set(u)
        return float(self.objective.value)

    def box_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(lo, hi)`` when the agent's feasible set is declared as a box ``lo <= u <= hi`` (:func:`declared_box`),
        else None."""
        return declared_box(self)

    def violation(self, u: np.ndarray) -> float:
        """Largest violation of the agent's constraints at ``u`` (0 when feasible)."""
        self._set(u)
        worst = 0.0
        for con in self.constraints:
            v = con.violation()
            worst = max(worst, float(np.max(v)) if np.size(v) else 0.0)
        return worst

    def grad(self, u: np.ndarray, *, round: int | None = None) -> np.ndarray:
        """Gradient of the objective at ``u``: the user's callable, else the compiled numpy gradient
        (:attr:`compiled_gradient`), else CVXPY's ``Expression.grad``."""
        if self.gradient is not None:
            g = np.asarray(self.gradient(u), dtype=float).ravel()
            if g.shape != (self.layout.size,):
                raise self._fail(f"gradient returned shape {g.shape}; expected ({self.layout.size},).")
            if not np.all(np.isfinite(g)):
                raise self._nonfinite("'gradient' callable", round)
            return g
        fast = self.compiled_gradient
        if fast is not None:
            try:
                return fast(u)
            except OutsideDomain:  # a point CVXPY does not differentiate at: its answer (an error) below
                pass
        return self._cvxpy_grad(u)

    @cached_property
    def compiled_gradient(self) -> CompiledGradient | None:
        """The objective's numpy gradient compiled once (:mod:`cvxdp.model.gradients`), or None when an atom is
        not supported (then :meth:`grad` uses CVXPY's ``Expression.grad``). Not pickled: rebuilt on first use."""
        return compile_gradient(self.objective, self.layout, name=self.name)

    def _cvxpy_grad(self, u: np.ndarray) -> np.ndarray:
        """CVXPY's ``Expression.grad`` at ``u`` in the flat layout (one tree walk through CVXPY per call)."""
        self._set(u)
        grads = self.objective.grad
        g = np.zeros(self.layout.size)
        for var, off in zip(self.layout.variables, self.layout.offsets):
            if var not in grads:  # a variable of the constraints only: the objective does not depend on it
                continue
            gv = grads[var]
            if gv is None:
                raise self._fail("CVXPY cannot differentiate the objective here; pass gradient=.")
            gv = gv.toarray() if hasattr(gv, "toarray") else np.asarray(gv)
            g[off:off + var.size] = np.ravel(gv)
        return g


@dataclass(frozen=True)
class PublicLayout:
    """The public shape of an agent's flat local vector: its size and the positions of each shared block."""

    size: int
    shared: Mapping[str, np.ndarray]

    @property
    def shared_indices(self) -> np.ndarray:
        """All shared coordinates, key by key in sorted key order."""
        return shared_indices(self.shared)

    @property
    def shared_mask(self) -> np.ndarray:
        mask = np.zeros(self.size, dtype=bool)
        for idx in self.shared.values():
            mask[idx] = True
        return mask


class Declaration:
    """What a party tells the coordinator about one of its agents before round 1: public by construction.

    The name, the local vector's size and its shared blocks (keys and positions), the declared sensitivity and
    curvature bound, the declared per-block penalty weights, whether an initial point is given and declared public,
    and family-specific public facts (``facts``: the ERM constants of a graph node; a vertical party's shape, bound,
    curvature and, for the label holder, its labels). The coordinator (every family's server) reads nothing else;
    :meth:`Agent.declaration` builds it, and :meth:`to_dict` / :meth:`from_dict` carry it over a wire.
    """

    def __init__(self, name: str, size: int, shared: Mapping[str, Sequence[int]], *,
                 sensitivity: Sensitivity | None = None, lipschitz: float | None = None,
                 rho_scale: Mapping[str, Sequence[float]] | None = None, initial: bool = False,
                 initial_public: bool = False, **facts: Any) -> None:
        self.name = name
        self.layout = PublicLayout(int(size), {k: np.asarray(v, dtype=int) for k, v in shared.items()})
        self.sensitivity = sensitivity
        self.lipschitz = lipschitz
        self.rho_scale = None if rho_scale is None else {k: tuple(float(x) for x in np.ravel(v))
                                                         for k, v in rho_scale.items()}
        self.initial = True if initial else None
        self.initial_public = bool(initial_public)
        self.facts = dict(facts)

    def __getattr__(self, name: str) -> Any:  # the family-specific facts read as attributes (p.n_features, ...)
        facts = self.__dict__.get("facts", {})
        if name in facts:
            return facts[name]
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name')!r} declares no {name!r}")

    def __repr__(self) -> str:
        return f"Declaration({self.name!r}, size={self.layout.size}, shared={sorted(self.layout.shared)})"

    def rho_weights(self, key: str) -> np.ndarray:
        """The declared relative penalty weights of shared key ``key`` (ones when none are declared)."""
        return rho_weights(self.rho_scale, len(self.layout.shared[key]), key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (arrays as lists; :class:`Sensitivity` and dataclass facts as dicts)."""
        def plain(v: Any) -> Any:
            if isinstance(v, np.ndarray):
                return {"__array__": v.tolist()}
            if hasattr(v, "to_dict"):
                return {"__" + type(v).__name__ + "__": v.to_dict()}
            return v
        sens = self.sensitivity
        return {"name": self.name, "size": self.layout.size,
                "shared": {k: v.tolist() for k, v in self.layout.shared.items()},
                "sensitivity": None if sens is None else {"l1": sens.l1, "l2": sens.l2, "relation": sens.relation,
                                                          "alpha": sens.alpha},
                "lipschitz": self.lipschitz, "rho_scale": self.rho_scale, "initial": bool(self.initial),
                "initial_public": self.initial_public, "facts": {k: plain(v) for k, v in self.facts.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], fact_types: Mapping[str, Callable[[dict], Any]] | None = None
                  ) -> Declaration:
        """Inverse of :meth:`to_dict`; ``fact_types`` rebuilds dataclass facts by type name
        (e.g. ``{"ERMConstants": lambda d: ERMConstants(**d)}``)."""
        def back(v: Any) -> Any:
            if isinstance(v, dict) and len(v) == 1:
                (key, inner), = v.items()
                if key == "__array__":
                    return np.asarray(inner)
                if key.startswith("__") and key.endswith("__") and fact_types and key[2:-2] in fact_types:
                    return fact_types[key[2:-2]](inner)
            return v
        sens = d.get("sensitivity")
        return cls(d["name"], d["size"], d["shared"], sensitivity=None if sens is None else Sensitivity(**sens),
                   lipschitz=d.get("lipschitz"), rho_scale=d.get("rho_scale"), initial=d.get("initial", False),
                   initial_public=d.get("initial_public", False),
                   **{k: back(v) for k, v in (d.get("facts") or {}).items()})


def check_agents(agents: Sequence[Agent], *, private: bool, noise: str | None = None) -> dict[str, int]:
    """Every agent's own checks (:meth:`Agent.check`), then :func:`check_declarations` on their declarations.

    Returns the size of every shared key.
    """
    return check_declarations([a.declaration() for a in checked_agents(agents)], private=private, noise=noise)


def checked_agents(agents: Any, types: tuple[type, ...] = (Agent,), label: str = "cvxdp.Agent") -> list[Agent]:
    """``agents`` as a list, after checking it is a non-empty list of ``types`` and each agent's own structural
    checks (:meth:`Agent.check`); errors name ``solve``'s ``agents`` parameter and ``label``."""
    if not isinstance(agents, (list, tuple)) or len(agents) == 0:
        raise fail("agents", "solve", f"a non-empty list of {label}", agents)
    for agent in agents:
        if not isinstance(agent, types):
            raise fail("agents", "solve", f"a list of {label}", type(agent).__name__)
        agent.check()
    return list(agents)


def check_declarations(agents: Sequence[Any], *, private: bool, noise: str | None = None) -> dict[str, int]:
    """Checks across the agents' public declarations: non-empty, unique names, each key the same size everywhere
    (and, for a private run, the declared sensitivity the noise needs). Returns the size of every shared key."""
    if not isinstance(agents, (list, tuple)) or len(agents) == 0:
        raise fail("agents", "solve", "a non-empty list of cvxdp.Agent", agents)
    names: set[str] = set()
    sizes: dict[str, tuple[int, str]] = {}
    for agent in agents:
        if agent.name in names:
            raise DeclarationError(f"Agent name {agent.name!r} is used twice; names must be unique.")
        names.add(agent.name)
        for key, idx in agent.layout.shared.items():
            if key in sizes and sizes[key][0] != len(idx):
                other_size, other = sizes[key]
                raise DeclarationError(f"Shared key {key!r} has size {len(idx)} in agent {agent.name!r} but "
                                       f"size {other_size} in agent {other!r}.")
            sizes.setdefault(key, (len(idx), agent.name))
        if private:
            q = 1 if noise == "laplace" else 2
            if agent.sensitivity is None or agent.sensitivity.norm(q) is None:
                raise missing_sensitivity(agent.name, f"a private run with {noise} noise", f"l{q}",
                                          agent.sensitivity, size=agent.layout.size)
    holders: dict[str, list[str]] = {}
    for agent in agents:
        for key in agent.layout.shared:
            holders.setdefault(key, []).append(agent.name)
    alone = [a.name for a in agents if all(len(holders[k]) == 1 for k in a.layout.shared)]
    if len(agents) > 1 and alone:
        keys = {a.name: sorted(a.layout.shared) for a in agents if a.name in alone}
        warnings.warn(f"Agent(s) {', '.join(map(repr, alone))} share no key with any other agent (keys: {keys}); "
                      "they run uncoupled and the consensus couples nothing. Give agents that should agree the "
                      "same shared key.", UserWarning, stacklevel=3)
    return {k: v[0] for k, v in sizes.items()}


def check_public_initial(agents: Sequence[Any]) -> None:
    """Refuse a private run whose agent starts from an undeclared ``initial`` point.

    A starting point chosen from private data (say, a local fit) leaks through the first message and no
    mechanism accounts for it. ``Agent(initial=..., initial_public=True)`` declares it data independent;
    the default start (the projection of 0 onto ``W_p``) needs no declaration.
    """
    for agent in agents:
        if getattr(agent, "initial", None) is not None and getattr(agent, "initial_public", False) is not True:
            raise DeclarationError(
                f"Agent {agent.name!r}: a private run needs a public starting point, but initial=... is not "
                "declared public. Pass initial_public=True if the point does not depend on private data, "
                "or drop initial (the default start is the projection of 0 onto the feasible set).")


# --------------------------------------------------------------------------- probing a declaration
# check_declaration samples points of W_p and neighbouring data sets and reports every sample where the declared
# gradient, lipschitz or Sensitivity is exceeded (docs/own-agent.md). Sampling finds violations, never proves a bound.

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
    name = f"Agent {agent.name!r}"

    # the declared gradient against central finite differences of the objective
    worst_grad = (0.0, None)
    for u in sample[:points]:
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

    # the curvature inequality, on D and on every neighbour
    worst_curv = (0.0, "", None)
    for who in [agent, *others]:
        values = [who.objective_value(u) for u in sample]
        grads = [np.asarray(who.grad(u), dtype=float) for u in sample]
        for i, j in zip(rng.integers(0, len(sample), 4 * points), rng.integers(0, len(sample), 4 * points)):
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

    # the gradient sensitivity over W and the neighbours
    if others:
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
    if not all(math.isfinite(x) for x in (report.curvature, report.gradient_error)):
        report.violations.append(f"{name}: the objective or its gradient is not finite at a sampled point of W.")
    return report
