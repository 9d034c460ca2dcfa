"""Why CVXPY cannot prove an expression convex, and the usual slips' DCP forms.

:func:`convexity_advice` finds the smallest part of an expression that breaks CVXPY's DCP rules (or the concave
terms of a sum to be minimised) and, for the common slips, names the DCP form that means the same thing:
``sqrt(sum_squares(x))`` is ``cp.norm(x)``, ``log(sum(exp(x)))`` is ``cp.log_sum_exp(x)``, ``x @ x`` is
``cp.sum_squares(x)``, ``1 / x`` is ``cp.inv_pos(x)``. The agents' checks (:meth:`cvxdp.Agent.check`,
:meth:`cvxdp.VerticalParty.check`) append it to their "not convex" errors.
"""

from __future__ import annotations

import cvxpy as cp
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.promote import Promote
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.unary_operators import NegExpression
from cvxpy.atoms.elementwise.exp import exp
from cvxpy.atoms.elementwise.log import log
from cvxpy.atoms.elementwise.power import Power
from cvxpy.atoms.quad_form import QuadForm
from cvxpy.atoms.quad_over_lin import quad_over_lin
from cvxpy.expressions.constants.constant import Constant
from cvxpy.expressions.leaf import Leaf

__all__ = ["convexity_advice", "show"]

#: the DCP rules, for a reader who wants them all
DCP_RULES = "https://www.cvxpy.org/tutorial/dcp/"
#: longest expression shown in a message
_SHOWN = 60


def show(expr: cp.Expression) -> str:
    """``expr`` written as a user writes it (``sqrt(sum_squares(w))``, not CVXPY's internal
    ``PowerApprox(quad_over_lin(w, 1.0, None, False), 0.5)``), shortened past 60 characters."""
    text = _show(expr)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _show(e: cp.Expression) -> str:
    if isinstance(e, Constant):
        return f"{float(e.value):g}" if e.size == 1 else f"[{'x'.join(map(str, e.shape))} constant]"
    if isinstance(e, Leaf):  # a Variable or Parameter: its name
        return e.name()
    if isinstance(e, Promote):  # a scalar broadcast to a shape
        return _show(e.args[0])
    args = [_show(a) for a in e.args]
    if isinstance(e, Power):
        p = float(e.p.value)
        return {0.5: f"sqrt({args[0]})", 2.0: f"square({args[0]})"}.get(p, f"power({args[0]}, {p:g})")
    if isinstance(e, quad_over_lin) and _is_one(e.args[1]):
        return f"sum_squares({args[0]})"
    if isinstance(e, Sum):
        return f"sum({args[0]})"
    if isinstance(e, NegExpression):
        return f"-{_wrap(e.args[0], args[0])}"
    if isinstance(e, AddExpression):
        return " + ".join(args).replace("+ -", "- ")
    if isinstance(e, (MulExpression, multiply, DivExpression)):
        op = {MulExpression: "@", multiply: "*", DivExpression: "/"}[type(e)]
        if isinstance(e, MulExpression) and (e.args[0].ndim == 0 or e.args[1].ndim == 0):
            op = "*"
        return f" {op} ".join(_wrap(a, s) for a, s in zip(e.args, args))
    return f"{type(e).__name__}({', '.join(args)})"


def _wrap(e: cp.Expression, text: str) -> str:
    return f"({text})" if isinstance(e, AddExpression) else text


def _is_one(e: cp.Expression) -> bool:
    return isinstance(e, Constant) and e.size == 1 and float(e.value) == 1.0


def _culprit(e: cp.Expression) -> cp.Expression:
    """The innermost part of ``e`` that is not DCP while all its arguments are (``e`` itself when it is DCP)."""
    for arg in e.args:
        if not arg.is_dcp():
            return _culprit(arg)
    return e


def _is_variable(e: cp.Expression) -> bool:
    return not e.is_constant()


def _dcp_form(e: cp.Expression) -> str | None:
    """The DCP form of a known non-DCP slip ``e`` (its arguments DCP), else None."""
    arg = e.args[0] if e.args else None
    if isinstance(e, Power) and float(e.p.value) == 0.5:
        if isinstance(arg, quad_over_lin) and _is_one(arg.args[1]):
            return f"cp.norm({show(arg.args[0])})"
        if isinstance(arg, Sum) and isinstance(arg.args[0], Power) and float(arg.args[0].p.value) == 2.0:
            return f"cp.norm({show(arg.args[0].args[0])})"
        if isinstance(arg, Power) and float(arg.p.value) == 2.0:
            return f"cp.abs({show(arg.args[0])})"
        if isinstance(arg, QuadForm):
            return f"cp.norm(L.T @ {show(arg.args[0])}) with L = np.linalg.cholesky(P) of the matrix P"
    if isinstance(e, log) and isinstance(arg, Sum) and isinstance(arg.args[0], exp):
        return f"cp.log_sum_exp({show(arg.args[0].args[0])})"
    if isinstance(e, (MulExpression, multiply)) and all(_is_variable(a) for a in e.args):
        left, right = e.args
        if left is right or str(left) == str(right):
            if isinstance(e, MulExpression) and left.ndim == 1:
                return f"cp.sum_squares({show(left)})"
            return f"cp.square({show(left)})"
        return None
    if isinstance(e, DivExpression) and _is_variable(e.args[1]):
        num, den = e.args
        if num.is_constant():
            return f"cp.inv_pos({show(den)})" if _is_one(num) else f"{show(num)} * cp.inv_pos({show(den)})"
        if isinstance(num, Power) and float(num.p.value) == 2.0:
            return f"cp.quad_over_lin({show(num.args[0])}, {show(den)})"
    return None


def _terms(e: cp.Expression) -> list[cp.Expression]:
    return list(e.args) if isinstance(e, AddExpression) else [e]


def convexity_advice(expr: cp.Expression) -> str:
    """What keeps CVXPY from proving ``expr`` convex and, where one is known, the DCP form to write instead.

    Parameters
    ----------
    expr : cvxpy.Expression
        A scalar expression to be minimised that is not convex under DCP rules.

    Returns
    -------
    str
        One or two sentences, e.g. ``"sqrt(sum_squares(w)) breaks the DCP rules: write cp.norm(w), its DCP
        form."`` or ``"the term sqrt(y) is concave; a minimised objective needs convex terms
        (-sqrt(y) is convex: did you mean to subtract it?)."``
    """
    culprit = _culprit(expr)
    if not culprit.is_dcp():
        form = _dcp_form(culprit)
        if form is not None:
            return f"{show(culprit)} breaks the DCP rules: write {form}, its DCP form."
        if isinstance(culprit, (MulExpression, multiply)) and all(_is_variable(a) for a in culprit.args):
            return (f"{show(culprit)} multiplies two expressions that both hold variables, which is not convex "
                    "(CVXPY multiplies by constants and Parameters only); fix one factor as a cp.Parameter, or "
                    "rewrite the product.")
    # a DCP part that is concave where the sum needs convex terms
    concave = [t for t in _terms(culprit) if t.is_concave() and not t.is_affine()]
    if concave:
        term = concave[0]
        negative = isinstance(term, NegExpression)
        negated = show(term.args[0]) if negative else f"-{_wrap(term, show(term))}"
        what = "the objective" if term is expr else f"the term {show(term)}"
        return (f"{what} is concave, and a minimised objective needs convex terms ({negated} is convex: did you "
                f"mean to {'add' if negative else 'subtract'} it?).")
    return (f"CVXPY cannot prove {show(culprit)} convex: it composes functions against the DCP rules "
            f"({DCP_RULES}).")
