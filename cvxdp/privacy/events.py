"""Privacy events: the ``dp_accounting`` events cvxdp records, their checks, JSON form and grouping (SPEC §2.2).

An *item* of a ledger or an accountant is a :class:`~cvxdp.privacy.noise.NoisePlan` (which carries its per-step
(epsilon, delta) claim), a ``dp_accounting`` ``LaplaceDpEvent``/``GaussianDpEvent`` (a Laplace event also implies its
pure claim), a :class:`PureEpsilonDpEvent` (a pure epsilon-DP step with no dp-accounting event of its own, e.g. one
Gamma-norm iteration, SPEC §3-§4), a ``NoOpDpEvent`` (a step that touches no data), a ``PoissonSampledDpEvent`` of a
Laplace or Gaussian event, or, for basic composition only, a per-step claim ``(epsilon, delta)``. Identical events are
grouped (:func:`group_events`) so that :mod:`cvxdp.privacy.composition` composes each group once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dp_accounting

from ..errors import InvalidParameterError, check_choice, check_float, check_int, fail
from .noise import NoisePlan

Event = dp_accounting.DpEvent
Claim = tuple[float, float]
Grouped = tuple[tuple[Event, int], ...]

# --------------------------------------------------------------------------- events
@dataclass(frozen=True)
class PureEpsilonDpEvent(dp_accounting.DpEvent):
    """A pure ``epsilon``-DP step for which dp-accounting has no event (e.g. one Gamma-norm iteration).

    The step's neighbouring relation and sensitivity are those of the mechanism that records it (the
    Gamma-norm steps: replace one sample of one node's data, :mod:`cvxdp.families.graph.mechanism`). The accountants of
    this module treat it as binary randomized response with the same epsilon, its worst case.
    """

    epsilon: float


EVENT_TYPES = (dp_accounting.LaplaceDpEvent, dp_accounting.GaussianDpEvent, PureEpsilonDpEvent,
               dp_accounting.NoOpDpEvent)


def sampled_event(event: Event, sampling_rate: float | None) -> Event:
    """``event`` under Poisson subsampling at rate ``sampling_rate`` (each record in independently with that
    probability): ``PoissonSampledDpEvent(q, event)``; ``event`` itself when the rate is None or 1."""
    if sampling_rate is None or float(sampling_rate) == 1.0:
        return event
    q = check_float(sampling_rate, "sampling_rate", "sampled_event", 0.0, 1.0)
    return dp_accounting.PoissonSampledDpEvent(sampling_probability=q, event=event)


def event_to_dict(event: Event) -> dict[str, Any]:
    """JSON-able form of an event: ``{"type": "laplace" | "gaussian", "noise_multiplier": ...}``,
    ``{"type": "pure", "epsilon": ...}``, ``{"type": "noop"}`` or ``{"type": "poisson", "sampling_probability": q,
    "event": {...}}`` (a Poisson-subsampled Laplace/Gaussian step)."""
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return {"type": "laplace", "noise_multiplier": float(event.noise_multiplier)}
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return {"type": "gaussian", "noise_multiplier": float(event.noise_multiplier)}
    if isinstance(event, PureEpsilonDpEvent):
        return {"type": "pure", "epsilon": float(event.epsilon)}
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return {"type": "noop"}
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return {"type": "poisson", "sampling_probability": float(event.sampling_probability),
                "event": event_to_dict(event.event)}
    raise fail("event", "event_to_dict", "a Laplace, Gaussian, PureEpsilon, NoOp or PoissonSampled DpEvent", event)


def event_from_dict(d: Mapping[str, Any]) -> Event:
    """Inverse of :func:`event_to_dict`."""
    kind = check_choice(d.get("type"), "type", "event_from_dict", ("laplace", "gaussian", "pure", "noop", "poisson"))
    if kind == "poisson":
        inner = event_from_dict(d.get("event") or {})
        return _check_event(sampled_event(inner, d.get("sampling_probability")), "event_from_dict")
    if kind == "noop":
        return dp_accounting.NoOpDpEvent()
    if kind == "pure":
        return pure_epsilon_event(d.get("epsilon"), "event_from_dict")
    nm = check_float(d.get("noise_multiplier"), "noise_multiplier", "event_from_dict", 0.0, math.inf)
    if kind == "laplace":
        return dp_accounting.LaplaceDpEvent(noise_multiplier=nm)
    return dp_accounting.GaussianDpEvent(noise_multiplier=nm)


def pure_epsilon_event(epsilon: object, owner: str = "pure_epsilon_event") -> PureEpsilonDpEvent:
    """A :class:`PureEpsilonDpEvent` after checking ``epsilon`` is a float in (0, inf)."""
    return PureEpsilonDpEvent(epsilon=check_float(epsilon, "epsilon", owner, 0.0, math.inf))


def _check_event(event: object, owner: str) -> Event:
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return event
    if isinstance(event, PureEpsilonDpEvent):
        return pure_epsilon_event(event.epsilon, owner)
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        check_float(event.sampling_probability, "sampling_probability", owner, 0.0, 1.0, closed="right")
        if not isinstance(event.event, (dp_accounting.LaplaceDpEvent, dp_accounting.GaussianDpEvent)):
            raise fail("event", owner, "a PoissonSampledDpEvent of a Laplace or Gaussian event", event)
        _check_event(event.event, owner)
        return event
    if not isinstance(event, (dp_accounting.LaplaceDpEvent, dp_accounting.GaussianDpEvent)):
        raise fail("event", owner, "a NoisePlan or a Laplace, Gaussian, PureEpsilon or NoOp DpEvent", event)
    nm = event.noise_multiplier
    if not (isinstance(nm, (int, float)) and math.isfinite(nm) and nm > 0):
        raise fail("noise_multiplier", owner, "a float in (0, inf)", nm)
    return event


def event_of(item: object, owner: str) -> Event:
    if isinstance(item, NoisePlan):
        return item.dp_event()
    return _check_event(item, owner)


def pure_epsilon_of(event: Event) -> float | None:
    """The epsilon of a pure event (Laplace: 1 / multiplier; PureEpsilon; NoOp: 0), None for Gaussian."""
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, PureEpsilonDpEvent):
        return event.epsilon
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    return None


def claim_of(item: object, owner: str) -> Claim:
    if isinstance(item, NoisePlan):
        return (item.epsilon, item.delta)
    if isinstance(item, (dp_accounting.LaplaceDpEvent, PureEpsilonDpEvent, dp_accounting.NoOpDpEvent)):
        return (pure_epsilon_of(_check_event(item, owner)), 0.0)
    if isinstance(item, (dp_accounting.GaussianDpEvent, dp_accounting.PoissonSampledDpEvent)):
        raise InvalidParameterError(
            f"{owner}: a bare GaussianDpEvent carries no per-step (epsilon, delta) claim for basic "
            "composition; pass the NoisePlan or an explicit claim=(epsilon, delta).")
    if isinstance(item, (tuple, list)) and len(item) == 2:
        eps = check_float(item[0], "epsilon", owner, 0.0, math.inf, closed="left")
        dl = check_float(item[1], "delta", owner, 0.0, 1.0, closed="both")
        return (eps, dl)
    raise fail("entry", owner, "a NoisePlan, a dp_accounting event or an (epsilon, delta) claim", item)


def event_size(event: Event) -> float:
    """The parameter events of one kind are ordered and merged by (larger = more private)."""
    if isinstance(event, PureEpsilonDpEvent):
        return 1.0 / event.epsilon
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return event_size(event.event)
    return getattr(event, "noise_multiplier", 0.0)


def _event_kind(event: Event) -> tuple[Any, ...]:
    """What must agree for two events to merge: the type (and for a sampled event, its rate and inner type)."""
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return ("PoissonSampledDpEvent", float(event.sampling_probability), type(event.event).__name__)
    return (type(event).__name__,)


def multiplier_of(event: Event) -> float:
    """The noise multiplier of a Laplace/Gaussian event (sampled or not); inf for the others."""
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return multiplier_of(event.event)
    return float(getattr(event, "noise_multiplier", math.inf))


def checked_count(count: object, owner: str) -> int:
    return check_int(count, "count", owner, 0)


#: Events of one kind whose noise multipliers agree to this relative tolerance are merged into one, with
#: the smallest multiplier (the conservative choice). It absorbs last-bit differences of ``scale /
#: sensitivity`` between rounds, so a run is composed exactly as its total-budget calibration was.
MERGE_RTOL = 1e-9


def group_events(entries: Iterable[tuple[object, int]], owner: str = "group_events") -> Grouped:
    """Merge identical events, summing counts; a canonical (sorted, hashable) tuple of (event, count).

    Events of the same kind whose multipliers differ by at most ``MERGE_RTOL`` (relative) count as one,
    carrying the smallest multiplier of the cluster (for pure events: the largest epsilon). NoOp events
    (steps that touch no data) are dropped.
    """
    counts: dict[Event, int] = {}
    for item, count in entries:
        event = event_of(item, owner)
        n = checked_count(count, owner)
        if n and not isinstance(event, dp_accounting.NoOpDpEvent):
            counts[event] = counts.get(event, 0) + n
    ordered = sorted(counts.items(), key=lambda kv: (_event_kind(kv[0]), event_size(kv[0])))
    merged: list[tuple[Event, int]] = []
    for event, n in ordered:
        if merged:
            head, m = merged[-1]
            if (_event_kind(head) == _event_kind(event)
                    and event_size(event) <= event_size(head) * (1.0 + MERGE_RTOL)):
                merged[-1] = (head, m + n)
                continue
        merged.append((event, n))
    return tuple(merged)

