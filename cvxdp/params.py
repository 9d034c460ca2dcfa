"""Uniform, scikit-learn style validation messages.

Every check raises :class:`~cvxdp.errors.InvalidParameterError` with the message
``The 'NAME' parameter of OWNER must be EXPECTED. Got VALUE instead.``
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real

from .errors import InvalidParameterError


def fail(name: str, owner: str, expected: str, got: object) -> InvalidParameterError:
    """Build the uniform error for parameter ``name`` of ``owner``."""
    return InvalidParameterError(f"The {name!r} parameter of {owner} must be {expected}. Got {got!r} instead.")


def _interval(low: float, high: float, closed: str) -> str:
    left = "[" if closed in ("left", "both") else "("
    right = "]" if closed in ("right", "both") else ")"
    lo = "-inf" if math.isinf(low) else f"{low:g}"
    hi = "inf" if math.isinf(high) else f"{high:g}"
    return f"{left}{lo}, {hi}{right}"


def check_float(value: object, name: str, owner: str, low: float = -math.inf, high: float = math.inf,
                closed: str = "neither") -> float:
    """Return ``value`` as a float if it is a real number inside the interval, else raise."""
    expected = f"a float in {_interval(low, high, closed)}"
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


def check_choice(value: object, name: str, owner: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` (strings, compared case-sensitively)."""
    choices = list(choices)
    if value not in choices:
        expected = "one of " + ", ".join(repr(c) for c in choices)
        raise fail(name, owner, expected, value)
    return str(value)


def deprecated_alias(value: object, old_value: object, name: str, old: str, owner: str) -> object:
    """``value``, or ``old_value`` (with a :class:`FutureWarning`) when the caller used the old keyword ``old``.

    Giving both (with different values) is an error naming both keywords.
    """
    if old_value is None:
        return value
    import warnings

    warnings.warn(f"The {old!r} parameter of {owner} is deprecated; use {name}={old_value!r} instead "
                  f"({old!r} also names the stopping guard solve(budget=(eps, delta))).", FutureWarning,
                  stacklevel=3)
    return old_value
