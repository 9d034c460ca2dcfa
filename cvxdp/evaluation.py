"""Per-round metrics without walking CVXPY trees (SPEC §2.3): objective value and constraint violation.

Built once per agent and data (cached with the compiled data, see :mod:`cvxdp.compiled`):

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

from collections.abc import Callable

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

from .agent import Agent, Layout
from .compiled import cached, data_key


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


def _soc_residual(t: np.ndarray, X: np.ndarray, axis: int) -> np.ndarray:
    """CVXPY's ``SOC.residual``: the distance of each (t, x) to the second-order cone."""
    t = np.atleast_1d(t)
    X = np.atleast_1d(X)
    if axis == 0:
        X = X.T
    X = np.atleast_2d(X)
    norms = np.linalg.norm(X, ord=2, axis=1)
    t_proj = np.zeros(t.shape)
    X_proj = np.zeros(X.shape)
    inside = t >= norms
    t_proj[inside] = t[inside]
    X_proj[inside] = X[inside]
    between = np.abs(t) < norms
    with np.errstate(divide="ignore", invalid="ignore"):
        coeff = 0.5 * (1 + t / norms)
    X_proj[between] = coeff[between, None] * X[between]
    t_proj[between] = coeff[between] * norms[between]
    return np.linalg.norm(np.concatenate([X - X_proj, (t - t_proj)[:, None]], axis=1), ord=2, axis=1)


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

    def build(self, layout: Layout, rng: np.random.Generator) -> None:
        for slot, amap in zip(self.slots, affine_maps(self.exprs, layout, rng)):
            slot.M, slot.m = amap.M, amap.m


class _Slot(AffineMap):
    """An :class:`AffineMap` whose coefficients are filled in by :meth:`_Maps.build`."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.M: sp.csr_matrix | None = None
        self.m: np.ndarray | None = None


def _constraint_fn(con: cp.Constraint, maps: _Maps) -> Callable[[np.ndarray], float] | None:
    """The largest entry of ``con.violation()`` as a function of ``u``, or None (keep CVXPY's evaluation)."""
    if isinstance(con, Inequality) and con.expr.is_scalar() and not _is_affine(con.expr):
        terms = ScalarTerms(con.expr, maps)  # e.g. norm(x) <= r, sum_squares(A x - b) <= s
        return None if terms.tree else (lambda u: max(terms(u), 0.0))
    if isinstance(con, (Equality, Zero, Inequality, NonNeg, NonPos)):
        if not _is_affine(con.expr):
            return None
        e = maps.add(con.expr)
        if con.expr.size == 0:
            return lambda u: 0.0
        if isinstance(con, (Equality, Zero)):
            return lambda u: float(np.max(np.abs(e(u))))
        if isinstance(con, Inequality):
            return lambda u: float(np.max(np.maximum(e(u), 0)))
        if isinstance(con, NonPos):
            return lambda u: float(np.linalg.norm(np.maximum(e(u), 0)))
        return lambda u: float(np.linalg.norm(np.abs(np.minimum(e(u), 0))))
    if isinstance(con, SOC) and all(_is_affine(a) for a in con.args):
        t, X = maps.add(con.args[0]), maps.add(con.args[1])
        axis = con.axis
        return lambda u: float(np.max(_soc_residual(t.value(u), X.value(u), axis)))
    return None


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
        _terms(other, scale * float(np.real(const.value)), out)
    elif isinstance(expr, DivExpression) and expr.args[1].is_constant() and expr.args[1].is_scalar():
        _terms(expr.args[0], scale / float(np.real(expr.args[1].value)), out)
    elif isinstance(expr, quad_over_lin) and _is_affine(expr.args[0]) and expr.args[1].is_constant():
        out.append((scale / float(expr.args[1].value), "squares", expr.args[0]))
    elif isinstance(expr, Pnorm) and expr.axis is None and float(expr.p) == 2.0 and _is_affine(expr.args[0]):
        out.append((scale, "norm", expr.args[0]))
    elif isinstance(expr, Sum) and expr.axis is None and isinstance(expr.args[0], Power) \
            and float(np.asarray(getattr(expr.args[0].p, "value", expr.args[0].p))) == 2.0 \
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
        self.agent = agent
        layout = agent.layout
        saved = [var.value for var in layout.variables]
        try:
            for var in layout.variables:
                var.value = np.zeros(var.shape)
            maps = _Maps()
            self._violations = []
            self._tree_constraints = []
            for con in agent.constraints:
                fn = _constraint_fn(con, maps)
                if fn is None:
                    self._tree_constraints.append(con)
                else:
                    self._violations.append(fn)
            self._objective = ScalarTerms(agent.objective, maps) if agent.value is None else None
            maps.build(layout, np.random.default_rng(0))  # a fixed probe point: building is deterministic
        finally:
            for var, val in zip(layout.variables, saved):
                var.value = val
        #: how many constraints / objective terms still walk CVXPY trees
        self.tree_constraints = len(self._tree_constraints)
        self.tree_terms = self._objective.tree if self._objective is not None else 0

    def _set(self, u: np.ndarray) -> None:
        for var, value in self.agent.layout.split(u).items():
            var.value = value

    def objective(self, u: np.ndarray) -> float:
        """``f_p(u)``."""
        if self.agent.value is not None:
            return float(self.agent.value(u))
        if self.tree_terms:
            self._set(u)
        return self._objective(u)

    def violation(self, u: np.ndarray) -> float:
        """Largest violation of the agent's constraints at ``u`` (0 when feasible)."""
        worst = 0.0
        for fn in self._violations:
            worst = max(worst, fn(u))
        if self._tree_constraints:
            self._set(u)
            for con in self._tree_constraints:
                v = con.violation()
                worst = max(worst, float(np.max(v)) if np.size(v) else 0.0)
        return worst


def compiled_metrics(agent: Agent) -> Metrics:
    """The agent's :class:`Metrics`, built once per agent and data."""
    key = data_key(*agent.constraints) + ("value" if agent.value is not None else data_key(agent.objective))
    return cached(agent, "metrics", key, lambda: Metrics(agent))


__all__ = ["AffineMap", "Metrics", "ScalarTerms", "compiled_metrics"]
