"""Error classes, one per kind of mistake, all deriving from :class:`CvxdpError`, and the functions that raise the
uniform, scikit-learn style message ``The 'NAME' parameter of OWNER must be EXPECTED. Got VALUE instead.``"""

from __future__ import annotations

import difflib
import errno
import math
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


def describe_oserror(exc: OSError) -> str:
    """A short reason for ``exc``: the OS message and, when known, the errno name (``ENOSPC``)."""
    name = errno.errorcode.get(exc.errno or -1)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason
