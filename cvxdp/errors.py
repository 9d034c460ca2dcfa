"""Error classes, one per kind of mistake, all deriving from :class:`CvxdpError`, and the functions that raise the
uniform, scikit-learn style message ``The 'NAME' parameter of OWNER must be EXPECTED. Got VALUE instead.``, the
message for a missing sensitivity (:func:`missing_sensitivity`) and the advice for an objective CVXPY cannot prove
convex (:func:`convexity_advice`; it reads CVXPY expressions without importing CVXPY, by their classes' names)."""

from __future__ import annotations

import difflib
import errno
import math
import textwrap
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any


class CvxdpError(Exception):
    """Base class of every error cvxdp raises on purpose."""


class InvalidParameterError(CvxdpError, ValueError):
    """A parameter of a cvxdp object or function has a bad type or value."""


class DeclarationError(CvxdpError, ValueError):
    """An agent's CVXPY declaration cannot be used (non-convex, bad shared block, bad data, ...)."""


class InfeasibleAgentError(DeclarationError):
    """An agent's local feasible set is empty."""


class PartyRefusedError(CvxdpError, RuntimeError):
    """A party refused a request of the coordinator: releasing it would take the party past its own privacy budget,
    or it asks for something the party's own policy does not allow (less noise, another mechanism, a parameter out of
    the party's bounds, a replayed or out-of-order round, another coordinator's run). ``party`` and ``round`` name
    it, ``reason`` says which rule refused it (``"budget"``, ``"plan"``, ``"policy"``, ``"limits"``, ``"replay"``,
    ``"order"``, ``"owner"``, ``"message"``...) and ``field`` names the message's field, if one is at fault."""

    def __init__(self, message: str, *, party: str | None = None, round: int | None = None,
                 reason: str = "budget", field: str | None = None) -> None:
        super().__init__(message)
        self.party = party
        self.round = round
        self.reason = reason
        self.field = field

    def __reduce__(self):  # travels between processes with its attributes
        return (_refused, (str(self), self.party, self.round, self.reason, self.field))

    def to_dict(self) -> dict[str, Any]:
        """Plain values (what crosses the wire)."""
        return {"message": str(self), "party": self.party, "round": self.round, "reason": self.reason,
                "field": self.field}


def _refused(message: str, party: str | None, round: int | None, reason: str,
             field: str | None = None) -> PartyRefusedError:
    return PartyRefusedError(message, party=party, round=round, reason=reason, field=field)


class SolverFailedError(CvxdpError, RuntimeError):
    """Every solver of the fallback chain failed on a local subproblem."""

    def __init__(self, message: str, *, agent: str | None = None, round: int | None = None,
                 status: str | None = None):
        super().__init__(message)
        self.agent = agent
        self.round = round
        self.status = status


class BackendError(CvxdpError, RuntimeError):
    """A backend lost nodes (e.g. a Ray actor died): names the agents, the method and the round."""

    def __init__(self, message: str, *, agents: tuple[str, ...] = (), method: str | None = None,
                 round: int | None = None):
        super().__init__(message)
        self.agents = tuple(agents)
        self.method = method
        self.round = round


class ConfigError(CvxdpError, ValueError):
    """A case or study file is malformed or names something unknown."""


class OptionalDependencyError(CvxdpError, ImportError):
    """An optional extra (e.g. ray, pandapower) is needed but not installed."""


class CorruptFileError(CvxdpError, ValueError):
    """A checkpoint or saved result is truncated, garbage, empty or written by something else."""


class OutputError(CvxdpError, OSError):
    """An output directory cannot be written (disk full, read-only, a path under a file, ...)."""


class OutputLockedError(OutputError):
    """Another live cvxdp process is writing the same output directory."""


class SolverFallbackWarning(UserWarning):
    """A centralized solve moved on to the next solver of its fallback chain."""


class PrivacyWarning(UserWarning):
    """A privacy claim is not a guarantee (a paper preset, a failed assumption) or is conditional."""


class SlowGradientWarning(UserWarning):
    """A run spent more time evaluating an agent's gradient than in its local solves (``agent`` names it)."""

    def __init__(self, message: str, *, agent: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent


class StepSizeWarning(UserWarning):
    """A step size (eta, rho) looks wrong for the problem: the run diverges or stagnates, or eta is below an
    agent's gradient Lipschitz constant, or the run has not settled (agreeing copies, a moving consensus
    point). ``agent`` names the agent (None: the whole run); ``suggestion`` is the
    suggested setting, e.g. ``{"eta": 60.0}``."""

    def __init__(self, message: str, *, agent: str | None = None, suggestion: dict | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.suggestion = dict(suggestion or {})


# --------------------------------------------------------------------------- uniform messages
def fail(name: str, owner: str, expected: str, got: object) -> InvalidParameterError:
    """Build the uniform error for parameter ``name`` of ``owner``."""
    return InvalidParameterError(f"The {name!r} parameter of {owner} must be {expected}. Got {got!r} instead.")


def interval(low: float, high: float, closed: str) -> str:
    left = "[" if closed in ("left", "both") else "("
    right = "]" if closed in ("right", "both") else ")"
    lo = "-inf" if math.isinf(low) else f"{low:g}"
    hi = "inf" if math.isinf(high) else f"{high:g}"
    return f"{left}{lo}, {hi}{right}"


def check_float(value: object, name: str, owner: str, low: float = -math.inf, high: float = math.inf,
                closed: str = "neither") -> float:
    """Return ``value`` as a float if it is a real number inside the interval, else raise."""
    expected = f"a float in {interval(low, high, closed)}"
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(float(value)):
        raise fail(name, owner, expected, value)
    v = float(value)
    lo_ok = v >= low if closed in ("left", "both") else v > low
    hi_ok = v <= high if closed in ("right", "both") else v < high
    if not (lo_ok and hi_ok):
        raise fail(name, owner, expected, value)
    return v


def check_int(value: object, name: str, owner: str, low: int = 1, high: float = math.inf) -> int:
    """Return ``value`` as an int if it is an integer in [low, high], else raise."""
    hi = "inf" if math.isinf(high) else str(int(high))
    expected = f"an int in [{low}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, Integral) or not (low <= value <= high):
        raise fail(name, owner, expected, value)
    return int(value)


def check_budget(budget: object, owner: str, *, optional: bool = False) -> tuple[float, float] | None:
    """``budget`` as ``(epsilon, delta)``: epsilon in (0, inf), delta in [0, 1); else the error naming ``owner``.
    ``optional``: None is a budget too (no budget), returned as None."""
    if optional and budget is None:
        return None
    if not (isinstance(budget, (tuple, list)) and len(budget) == 2):
        raise fail("budget", owner, ("None or " if optional else "") + "a pair (epsilon, delta)", budget)
    return (check_float(budget[0], "budget epsilon", owner, 0.0, math.inf),
            check_float(budget[1], "budget delta", owner, 0.0, 1.0, "left"))


def check_choice(value: object, name: str, owner: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` (strings, compared case-sensitively)."""
    choices = tuple(choices)
    if value not in choices:
        raise fail(name, owner, "one of " + ", ".join(repr(c) for c in choices) + did_you_mean(value, choices), value)
    return str(value)


def did_you_mean(value: object, options: Iterable[object]) -> str:
    """`` (did you mean 'laplace'?)`` for a string close to one of ``options``, else ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [o for o in options if isinstance(o, str)], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def missing_sensitivity(agent: str, needed: str, field: str, sensitivity: object, *, size: int | None = None,
                        alternative: str = "") -> DeclarationError:
    """The error of an agent whose declared sensitivity lacks ``field`` (``"l1"``, ``"l2"`` or ``"alpha"``), which
    ``needed`` (e.g. ``"ObjG"``) calibrates its noise to, with what to do about it.

    Parameters
    ----------
    agent : str
        The agent's name.
    needed : str
        What needs the field, e.g. ``"ObjG"`` or ``"a private run with gaussian noise"``.
    field : str
        The missing field of :class:`cvxdp.Sensitivity`.
    sensitivity : cvxdp.Sensitivity or None
        What the agent declares (read: ``l1``, ``l2``, ``alpha``, ``relation``).
    size : int, optional
        The agent's number of variables (for the l1 bound implied by a declared l2).
    alternative : str, optional
        The mechanism that uses the norm the agent does declare, e.g. ``"ObjL (cvxdp.ObjectivePerturbation(\"laplace\",
        ...))"``.

    Notes
    -----
    The model's ``relation`` is quoted as the reason only when the agent declares no bound at all (a template that
    refuses every private run says why there); an agent that declares the other norm is told how to get this one
    from it (``||v||_2 <= ||v||_1 <= sqrt(n) ||v||_2``) or to switch noise.
    """
    head = f"Agent {agent!r}: {needed} needs sensitivity=cvxdp.Sensitivity({field}=...)"
    if sensitivity is None:
        return DeclarationError(f"{head}: the agent declares no sensitivity. State its neighbouring relation and the "
                                "bound on its gradient's change (docs/own-agent.md).")
    l1, l2 = getattr(sensitivity, "l1", None), getattr(sensitivity, "l2", None)
    switch = f"; or use {alternative}" if alternative else ""
    if field == "l2" and l1 is not None:
        return DeclarationError(
            f"{head}: the agent declares l1 = {l1:g} only (the bound Laplace noise uses). Declare l2 as well: "
            f"||v||_2 <= ||v||_1, so l2 = {l1:g} is a valid (if loose) bound (a tighter one means less "
            f"noise){switch}.")
    if field == "l1" and l2 is not None:
        implied = (f"l1 = sqrt({size}) x {l2:g} = {math.sqrt(size) * l2:.4g} is a valid (if loose) bound for its "
                   f"{size} variables" if size else "l1 = sqrt(n) x l2 is a valid (if loose) bound, n its number of "
                   "variables")
        return DeclarationError(
            f"{head}: the agent declares l2 = {l2:g} only (the bound Gaussian noise uses). Declare l1 as well: "
            f"||v||_1 <= sqrt(n) ||v||_2, so {implied}{switch}.")
    if field == "alpha":
        return DeclarationError(f"{head}: the paper preset calibrates to the adjacency size alpha, which the agent "
                                "does not declare. Declare it, or use the default sensitivity=\"exact\" (the "
                                "declared l1/l2).")
    relation = getattr(sensitivity, "relation", None)
    if l1 is None and l2 is None and relation and relation != "unspecified":
        return DeclarationError(f"{head}. The model declares no bound and says why: {relation}.")
    return DeclarationError(f"{head}: the agent declares no {field} bound for its relation "
                            f"({relation or 'unspecified'}); see docs/own-agent.md.")


def describe_oserror(exc: OSError) -> str:
    """A short reason for ``exc``: the OS message and, when known, the errno name (``ENOSPC``)."""
    name = errno.errorcode.get(exc.errno or -1)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


# --------------------------------------------------------------------------- why an objective is not convex
#: the DCP rules, for a reader who wants them all
DCP_RULES = "https://www.cvxpy.org/tutorial/dcp/"
#: longest expression shown in a message
_SHOWN = 60


def _is(e: Any, *names: str) -> bool:
    """Whether the CVXPY expression ``e`` is of one of the classes ``names`` (or a subclass: ``PowerApprox`` is a
    ``Power``)."""
    return any(c.__name__ in names for c in type(e).__mro__)


def _power(e: Any) -> float | None:
    """The exponent of a CVXPY ``power`` atom (``sqrt`` is 0.5, ``square`` 2), else None."""
    return float(e.p.value) if _is(e, "Power") else None


def _is_one(e: Any) -> bool:
    return _is(e, "Constant") and e.size == 1 and float(e.value) == 1.0


def show_expression(expr: Any) -> str:
    """A CVXPY expression written as a user writes it (``sqrt(sum_squares(w))``, not CVXPY's internal
    ``PowerApprox(quad_over_lin(w, 1.0, None, False), 0.5)``), shortened past 60 characters."""
    text = _show(expr)
    return text if len(text) <= _SHOWN else textwrap.shorten(text, _SHOWN, placeholder="...")


def _show(e: Any) -> str:
    if _is(e, "Constant"):
        return f"{float(e.value):g}" if e.size == 1 else f"[{'x'.join(map(str, e.shape))} constant]"
    if _is(e, "Leaf"):  # a Variable or Parameter: its name
        return e.name()
    if _is(e, "Promote"):  # a scalar broadcast to a shape
        return _show(e.args[0])
    args = [_show(a) for a in e.args]
    p = _power(e)
    if p is not None:
        return {0.5: f"sqrt({args[0]})", 2.0: f"square({args[0]})"}.get(p, f"power({args[0]}, {p:g})")
    if _is(e, "quad_over_lin") and _is_one(e.args[1]):
        return f"sum_squares({args[0]})"
    if _is(e, "Sum"):
        return f"sum({args[0]})"
    if _is(e, "NegExpression"):
        return f"-{_wrap(e.args[0], args[0])}"
    if _is(e, "AddExpression"):
        return " + ".join(args).replace("+ -", "- ")
    if _is(e, "MulExpression", "multiply", "DivExpression"):
        op = "/" if _is(e, "DivExpression") else "*" if _is(e, "multiply") or 0 in (e.args[0].ndim, e.args[1].ndim) \
            else "@"
        return f" {op} ".join(_wrap(a, t) for a, t in zip(e.args, args))
    return f"{type(e).__name__}({', '.join(args)})"


def _wrap(e: Any, text: str) -> str:
    return f"({text})" if _is(e, "AddExpression") else text


def _culprit(e: Any) -> Any:
    """The innermost part of ``e`` that is not DCP while all its arguments are (``e`` itself when it is DCP)."""
    for arg in e.args:
        if not arg.is_dcp():
            return _culprit(arg)
    return e


def _products_of_variables(e: Any) -> bool:
    return _is(e, "MulExpression", "multiply") and not any(a.is_constant() for a in e.args)


def _dcp_form(e: Any) -> str | None:
    """The DCP form of a known non-DCP slip ``e`` (its arguments DCP), else None."""
    arg = e.args[0] if e.args else None
    if _power(e) == 0.5:
        if _is(arg, "quad_over_lin") and _is_one(arg.args[1]):
            return f"cp.norm({show_expression(arg.args[0])})"
        if _is(arg, "Sum") and _power(arg.args[0]) == 2.0:
            return f"cp.norm({show_expression(arg.args[0].args[0])})"
        if _power(arg) == 2.0:
            return f"cp.abs({show_expression(arg.args[0])})"
        if _is(arg, "QuadForm"):
            return f"cp.norm(L.T @ {show_expression(arg.args[0])}) with L = np.linalg.cholesky(P) of the matrix P"
    if _is(e, "log") and _is(arg, "Sum") and _is(arg.args[0], "exp"):
        return f"cp.log_sum_exp({show_expression(arg.args[0].args[0])})"
    if _products_of_variables(e):
        left, right = e.args
        if left is right or str(left) == str(right):
            if _is(e, "MulExpression") and left.ndim == 1:
                return f"cp.sum_squares({show_expression(left)})"
            return f"cp.square({show_expression(left)})"
        return None
    if _is(e, "DivExpression") and not e.args[1].is_constant():
        num, den = e.args
        if num.is_constant():
            return f"cp.inv_pos({show_expression(den)})" if _is_one(num) else \
                f"{show_expression(num)} * cp.inv_pos({show_expression(den)})"
        if _power(num) == 2.0:
            return f"cp.quad_over_lin({show_expression(num.args[0])}, {show_expression(den)})"
    return None


def convexity_advice(expr: Any) -> str:
    """What keeps CVXPY from proving the expression ``expr`` (to be minimised) convex and, where one is known, the
    DCP form to write instead.

    Parameters
    ----------
    expr : cvxpy.Expression
        A scalar expression to be minimised that is not convex under CVXPY's DCP rules.

    Returns
    -------
    str
        One or two sentences, e.g. ``"sqrt(sum_squares(w)) breaks the DCP rules: write cp.norm(w), its DCP
        form."`` or ``"the term sqrt(y) is concave, and a minimised objective needs convex terms (-sqrt(y) is
        convex: did you mean to subtract it?)."``
    """
    culprit = _culprit(expr)
    if not culprit.is_dcp():
        form = _dcp_form(culprit)
        if form is not None:
            return f"{show_expression(culprit)} breaks the DCP rules: write {form}, its DCP form."
        if _products_of_variables(culprit):
            return (f"{show_expression(culprit)} multiplies two expressions that both hold variables, which is not "
                    "convex (CVXPY multiplies by constants and Parameters only); fix one factor as a cp.Parameter, "
                    "or rewrite the product.")
    # a DCP part that is concave where the sum needs convex terms
    terms = list(culprit.args) if _is(culprit, "AddExpression") else [culprit]
    concave = [t for t in terms if t.is_concave() and not t.is_affine()]
    if concave:
        term = concave[0]
        negative = _is(term, "NegExpression")
        negated = show_expression(term.args[0]) if negative else f"-{_wrap(term, show_expression(term))}"
        what = "the objective" if term is expr else f"the term {show_expression(term)}"
        return (f"{what} is concave, and a minimised objective needs convex terms ({negated} is convex: did you "
                f"mean to {'add' if negative else 'subtract'} it?).")
    return (f"CVXPY cannot prove {show_expression(culprit)} convex: it composes functions against the DCP rules "
            f"({DCP_RULES}).")
