"""Schedules for the penalty rho^t and the proximal weight eta^t (SPEC §2).

Every schedule is non-decreasing and bounded; ``value(t)`` is its value in round ``t`` (t = 1, 2, ...).
:class:`ResidualBalancing` (rho only) adapts to the residuals of the previous round (Boyd et al. §3.4.1);
it reads only communicated, already randomized values and so costs no privacy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ._validation import check_float, check_int, fail


@dataclass(frozen=True)
class Constant:
    """``value`` in every round."""

    value: float

    def __post_init__(self) -> None:
        check_float(self.value, "value", "Constant", 0.0, math.inf)

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        return float(self.value)


@dataclass(frozen=True)
class LinearCapped:
    """``min(start + step*(t-1), cap)``."""

    start: float
    step: float
    cap: float

    def __post_init__(self) -> None:
        check_float(self.start, "start", "LinearCapped", 0.0, math.inf)
        check_float(self.step, "step", "LinearCapped", 0.0, math.inf, closed="left")
        check_float(self.cap, "cap", "LinearCapped", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        return float(min(self.start + self.step * (t - 1), self.cap))


@dataclass(frozen=True)
class GeometricCapped:
    """``min(start * factor**(t-1), cap)`` with ``factor >= 1``."""

    start: float
    factor: float
    cap: float

    def __post_init__(self) -> None:
        check_float(self.start, "start", "GeometricCapped", 0.0, math.inf)
        check_float(self.factor, "factor", "GeometricCapped", 1.0, math.inf, closed="left")
        check_float(self.cap, "cap", "GeometricCapped", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        return float(min(self.start * self.factor ** (t - 1), self.cap))


@dataclass(frozen=True)
class StepSchedule:
    """The authors' schedule ``c1 * 1.2**floor(t / period) + c2 / epsilon``, capped at ``cap``.

    With ``epsilon=None`` the run's epsilon is used (``cvxdp.solve`` fills it in from the mechanism).
    """

    c1: float
    c2: float
    period: int
    epsilon: float | None = None
    cap: float = math.inf

    def __post_init__(self) -> None:
        check_float(self.c1, "c1", "StepSchedule", 0.0, math.inf)
        check_float(self.c2, "c2", "StepSchedule", 0.0, math.inf, closed="left")
        check_int(self.period, "period", "StepSchedule", 1)
        if self.epsilon is not None:
            check_float(self.epsilon, "epsilon", "StepSchedule", 0.0, math.inf, closed="right")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        if self.epsilon is None:
            raise ValueError("StepSchedule(epsilon=None) is only usable inside cvxdp.solve, which supplies epsilon.")
        return float(min(self.c1 * 1.2 ** math.floor(t / self.period) + self.c2 / self.epsilon, self.cap))


@dataclass(frozen=True)
class ResidualBalancing:
    """Boyd et al. §3.4.1 for rho, made non-decreasing: multiply by ``tau`` when ``primal > mu*dual``.

    Starts at ``start``; never exceeds ``cap`` (bounded, as the convergence analysis needs).
    """

    start: float
    mu: float = 10.0
    tau: float = 2.0
    cap: float = 1e4

    def __post_init__(self) -> None:
        check_float(self.start, "start", "ResidualBalancing", 0.0, math.inf)
        check_float(self.mu, "mu", "ResidualBalancing", 1.0, math.inf)
        check_float(self.tau, "tau", "ResidualBalancing", 1.0, math.inf)
        check_float(self.cap, "cap", "ResidualBalancing", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        if previous is None:
            return float(self.start)
        if primal > self.mu * dual:
            return float(min(previous * self.tau, self.cap))
        return float(previous)


Schedule = Constant | LinearCapped | GeometricCapped | StepSchedule | ResidualBalancing
_KINDS = {"constant": Constant, "linear": LinearCapped, "geometric": GeometricCapped, "step": StepSchedule,
          "residual_balancing": ResidualBalancing}


def as_schedule(value: object, name: str, owner: str) -> Schedule:
    """Accept a positive float (constant), a schedule object, or a dict ``{"kind": ..., **params}``."""
    if isinstance(value, (Constant, LinearCapped, GeometricCapped, StepSchedule, ResidualBalancing)):
        if isinstance(value, ResidualBalancing) and name != "rho":
            raise fail(name, owner, "a positive float or a non-adaptive schedule", value)
        return value
    if isinstance(value, dict):
        params = dict(value)
        kind = params.pop("kind", None)
        if kind not in _KINDS:
            raise fail(name, owner, "a schedule table with kind in " + ", ".join(map(repr, _KINDS)), value)
        return as_schedule(_KINDS[kind](**params), name, owner)
    return Constant(check_float(value, name, owner, 0.0, math.inf))


def describe(schedule: Schedule) -> dict:
    """JSON-able description, the inverse of :func:`as_schedule` on dicts."""
    kind = next(k for k, cls in _KINDS.items() if isinstance(schedule, cls))
    return {"kind": kind, **asdict(schedule)}
