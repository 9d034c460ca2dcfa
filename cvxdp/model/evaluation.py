"""Per-round metrics without walking CVXPY trees (SPEC §2.3): objective value and constraint violation.

Built once per agent and data (cached with the compiled data, see :mod:`cvxdp.model.compiled`):

* every affine expression the metrics need becomes an exact sparse map ``u -> M u + m`` (``M`` from CVXPY's
  own derivative of the affine expression — its coefficients —, ``m`` its value at ``u = 0``);
* a constraint whose expressions are affine (``==``, ``<=``, ``Zero``, ``NonNeg``, ``NonPos``, ``SOC``) is then
  evaluated with the same residual formula as CVXPY's ``Constraint.violation`` on those maps;
* the objective is the agent's ``value=`` callable when given; otherwise it is split into sums of scaled
  terms, each affine (``M u + m``), a sum of squares (``||M u + m||^2 / y``) or a 2-norm of an affine
  expression; a scalar convex ``<=`` constraint (``norm(x) <= r``) is evaluated the same way.

Anything else (an exponential-cone constraint, a convex expression on the left of ``<=``, ``log_sum_exp``...)
keeps CVXPY's own evaluation for that constraint or term only, so the numbers are always CVXPY's.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.unary_operators import NegExpression
from cvxpy.atoms.elementwise.power import Power
from cvxpy.atoms.pnorm import Pnorm
from cvxpy.atoms.quad_over_lin import quad_over_lin
from cvxpy.constraints import SOC, Equality, Inequality, NonNeg, NonPos, Zero
from cvxpy.cvxcore.python import canonInterface
from cvxpy.lin_ops import lin_op as lo
from cvxpy.reductions.eval_params import replace_params_with_consts

from .compiled import cached, data_key

if TYPE_CHECKING:  # annotations only
    from .agent import Agent, Layout


class AffineMap:
    """``u -> M u + m`` for an affine CVXPY expression (values in CVXPY's column-major order)."""

    def __init__(self, expr: cp.Expression, M: sp.csr_matrix, m: np.ndarray) -> None:
        self.shape = expr.shape
        self.M, self.m = M, m

    def __call__(self, u: np.ndarray) -> np.ndarray:
        return self.M @ u + self.m

    def value(self, u: np.ndarray) -> np.ndarray:
        """With the expression's shape (as CVXPY's ``.value``)."""
        return np.reshape(self(u), self.shape, order="F") if self.shape else self(u)[0]


def _coefficients(exprs: list[cp.Expression], layout: Layout) -> list[tuple[sp.csr_matrix, np.ndarray]]:
    """``(M, m)`` of every affine expression in one call of CVXPY's own coefficient extraction (cvxcore),
    with the parameters' current values as constants — what CVXPY's canonicalization does."""
    lin_ops = [replace_params_with_consts(e).canonical_form[0] for e in exprs]
    id_to_col = {var.id: off for var, off in zip(layout.variables, layout.offsets)}
    sizes = [e.size for e in exprs]
    total = int(sum(sizes))
    mat = canonInterface.get_problem_matrix(lin_ops, layout.size, id_to_col, {lo.CONSTANT_ID: 1},
                                            {lo.CONSTANT_ID: 0}, total)
    stacked = sp.csr_matrix(mat.reshape((layout.size + 1, total)).T)  # rows: stacked entries; last column: offset
    out, row = [], 0
    for size in sizes:
        block = stacked[row:row + size]
        out.append((sp.csr_matrix(block[:, :-1]), block[:, -1].toarray().ravel()))
        row += size
    return out


def _grad_coefficients(expr: cp.Expression, layout: Layout) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(M, m)`` from CVXPY's derivative of the expression (slower, one tree walk per atom)."""
    grads = expr.grad
    m = np.ravel(np.asarray(expr.value, dtype=float), order="F")
    blocks = []
    for var in layout.variables:
        g = grads.get(var)
        if g is None:
            blocks.append(sp.csr_matrix((m.size, var.size)))
        else:
            blocks.append(sp.csr_matrix(np.full((1, 1), g) if np.isscalar(g) else g).T)
    return sp.hstack(blocks, format="csr"), m


def affine_maps(exprs: list[cp.Expression], layout: Layout, rng: np.random.Generator) -> list[AffineMap]:
    """Exact affine maps of ``exprs``, each checked against CVXPY's own evaluation at a random point.

    The agent's variables must hold zeros on entry (they hold the random point on exit).
    """
    if not exprs:
        return []
    try:
        coeffs = _coefficients(exprs, layout)
    except Exception:  # an atom cvxcore cannot stack: CVXPY's derivative instead
        coeffs = [_grad_coefficients(e, layout) for e in exprs]
    u = rng.normal(size=layout.size)
    for var, value in layout.split(u).items():
        var.value = value
    maps = []
    for e, (M, m) in zip(exprs, coeffs):
        ref = np.ravel(np.asarray(e.value, dtype=float), order="F")
        if M.shape != (ref.size, layout.size) or not np.allclose(M @ u + m, ref, rtol=1e-9, atol=1e-9):
            for var in layout.variables:
                var.value = np.zeros(var.shape)
            M, m = _grad_coefficients(e, layout)
            for var, value in layout.split(u).items():
                var.value = value
        maps.append(AffineMap(e, M, m))
    return maps


def _soc_indices(t_shape: tuple[int, ...], x_shape: tuple[int, ...], axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of each cone's t and x entries in the column-major values of CVXPY's ``SOC(t, X, axis)``."""
    if len(x_shape) <= 1:  # one cone
        return np.zeros(1, dtype=int), np.arange(int(np.prod(x_shape, dtype=int))).reshape(1, -1)
    rows, cols = x_shape
    if axis == 0:  # cone i is column i of X
        return np.arange(cols), np.arange(rows * cols).reshape(cols, rows)
    return np.arange(rows), np.arange(rows * cols).reshape(cols, rows).T  # cone i is row i


def _soc_residual(t: np.ndarray, X: np.ndarray) -> np.ndarray:
    """CVXPY's ``SOC.residual`` (the distance of each (t, x) to the cone), in closed form:
    0 inside, ``(||x|| - t)/sqrt(2)`` when ``|t| < ||x||``, ``||(t, x)||`` when ``t <= -||x||``."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return np.where(t >= norms, 0.0, np.where(np.abs(t) < norms, (norms - t) / np.sqrt(2.0),
                                              np.sqrt(norms * norms + t * t)))


def _is_affine(expr: cp.Expression) -> bool:
    return expr.is_affine() and not expr.is_complex()


class _Maps:
    """Collects the affine expressions to map, then builds all their maps at once (:func:`affine_maps`)."""

    def __init__(self) -> None:
        self.exprs: list[cp.Expression] = []
        self.slots: list[_Slot] = []

    def add(self, expr: cp.Expression) -> _Slot:
        slot = _Slot(expr.shape)
        self.exprs.append(expr)
        self.slots.append(slot)
        return slot

    def build(self, layout: Layout, rng: np.random.Generator, *, pad: bool = False) -> None:
        """Fill every slot in; stack them so :meth:`values` evaluates all of them in one product (with
        ``pad``, one more entry that is always 0)."""
        off = 0
        for slot, amap in zip(self.slots, affine_maps(self.exprs, layout, rng)):
            slot.M, slot.m = amap.M, amap.m
            slot.lo, slot.hi = off, off + amap.m.size
            off = slot.hi
        blocks = [slot.M for slot in self.slots] + ([sp.csr_matrix((1, layout.size))] if pad else [])
        self.M = sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, layout.size))
        self.m = np.concatenate([slot.m for slot in self.slots] + [np.zeros(1 if pad else 0)])

    def values(self, u: np.ndarray) -> np.ndarray:
        """All collected expressions at ``u``, stacked (slot ``k`` at ``[lo:hi]``)."""
        values = self.M @ u
        values += self.m  # in place: the same sums, one large temporary fewer
        return values


class _Slot(AffineMap):
    """An :class:`AffineMap` whose coefficients are filled in by :meth:`_Maps.build`."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.M: sp.csr_matrix | None = None
        self.m: np.ndarray | None = None
        self.lo = self.hi = 0


ViolationFn = Callable[[np.ndarray, np.ndarray], float]  # (u, stacked values of the maps) -> violation


@dataclass
class _Plan:
    """The constraints of one agent, sorted by how their violation is computed from the stacked values."""

    absolute: list[_Slot] = field(default_factory=list)  # ==, Zero: max |expr|
    positive: list[_Slot] = field(default_factory=list)  # <=: max(max(lhs - rhs), 0)
    cones: list[tuple[_Slot, _Slot, np.ndarray, np.ndarray]] = field(default_factory=list)  # SOC(t, X, axis)
    other: list[ViolationFn] = field(default_factory=list)  # NonPos / NonNeg norms, scalar convex <=
    tree: list[cp.Constraint] = field(default_factory=list)  # left to CVXPY


def _plan_constraint(con: cp.Constraint, maps: _Maps, plan: _Plan) -> None:
    """File ``con`` into ``plan`` (the largest entry of ``con.violation()`` is what is reproduced)."""
    if isinstance(con, Inequality) and con.expr.is_scalar() and not _is_affine(con.expr):
        terms = ScalarTerms(con.expr, maps)  # e.g. norm(x) <= r, sum_squares(A x - b) <= s
        if terms.tree:
            plan.tree.append(con)
        else:
            plan.other.append(lambda u, v: max(terms(u), 0.0))
    elif isinstance(con, (Equality, Zero, Inequality, NonNeg, NonPos)) and _is_affine(con.expr):
        e = maps.add(con.expr)
        if isinstance(con, (Equality, Zero)):
            plan.absolute.append(e)
        elif isinstance(con, Inequality):
            plan.positive.append(e)
        elif isinstance(con, NonPos):  # ||max(expr, 0)||_2
            plan.other.append(lambda u, v: float(np.linalg.norm(np.maximum(v[e.lo:e.hi], 0))))
        else:  # NonNeg: ||min(expr, 0)||_2
            plan.other.append(lambda u, v: float(np.linalg.norm(np.minimum(v[e.lo:e.hi], 0))))
    elif isinstance(con, SOC) and all(_is_affine(a) for a in con.args):
        plan.cones.append((maps.add(con.args[0]), maps.add(con.args[1]),
                           *_soc_indices(con.args[0].shape, con.args[1].shape, con.axis)))
    else:
        plan.tree.append(con)


def _positions(slots: list[_Slot]) -> np.ndarray:
    return np.concatenate([np.arange(s.lo, s.hi) for s in slots]) if slots else np.zeros(0, dtype=int)


def _selector(idx: np.ndarray) -> np.ndarray | slice:
    """``idx`` as a slice when it is one run of consecutive positions (a view instead of a gather; same values)."""
    if idx.size and idx[-1] - idx[0] + 1 == idx.size and np.array_equal(idx, np.arange(idx[0], idx[-1] + 1)):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


class _Violation:
    """``max`` over every planned constraint, vectorized: one sparse product, then a few array operations."""

    def __init__(self, plan: _Plan, pad: int) -> None:
        self.abs_idx = _positions(plan.absolute)
        self.pos_idx = _positions(plan.positive)
        self._abs, self._pos = _selector(self.abs_idx), _selector(self.pos_idx)
        self.other = plan.other
        width = max((xi.shape[1] for *_, xi in plan.cones), default=0)
        ts, xs = [], []
        for t, X, ti, xi in plan.cones:  # cones of different sizes padded with a position that holds 0
            ts.append(t.lo + ti)
            xs.append(np.hstack([X.lo + xi, np.full((xi.shape[0], width - xi.shape[1]), pad)]))
        self.t_idx = np.concatenate(ts) if ts else None
        self.x_idx = np.vstack(xs) if xs else None

    def __call__(self, u: np.ndarray, v: np.ndarray) -> float:
        worst = 0.0
        if self.abs_idx.size:
            worst = max(worst, float(np.abs(v[self._abs]).max()))
        if self.pos_idx.size:
            worst = max(worst, float(v[self._pos].max()))
        if self.t_idx is not None:
            t, X = v[self.t_idx], v[self.x_idx]
            norms = np.sqrt(np.einsum("ij,ij->i", X, X))
            if float((norms - t).max()) > 0:  # some point outside its cone
                worst = max(worst, float(_soc_residual(t, X).max()))
        for fn in self.other:
            worst = max(worst, fn(u, v))
        return worst


def _scalar(value) -> float:
    """A one-entry constant (any shape) as a float."""
    return float(np.real(np.asarray(value, dtype=complex if np.iscomplexobj(value) else float)).reshape(-1)[0])


def _terms(expr: cp.Expression, scale: float, out: list) -> None:
    """Split ``expr`` into ``(scale, kind, payload)`` terms whose sum is ``expr``."""
    if _is_affine(expr):
        out.append((scale, "affine", expr))
    elif isinstance(expr, AddExpression):
        for arg in expr.args:
            _terms(arg, scale, out)
    elif isinstance(expr, NegExpression):
        _terms(expr.args[0], -scale, out)
    elif isinstance(expr, (multiply, MulExpression)) and len(expr.args) == 2 and expr.is_scalar() and any(
            a.is_constant() and a.is_scalar() for a in expr.args):
        const, other = expr.args if expr.args[0].is_constant() and expr.args[0].is_scalar() else expr.args[::-1]
        _terms(other, scale * _scalar(const.value), out)
    elif isinstance(expr, DivExpression) and expr.args[1].is_constant() and expr.args[1].is_scalar():
        _terms(expr.args[0], scale / _scalar(expr.args[1].value), out)
    elif isinstance(expr, quad_over_lin) and _is_affine(expr.args[0]) and expr.args[1].is_constant():
        out.append((scale / _scalar(expr.args[1].value), "squares", expr.args[0]))
    elif isinstance(expr, Pnorm) and expr.axis is None and float(expr.p) == 2.0 and _is_affine(expr.args[0]):
        out.append((scale, "norm", expr.args[0]))
    elif isinstance(expr, Sum) and expr.axis is None and isinstance(expr.args[0], Power) \
            and _scalar(getattr(expr.args[0].p, "value", expr.args[0].p)) == 2.0 \
            and _is_affine(expr.args[0].args[0]):
        out.append((scale, "squares", expr.args[0].args[0]))
    else:
        out.append((scale, "tree", expr))


class ScalarTerms:
    """A scalar expression as a sum of scaled terms: affine, sum of squares or 2-norm of an affine map, and
    (only where nothing else fits) a sub-expression CVXPY evaluates itself (counted in ``tree``)."""

    def __init__(self, expr: cp.Expression, maps: _Maps) -> None:
        raw: list = []
        _terms(expr, 1.0, raw)
        self.terms = [(scale, kind, e if kind == "tree" else maps.add(e)) for scale, kind, e in raw]
        self.tree = sum(kind == "tree" for _, kind, _ in self.terms)

    def __call__(self, u: np.ndarray) -> float:
        """The value at ``u`` (the agent's variables must hold ``u`` when ``tree`` > 0)."""
        total = 0.0
        for scale, kind, item in self.terms:
            if kind == "affine":
                total += scale * float(item(u)[0])
            elif kind == "squares":
                r = item(u)
                total += scale * float(r @ r)
            elif kind == "norm":
                total += scale * float(np.linalg.norm(item(u)))
            else:
                total += scale * float(item.value)
        return total


class Metrics:
    """``objective(u)`` and ``violation(u)`` of one agent, equal to CVXPY's evaluation (see module doc)."""

    def __init__(self, agent: Agent) -> None:
        # no reference to the agent itself: the cache that holds this object is keyed weakly by the agent
        self._layout = layout = agent.layout
        self._value = agent.value
        self._agent = weakref.ref(agent)  # only to name the agent when a user's ``value`` callable misbehaves
        saved = [var.value for var in layout.variables]
        try:
            for var in layout.variables:
                var.value = np.zeros(var.shape)
            maps = _Maps()
            plan = _Plan()
            for con in agent.constraints:
                _plan_constraint(con, maps, plan)
            maps.build(layout, np.random.default_rng(0), pad=True)  # fixed probe point: deterministic build
            self._maps = maps
            #: a declared box: its violation is read off the bounds (the same numbers as the maps give)
            self._box = agent.box_bounds() if agent.constraints else None
            #: the box's bounds as two numbers when every coordinate has the same ones (a reduction each, below)
            self._uniform = _uniform_bounds(self._box) if self._box is not None else None
            self._violation = _Violation(plan, pad=maps.m.size - 1)
            self._tree_constraints = plan.tree
            objective_maps = _Maps()
            self._objective = ScalarTerms(agent.objective, objective_maps) if agent.value is None else None
            objective_maps.build(layout, np.random.default_rng(1))
        finally:
            for var, val in zip(layout.variables, saved):
                var.value = val
        #: how many constraints / objective terms still walk CVXPY trees
        self.tree_constraints = len(self._tree_constraints)
        self.tree_terms = self._objective.tree if self._objective is not None else 0

    def _set(self, u: np.ndarray) -> None:
        for var, value in self._layout.split(u).items():
            var.value = value

    def objective(self, u: np.ndarray, *, round: int | None = None) -> float:
        """``f_p(u)`` (a user's ``value`` callable goes through the agent, which names a non-finite value)."""
        if self._value is not None:
            return self._agent().objective_value(u, round=round)
        if self.tree_terms:
            self._set(u)
        return self._objective(u)

    def violation(self, u: np.ndarray) -> float:
        """Largest violation of the agent's constraints at ``u`` (0 when feasible). A declared box takes
        ``max(lo - u, u - hi, 0)``: each entry is the number its constraint's map computes (``u - c`` and
        ``c - u`` are exact negations), without the sparse product."""
        if self._box is not None:
            if self._uniform is not None and u.size:
                # max_k (lo - u_k) = lo - min_k u_k (rounding is monotone; an infinite bound gives -inf either
                # way), likewise for hi: the same number from two reductions when u is finite (else the
                # expression below decides, NaN included)
                lo, hi = self._uniform
                smallest, largest = float(u.min()), float(u.max())
                if math.isfinite(smallest) and math.isfinite(largest):
                    return max(0.0, lo - smallest, largest - hi)
            lo, hi = self._box
            return max(0.0, float(np.maximum(lo - u, u - hi).max())) if u.size else 0.0
        worst = self._violation(u, self._maps.values(u))
        if self._tree_constraints:
            self._set(u)
            for con in self._tree_constraints:
                v = con.violation()
                worst = max(worst, float(np.max(v)) if np.size(v) else 0.0)
        return worst


def _uniform_bounds(box: tuple[np.ndarray, np.ndarray]) -> tuple[float, float] | None:
    """``(lo, hi)`` as numbers when every coordinate of the box has the same bounds, else None."""
    lo, hi = (np.asarray(b, dtype=float) for b in box)
    if not lo.size or np.any(lo != lo.flat[0]) or np.any(hi != hi.flat[0]):
        return None
    return float(lo.flat[0]), float(hi.flat[0])


class TreeMetrics:
    """CVXPY's own evaluation (what :class:`Metrics` falls back to if it cannot be built for an agent)."""

    tree_constraints = tree_terms = -1  # everything

    def __init__(self, agent: Agent) -> None:
        self._agent = weakref.ref(agent)  # the cache holding this object is keyed weakly by the agent

    def objective(self, u: np.ndarray, *, round: int | None = None) -> float:
        return self._agent().objective_value(u, round=round)

    def violation(self, u: np.ndarray) -> float:
        return self._agent().violation(u)


def compiled_metrics(agent: Agent) -> Metrics | TreeMetrics:
    """The agent's :class:`Metrics`, built once per agent and data.

    Should building them fail on an expression this module does not foresee, the agent keeps CVXPY's own
    evaluation (:class:`TreeMetrics`): slower, never different.
    """
    def build() -> Metrics | TreeMetrics:
        try:
            return Metrics(agent)
        except Exception:  # noqa: BLE001 - any failure only costs speed
            return TreeMetrics(agent)

    key = data_key(*agent.constraints) + ("value" if agent.value is not None else data_key(agent.objective))
    return cached(agent, "metrics", key, build)


__all__ = ["AffineMap", "Metrics", "ScalarTerms", "TreeMetrics", "compiled_metrics"]
