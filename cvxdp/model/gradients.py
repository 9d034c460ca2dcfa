"""Gradients of an agent's CVXPY objective in numpy, compiled once per agent (no ``gradient=`` needed).

:func:`compile_gradient` walks the objective's expression tree once and turns it into a tape of numpy closures:
a forward pass computes the node values the reverse rules read, and a reverse pass (reverse-mode differentiation)
pushes the adjoint from the objective down to the variables, whose entries land in the flat local vector's layout.
Parameters are read at call time, so changing a :class:`cvxpy.Parameter`'s value (in place or by assignment)
changes the next gradient. When the objective is a polynomial of degree at most two in the variables (read off
the tape: affine atoms over ``square``/``sum_squares``/``quad_form`` of affine expressions) and its data are small,
the affine gradient ``H u + c`` is extracted from the tape once per set of parameter values (on the second call with
the same values) and evaluated as one matrix-vector product.

Supported (real data): sums, negation, products and quotients by data, ``@`` of vectors and matrices, ``multiply``,
``sum``, indexing and slicing, ``reshape``/``vec``, ``promote``/``broadcast_to``, transposes, ``hstack``/``vstack``,
``sum_squares``/``quad_over_lin`` (constant denominator), ``square``/``power``, ``quad_form`` (constant matrix),
``logistic``, ``log_sum_exp`` (whole argument), ``exp`` and ``huber``. Anything else -- in particular the
non-differentiable atoms (``abs``, ``norm1``, ``max``, ``pos``, ...) -- makes :func:`compile_gradient` return None,
and the agent keeps CVXPY's ``Expression.grad`` (its subgradient conventions unchanged). A point CVXPY would not
differentiate at (outside an atom's domain) raises :class:`OutsideDomain`, and the caller asks CVXPY for that call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.broadcast_to import broadcast_to
from cvxpy.atoms.affine.hstack import Hstack
from cvxpy.atoms.affine.index import index, special_index
from cvxpy.atoms.affine.promote import Promote
from cvxpy.atoms.affine.reshape import reshape
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.transpose import transpose
from cvxpy.atoms.affine.unary_operators import NegExpression
from cvxpy.atoms.affine.vstack import Vstack
from cvxpy.atoms.elementwise.exp import exp
from cvxpy.atoms.elementwise.huber import huber
from cvxpy.atoms.elementwise.logistic import logistic
from cvxpy.atoms.elementwise.power import Power, PowerApprox
from cvxpy.atoms.log_sum_exp import log_sum_exp
from cvxpy.atoms.quad_form import QuadForm
from cvxpy.atoms.quad_over_lin import quad_over_lin
from cvxpy.utilities.power_tools import is_power2
from scipy.special import expit as _expit
from scipy.special import huber as _sp_huber
from scipy.special import logsumexp

__all__ = ["CompiledGradient", "OutsideDomain", "compile_gradient"]

log = logging.getLogger(__name__)

#: the quadratic path keeps a dense ``H`` of the local size squared and compares the parameters' bytes every call:
#: only below these sizes (above them the tape's own numpy work dominates its Python overhead anyway)
QUADRATIC_MAX_SIZE = 400
QUADRATIC_MAX_DATA = 100_000


#: the atoms compiled (exact classes; ``square``/``sum_squares``/``vec`` build these)
_SUPPORTED = frozenset({
    AddExpression, NegExpression, MulExpression, multiply, DivExpression, Sum, index, special_index, reshape,
    Promote, broadcast_to, transpose, Hstack, Vstack, quad_over_lin, Power, PowerApprox, QuadForm, logistic, exp,
    log_sum_exp, huber})


class Unsupported(Exception):
    """An atom (or a use of one) the compiler does not differentiate: the agent keeps CVXPY's gradient."""


class OutsideDomain(Exception):
    """At this point CVXPY would not differentiate (e.g. a non-power-of-two ``power`` at a non-positive entry):
    the caller asks CVXPY (which reports it as it always did)."""


def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum an adjoint of a broadcast result back to an operand's ``shape``."""
    if g.shape == shape:
        return g
    if not shape:
        return np.asarray(np.sum(g))
    extra = g.ndim - len(shape)
    if extra > 0:
        g = np.sum(g, axis=tuple(range(extra)))
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return np.reshape(g, shape)


def _expand(d: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``d`` broadcast to ``shape`` as a new array."""
    out = np.empty(shape)
    out[...] = d
    return out


def _param_value(param: cp.Parameter) -> np.ndarray:
    value = param.value
    if type(value) is np.ndarray and value.dtype == np.float64:
        return value
    if value is None or sp.issparse(value):
        raise OutsideDomain(f"parameter {param.name()!r} has no dense value")
    return np.asarray(value, dtype=float)


class _Tape:
    """Forward closures ``fwd[i](vals, u) -> value`` and reverse closures ``bwd[i](vals, adj, g, i)`` (adding node
    ``i``'s adjoint into its arguments' adjoints, or a variable's into the flat gradient ``g``) in topological order;
    ``bwd[i]`` is None for nodes without variables below them."""

    def __init__(self, layout: Any) -> None:
        self.layout = layout
        self.offsets = {var.id: (off, var.size, var.shape) for var, off in zip(layout.variables, layout.offsets)}
        self.fwd: list[Callable] = []
        self.bwd: list[Callable | None] = []
        self.kids: list[tuple[int, ...]] = []
        self.reads: list[tuple[int, ...]] = []  # the values each reverse rule reads
        self.degree: list[float] = []  # polynomial degree in the variables (inf: not a polynomial)
        self.seen: dict[int, int] = {}
        self.keep: list[Any] = []  # the compiled expressions (ids stay valid)
        self.sparse: dict[int, Any] = {}  # slots holding a sparse constant (kept sparse for ``@`` only)

    # ---------------------------------------------------------------- building
    def add(self, expr: cp.Expression) -> int:
        """Compile ``expr`` (and everything below it); return its slot."""
        key = id(expr)
        if key in self.seen:
            return self.seen[key]
        self.keep.append(expr)
        if expr.is_complex():  # numpy's float values would drop the imaginary part: CVXPY decides
            raise Unsupported("complex data")
        if not expr.variables():
            slot = self._constant(expr)
        elif isinstance(expr, cp.Variable):
            slot = self._variable(expr)
        else:
            kids = tuple(self.add(a) for a in expr.args)
            fwd, bwd = self._rule(expr, kids)
            slot = self._push(fwd, bwd, kids)
            self.reads[slot] = _reads(expr, kids, [self._needs(k) for k in kids], slot)
            self.degree[slot] = _degree(expr, [self.degree[k] for k in kids])
        self.seen[key] = slot
        return slot

    def _push(self, fwd: Callable, bwd: Callable | None, kids: tuple[int, ...]) -> int:
        self.fwd.append(fwd)
        self.bwd.append(bwd)
        self.kids.append(kids)
        self.reads.append(())
        self.degree.append(1.0 if bwd is not None else 0.0)  # a variable, or data; set by add() for other nodes
        return len(self.fwd) - 1

    def _constant(self, expr: cp.Expression) -> int:
        """A subtree without variables: its value, read at call time when it holds parameters."""
        if not expr.parameters():
            value = expr.value
            value = value if sp.issparse(value) else np.asarray(value, dtype=float)
            slot = self._push(lambda vals, u, v=value: v, None, ())
            if sp.issparse(value):
                self.sparse[slot] = value
            return slot
        if isinstance(expr, cp.Parameter):
            return self._push(lambda vals, u, p=expr: _param_value(p), None, ())
        kids = tuple(self.add(a) for a in expr.args)
        fwd, _ = self._rule(expr, kids)
        return self._push(fwd, None, kids)

    def _variable(self, var: cp.Variable) -> int:
        off, size, shape = self.offsets[var.id]
        stop = off + size

        def fwd(vals, u):
            return np.reshape(u[off:stop], shape, order="F")

        def bwd(vals, adj, g, i):
            g[off:stop] += np.ravel(adj[i], order="F")
        return self._push(fwd, bwd, ())

    def _needs(self, slot: int) -> bool:
        return self.bwd[slot] is not None

    # ---------------------------------------------------------------- rules
    def _rule(self, e: cp.Expression, kids: tuple[int, ...]) -> tuple[Callable, Callable | None]:
        if type(e) not in _SUPPORTED:  # exact classes: a subclass may compute something else
            raise Unsupported(type(e).__name__)
        if type(e) is not MulExpression:  # every other rule reads dense values
            for k in kids:
                if k in self.sparse:
                    dense = self.sparse.pop(k).toarray()
                    self.fwd[k] = lambda vals, u, v=dense: v
        need = [self._needs(k) for k in kids]
        shapes = [a.shape for a in e.args]
        if isinstance(e, AddExpression):
            return self._add(kids, need, shapes)
        if isinstance(e, NegExpression):
            (a,) = kids
            return (lambda vals, u: -vals[a]), (lambda vals, adj, g, i: _acc(adj, a, -adj[i]))
        if isinstance(e, multiply):  # a subclass of MulExpression: first
            return self._multiply(kids, need, shapes)
        if isinstance(e, MulExpression):
            return self._matmul(e, kids, need, shapes)
        if isinstance(e, DivExpression):
            if need[1]:
                raise Unsupported("a division by an expression of the variables")
            a, b = kids
            sa = shapes[0]
            return ((lambda vals, u: np.divide(vals[a], vals[b])),
                    (lambda vals, adj, g, i: _acc(adj, a, _unbroadcast(adj[i] / vals[b], sa))))
        if isinstance(e, Sum):
            return self._sum(e, kids, shapes)
        if isinstance(e, special_index):
            return self._special_index(e, kids, shapes)
        if isinstance(e, index):
            return self._index(e, kids, shapes)
        if isinstance(e, reshape):
            (a,) = kids
            shape, back, order = e.shape, shapes[0], e.order
            return ((lambda vals, u: np.reshape(vals[a], shape, order=order)),
                    (lambda vals, adj, g, i: _acc(adj, a, np.reshape(adj[i], back, order=order))))
        if isinstance(e, (Promote, broadcast_to)):
            (a,) = kids
            shape, back = e.shape, shapes[0]
            return ((lambda vals, u: _expand(vals[a], shape)),
                    (lambda vals, adj, g, i: _acc(adj, a, _unbroadcast(adj[i], back))))
        if isinstance(e, transpose):
            (a,) = kids
            axes = e.axes
            inverse = None if axes is None else tuple(np.argsort(axes))
            return ((lambda vals, u: np.transpose(vals[a], axes)),
                    (lambda vals, adj, g, i: _acc(adj, a, np.transpose(adj[i], inverse))))
        if isinstance(e, (Hstack, Vstack)):
            return self._stack(e, kids, need, shapes)
        return self._smooth(e, kids, need, shapes)

    def _add(self, kids, need, shapes):
        def fwd(vals, u):
            total = vals[kids[0]]
            for k in kids[1:]:
                total = total + vals[k]
            return total

        active = [(k, s) for k, s, n in zip(kids, shapes, need) if n]

        def bwd(vals, adj, g, i):
            a = adj[i]
            for k, s in active:
                _acc(adj, k, _unbroadcast(a, s))
        return fwd, bwd

    def _matmul(self, e, kids, need, shapes):
        a, b = kids
        sa, sb = shapes
        if not sa or not sb:  # CVXPY multiplies elementwise when one side is a scalar
            return self._multiply(kids, need, shapes)
        if len(sa) > 2 or len(sb) > 2:  # the rules below are for vectors and matrices
            raise Unsupported("a batched (N-D) matrix product")
        na, nb = need
        a2 = (1, sa[0]) if len(sa) == 1 else sa
        b2 = (sb[0], 1) if len(sb) == 1 else sb
        out2 = (a2[0], b2[1])

        shape = e.shape
        if a in self.sparse or b in self.sparse:
            def fwd(vals, u):
                return np.reshape(np.asarray(vals[a] @ vals[b]), shape)
        else:
            def fwd(vals, u):
                return vals[a] @ vals[b]

        if len(sa) == 2 and len(sb) == 1 and not na:  # the common ``A @ x`` (A data, possibly sparse)
            def bwd(vals, adj, g, i):
                _acc(adj, b, np.asarray(vals[a].T @ adj[i]))
        elif len(sa) == 2 and len(sb) == 1 and not nb:  # ``X @ c`` (c data)
            def bwd(vals, adj, g, i):
                _acc(adj, a, np.multiply.outer(adj[i], vals[b]))
        else:
            def bwd(vals, adj, g, i):
                d = np.reshape(adj[i], out2)
                if na:
                    B = vals[b]
                    B = np.reshape(B, b2) if len(sb) == 1 else B
                    dA = np.asarray(d @ B.T) if not sp.issparse(B) else np.asarray((B @ d.T).T)
                    _acc(adj, a, np.reshape(dA, sa))
                if nb:
                    A = vals[a]
                    A = np.reshape(A, a2) if len(sa) == 1 else A
                    _acc(adj, b, np.reshape(np.asarray(A.T @ d), sb))
        return fwd, bwd

    def _multiply(self, kids, need, shapes):
        a, b = kids
        sa, sb = shapes
        na, nb = need

        def fwd(vals, u):
            return vals[a] * vals[b]

        def bwd(vals, adj, g, i):
            d = adj[i]
            if na:
                _acc(adj, a, _unbroadcast(d * vals[b], sa))
            if nb:
                _acc(adj, b, _unbroadcast(d * vals[a], sb))
        return fwd, bwd

    def _sum(self, e, kids, shapes):
        (a,) = kids
        axis, keepdims, back = e.axis, e.keepdims, shapes[0]

        def fwd(vals, u):
            return vals[a].sum(axis=axis, keepdims=keepdims)

        def bwd(vals, adj, g, i):
            d = adj[i]
            if axis is not None and not keepdims:
                d = np.expand_dims(d, axis)
            _acc(adj, a, _expand(d, back))
        return fwd, bwd

    def _index(self, e, kids, shapes):
        return self._picked(kids, e._orig_key, shapes[0], e.shape, repeats=False)

    def _special_index(self, e, kids, shapes):
        return self._picked(kids, e.key, shapes[0], e.shape, repeats=True)

    @staticmethod
    def _picked(kids, key, back, shape, *, repeats: bool):
        """Indexing: the forward pick and its adjoint, a scatter-add (``np.add.at`` when an index may repeat, as
        an integer or boolean array index can; a slice cannot)."""
        (a,) = kids
        picked = np.zeros(back)[key].shape

        def fwd(vals, u):
            return np.reshape(vals[a][key], shape)

        def bwd(vals, adj, g, i):
            z = np.zeros(back)
            if repeats:
                np.add.at(z, key, np.reshape(adj[i], picked))
            else:
                z[key] += np.reshape(adj[i], picked)
            _acc(adj, a, z)
        return fwd, bwd

    def _stack(self, e, kids, need, shapes):
        if any(len(s) == 0 for s in shapes):
            raise Unsupported("a stack of scalars")
        horizontal = isinstance(e, Hstack)
        axis = 0 if (horizontal and len(shapes[0]) == 1) else (1 if horizontal else 0)
        pieces, start = [], 0
        for k, s, n in zip(kids, shapes, need):
            width = 1 if (not horizontal and len(s) == 1) else s[axis]
            if n:
                pieces.append((k, start, start + width, s))
            start += width
        join = np.hstack if horizontal else np.vstack

        def fwd(vals, u):
            return join([vals[k] for k in kids])

        def bwd(vals, adj, g, i):
            d = adj[i]
            for k, lo, hi, s in pieces:
                part = d[lo:hi] if axis == 0 else d[:, lo:hi]
                _acc(adj, k, np.reshape(part, s))
        return fwd, bwd

    def _smooth(self, e, kids, need, shapes):
        """Non-affine atoms: only the first argument may hold variables."""
        if any(need[1:]):
            raise Unsupported(f"{type(e).__name__} with variables beyond its first argument")
        a = kids[0]
        if isinstance(e, quad_over_lin):
            if e.axis is not None:
                raise Unsupported("quad_over_lin along an axis")
            y = kids[1]

            def qfwd(vals, u):
                return np.asarray(np.square(vals[a]).sum() / vals[y])

            def qbwd(vals, adj, g, i):
                yv = float(vals[y])
                if yv <= 0:
                    raise OutsideDomain("quad_over_lin with a non-positive denominator")
                _acc(adj, a, adj[i] * (2.0 / yv) * vals[a])
            return qfwd, qbwd
        if isinstance(e, Power):
            return self._power(e, a)
        if isinstance(e, QuadForm):
            P = kids[1]

            def ffwd(vals, u):
                x = vals[a]
                return np.asarray(x @ (vals[P] @ x))

            def fbwd(vals, adj, g, i):
                Pv = vals[P]
                _acc(adj, a, adj[i] * np.asarray((Pv + Pv.T) @ vals[a]).reshape(vals[a].shape))
            return ffwd, fbwd
        if isinstance(e, logistic):
            return ((lambda vals, u: np.logaddexp(0, vals[a])),
                    (lambda vals, adj, g, i: _acc(adj, a, adj[i] * _expit(vals[a]))))
        if isinstance(e, exp):
            return ((lambda vals, u: np.exp(vals[a])), (lambda vals, adj, g, i: _acc(adj, a, adj[i] * vals[i])))
        if isinstance(e, log_sum_exp):
            if e.axis is not None:
                raise Unsupported("log_sum_exp along an axis")

            def lfwd(vals, u):
                return np.asarray(logsumexp(vals[a]))

            def lbwd(vals, adj, g, i):
                _acc(adj, a, adj[i] * np.exp(vals[a] - vals[i]))
            return lfwd, lbwd
        if isinstance(e, huber):
            M = e.M

            def hfwd(vals, u):
                return 2 * _sp_huber(float(M.value), vals[a])

            def hbwd(vals, adj, g, i):
                x = vals[a]
                _acc(adj, a, adj[i] * 2 * np.multiply(np.sign(x), np.minimum(np.abs(x), float(M.value))))
            return hfwd, hbwd
        raise Unsupported(type(e).__name__)

    def _power(self, e, a):
        def exponent() -> Any:  # as CVXPY reads it (an int or Fraction when constant: is_power2 needs it)
            if e.p_used is not None:
                return e.p_used
            if e.p.value is None:
                raise OutsideDomain("a power with an unset parameter exponent")
            return e.p.value

        def pfwd(vals, u):
            return np.power(vals[a], float(exponent()))

        def pbwd(vals, adj, g, i):
            p = exponent()
            x = vals[a]
            if p == 0:
                return _acc(adj, a, np.zeros(x.shape))
            if not is_power2(p) and np.min(x) <= 0:
                raise OutsideDomain("a power outside its domain")
            _acc(adj, a, adj[i] * (float(p) * np.power(x, float(p) - 1.0)))
        return pfwd, pbwd

    # ---------------------------------------------------------------- running
    def finish(self) -> None:
        """Freeze the tape: the reverse pass visits only the nodes with variables below them, and the forward pass
        computes only the values the reverse rules read (and what those values need)."""
        self.reverse = [(i, b) for i, b in reversed(list(enumerate(self.bwd))) if b is not None]
        needed: set[int] = set()
        for i, _ in self.reverse:
            needed.update(self.reads[i])
        for i in range(len(self.fwd) - 1, -1, -1):
            if i in needed:
                needed.update(self.kids[i])
        self.forward = [(i, f) for i, f in enumerate(self.fwd) if i in needed]
        self.keep.clear()
        self.seen.clear()

    def gradient(self, u: np.ndarray) -> np.ndarray:
        n = len(self.fwd)
        vals: list[Any] = [None] * n
        for i, f in self.forward:
            vals[i] = f(vals, u)
        adj: list[Any] = [None] * n
        adj[-1] = _ONE  # the objective is a scalar
        g = np.zeros(self.layout.size)
        for i, b in self.reverse:
            if adj[i] is not None:
                b(vals, adj, g, i)
        return g


_SAME_DEGREE = (AddExpression, NegExpression, Sum, index, special_index, reshape, Promote, broadcast_to, transpose,
                Hstack, Vstack)


def _degree(e: cp.Expression, d: list[float]) -> float:
    """The polynomial degree of ``e`` in the variables from its arguments' degrees ``d`` (inf: not a polynomial)."""
    inf = float("inf")
    if isinstance(e, _SAME_DEGREE):
        return max(d)
    if isinstance(e, MulExpression):  # and multiply
        return sum(d)
    if isinstance(e, (DivExpression, quad_over_lin, QuadForm)):
        if d[1] != 0:
            return inf
        return d[0] if isinstance(e, DivExpression) else 2 * d[0]
    if isinstance(e, Power):  # a polynomial where the rule holds everywhere: p = 0 or an (int) power of two
        p = e.p_used
        return d[0] * float(p) if p is not None and (p == 0 or is_power2(p)) else inf
    return 0.0 if max(d) == 0 else inf


_ONE = np.ones(())
_ONE.flags.writeable = False  # adjoints are never written in place

_READS_NOTHING = (AddExpression, NegExpression, Sum, index, special_index, reshape, Promote, broadcast_to, transpose,
                  Hstack, Vstack)


def _reads(e: cp.Expression, kids: tuple[int, ...], need: list[bool], slot: int) -> tuple[int, ...]:
    """The values the reverse rule of ``e`` (in ``slot``) reads."""
    if isinstance(e, _READS_NOTHING):
        return ()
    if isinstance(e, DivExpression):
        return (kids[1],)
    if isinstance(e, MulExpression):  # and multiply: each operand's adjoint reads the other operand
        return tuple(k for k, n in ((kids[1], need[0]), (kids[0], need[1])) if n)
    if isinstance(e, log_sum_exp):
        return (kids[0], slot)
    if isinstance(e, exp):
        return (slot,)
    return kids  # quad_over_lin, power, quad_form, huber: the arguments


def _acc(adj: list, k: int, value: np.ndarray) -> None:
    adj[k] = value if adj[k] is None else adj[k] + value


class CompiledGradient:
    """The numpy gradient of one objective over one layout; call it with the flat local vector ``u``.

    ``kind`` is ``"quadratic"`` (affine gradient ``H u + c``, rebuilt from the tape when the parameters'
    values change and then stay) or ``"tape"`` (the reverse-mode pass every call).
    """

    def __init__(self, tape: _Tape, parameters: list[cp.Parameter], quadratic: bool) -> None:
        self.tape = tape
        self.parameters = parameters
        self.kind = "quadratic" if quadratic else "tape"
        self._key: tuple[bytes, ...] | None = None
        self._affine: tuple[np.ndarray, np.ndarray] | None = None

    def _params_key(self) -> tuple[bytes, ...]:
        return tuple(_param_value(p).tobytes() for p in self.parameters)

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        if self.kind == "tape":
            return self.tape.gradient(u)
        key = self._params_key()
        if key != self._key:  # new data: one pass now, and H, c on the next call with the same data
            self._key, self._affine = key, None
            return self.tape.gradient(u)
        if self._affine is None:
            n = self.tape.layout.size
            c = self.tape.gradient(np.zeros(n))
            H = np.empty((n, n))
            e = np.zeros(n)
            for j in range(n):
                e[j] = 1.0
                H[:, j] = self.tape.gradient(e) - c
                e[j] = 0.0
            self._affine = (H, c)
        H, c = self._affine
        return H @ u + c


def compile_gradient(objective: cp.Expression, layout: Any, *, name: str = "") -> CompiledGradient | None:
    """Compile the numpy gradient of ``objective`` over ``layout`` once (see the module docstring).

    Returns None (and logs the reason at debug level, once: the agent then keeps CVXPY's ``Expression.grad``) when
    an atom is not supported.
    """
    tape = _Tape(layout)
    try:
        top = tape.add(objective)
    except Unsupported as exc:
        log.debug("Agent %r: no compiled gradient (%s); CVXPY's Expression.grad is used instead.", name, exc)
        return None
    except Exception as exc:  # an expression the compiler cannot read: CVXPY's gradient (the safe side)
        log.debug("Agent %r: no compiled gradient (%s: %s); CVXPY's Expression.grad is used instead.",
                  name, type(exc).__name__, exc)
        return None
    if top != len(tape.fwd) - 1 or tape.bwd[top] is None:
        log.debug("Agent %r: the objective is constant; CVXPY's Expression.grad is used instead.", name)
        return None
    tape.finish()
    parameters = list(objective.parameters())
    data = sum(p.size for p in parameters)
    quadratic = (layout.size <= QUADRATIC_MAX_SIZE and data <= QUADRATIC_MAX_DATA
                 and tape.degree[top] <= 2)
    return CompiledGradient(tape, parameters, quadratic)
