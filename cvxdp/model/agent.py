"""Declaring agents: a local objective and feasible set in CVXPY over private data (SPEC §1, §8).

An :class:`Agent` only stores what it is given and runs the cheap structural checks. The flat layout of
its local vector ``u`` (all variables of its problem, each flattened in column-major order, in the order
CVXPY lists them) is computed once by :meth:`Agent.layout`. What a party declares about an agent (its
:class:`Sensitivity`, :class:`PerExample`, the public :class:`Declaration`) is in :mod:`cvxdp.model.declaration`
(also importable from here); probing a declaration against samples (:func:`cvxdp.check_declaration`) is in
:mod:`cvxdp.model.probe`.
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

from ..errors import DeclarationError, InfeasibleAgentError, check_float, convexity_advice, fail
from .compiled import NotCompilable, set_verdict
from .declaration import (
    Declaration,
    PerExample,
    PublicLayout,
    Sensitivity,
    check_declarations,
    check_public_initial,
    rho_weights,
    shared_indices,
)
from .gradients import CompiledGradient, OutsideDomain, compile_gradient

__all__ = ["Agent", "Declaration", "GradientFn", "Layout", "PerExample", "PublicLayout", "Sensitivity",
           "SmoothObjective", "check_agents", "check_declarations", "check_public_initial", "checked_agents",
           "cvxpy_gradient", "declared_box", "reserve_cvxpy_ids"]

GradientFn = Callable[[np.ndarray], np.ndarray]


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
        _check_rho_scale(self)
        if self.sensitivity is not None and not isinstance(self.sensitivity, Sensitivity):
            raise self._fail(f"'sensitivity' must be a cvxdp.Sensitivity. Got {type(self.sensitivity).__name__}.")
        # overlapping shared blocks inside one agent would double-count consensus
        idx = self.layout.shared_indices
        if len(np.unique(idx)) != len(idx):
            raise self._fail("two shared blocks overlap; each coordinate may belong to one key only.")

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
            _check_feasible_cvxpy(self)
            return
        if verdict.infeasible:
            raise InfeasibleAgentError(f"Agent {self.name!r}: the local feasible set is empty "
                                       f"(feasibility solve status {verdict.status!r}).")
        if verdict.unbounded:
            warnings.warn(f"Agent {self.name!r}: the local feasible set is unbounded; the convergence "
                          "and privacy analysis assume a compact set.", stacklevel=3)

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

    def u_expression(self) -> cp.Expression:
        """The CVXPY expression of the flat local vector ``u`` (built once)."""
        if "_u_expr" not in self.__dict__:
            parts = [v if v.ndim <= 1 else cp.vec(v, order="F") for v in self.layout.variables]
            self.__dict__["_u_expr"] = parts[0] if len(parts) == 1 else cp.hstack(parts)
        return self.__dict__["_u_expr"]

    # ------------------------------------------------------------------ evaluation
    def _set(self, u: np.ndarray) -> None:
        for var, value in self.layout.split(u).items():
            var.value = value

    def objective_value(self, u: np.ndarray, *, round: int | None = None) -> float:
        """``f_p(u)`` (the user's ``value`` callable when given; a non-finite value raises naming it)."""
        if self.value is not None:
            v = float(self.value(u))
            if not math.isfinite(v):
                raise _nonfinite(self, "'value' callable", round)
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
                raise _nonfinite(self, "'gradient' callable", round)
            return g
        fast = self.compiled_gradient
        if fast is not None:
            try:
                return fast(u)
            except OutsideDomain:  # a point CVXPY does not differentiate at: its answer (an error) below
                pass
        return cvxpy_gradient(self, u)

    @cached_property
    def compiled_gradient(self) -> CompiledGradient | None:
        """The objective's numpy gradient compiled once (:mod:`cvxdp.model.gradients`), or None when an atom is
        not supported (then :meth:`grad` uses CVXPY's ``Expression.grad``). Not pickled: rebuilt on first use."""
        return compile_gradient(self.objective, self.layout, name=self.name)



def _check_rho_scale(agent: Agent) -> None:
    """The declared penalty weights: a mapping from the agent's shared keys to positive weights of their sizes."""
    if agent.rho_scale is None:
        return
    if not isinstance(agent.rho_scale, Mapping):
        raise agent._fail(f"'rho_scale' must be a mapping from shared keys to positive weights. "
                          f"Got {type(agent.rho_scale).__name__}.")
    for key, weights in agent.rho_scale.items():
        if key not in agent.shared:
            raise agent._fail(f"'rho_scale' names {key!r}, which is not one of its shared keys "
                              f"({', '.join(sorted(agent.shared))}).")
        size = len(agent.layout.shared[key])
        arr = np.asarray(weights, dtype=float) if not isinstance(weights, (str, bytes)) else np.array(np.nan)
        if arr.shape not in ((), (size,)) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise agent._fail(f"'rho_scale[{key!r}]' must be a positive float or {size} positive floats. "
                              f"Got {weights!r} instead.")


def _check_feasible_cvxpy(agent: Agent) -> None:
    """Fallback of :meth:`Agent.check_feasible` through CVXPY (Clarabel, then ECOS)."""
    prob = cp.Problem(cp.Minimize(0), agent.constraints)
    try:
        prob.solve(solver=cp.CLARABEL)
    except cp.SolverError:
        prob.solve(solver=cp.ECOS)
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleAgentError(f"Agent {agent.name!r}: the local feasible set is empty "
                                   f"(feasibility solve status {prob.status!r}).")
    for sign in (1.0, -1.0):
        probe = cp.Problem(cp.Maximize(sign * cp.sum(agent.u_expression())), agent.constraints)
        try:
            probe.solve(solver=cp.CLARABEL)
        except cp.SolverError:
            continue
        if probe.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
            warnings.warn(f"Agent {agent.name!r}: the local feasible set is unbounded; the convergence "
                          "and privacy analysis assume a compact set.", stacklevel=4)
            break


def _nonfinite(agent: Agent, what: str, round: int | None) -> DeclarationError:
    when = f" in round {round}" if round is not None else ""
    return agent._fail(f"the {what} returned NaN or infinite values{when}; it must return finite numbers "
                       "(check the data it closes over and the point it is evaluated at).")


def cvxpy_gradient(agent: Agent, u: np.ndarray) -> np.ndarray:
    """The gradient of ``agent``'s objective at ``u`` in the flat layout by CVXPY's ``Expression.grad`` (one tree
    walk through CVXPY per call): :meth:`Agent.grad`'s last resort."""
    agent._set(u)
    grads = agent.objective.grad
    g = np.zeros(agent.layout.size)
    for var, off in zip(agent.layout.variables, agent.layout.offsets):
        if var not in grads:  # a variable of the constraints only: the objective does not depend on it
            continue
        gv = grads[var]
        if gv is None:
            raise agent._fail("CVXPY cannot differentiate the objective here; pass gradient=.")
        gv = gv.toarray() if hasattr(gv, "toarray") else np.asarray(gv)
        g[off:off + var.size] = np.ravel(gv)
    return g


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
