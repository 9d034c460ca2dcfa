"""Privacy accounting: basic composition, RDP and PLD over the mechanism calls of a run (SPEC §2.2).

The functions take *entries*, an iterable of ``(item, count)`` pairs where ``item`` is a
:class:`~cvxdp.privacy.noise.NoisePlan` (which carries its per-step (epsilon, delta) claim), a
``dp_accounting`` ``LaplaceDpEvent``/``GaussianDpEvent`` (for RDP/PLD; a Laplace event also implies its
pure claim), a :class:`PureEpsilonDpEvent` (a pure epsilon-DP step with no dp-accounting event of its own,
e.g. one Gamma-norm iteration, SPEC §3-§4), a ``NoOpDpEvent`` (a step that touches no data) or, for
:func:`basic_composition` only, a per-step claim ``(epsilon, delta)``.

Pure epsilon-DP steps are accounted through their worst case, binary randomized response with the same
epsilon (every epsilon-DP pair of output distributions is a post-processing of it; Kairouz, Oh & Viswanath
2015): its Renyi divergences (exact, closed form) under "rdp" and dp-accounting's pessimistic PLD of an
(epsilon, 0)-DP mechanism (``from_privacy_parameters``) under "pld". An agent whose records are all PureEpsilon (or NoOp) events
has spent at most its basic total at any delta, so its "rdp"/"pld" totals are capped there.

Identical events are grouped and composed once with ``SelfComposedDpEvent`` (never one by one), and
results are cached, so asking a :class:`PrivacyLedger` for its totals every round costs milliseconds.
Accounting uses ``NeighboringRelation.ADD_OR_REMOVE_ONE`` with ``noise_multiplier = scale / sensitivity``
for the model's own neighbouring relation (SPEC §2.2 pitfalls).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting import privacy_accountant
from dp_accounting.pld import PLDAccountant, common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from ..errors import InvalidParameterError, PrivacyWarning, check_choice, check_float, check_int, fail
from .noise import NoisePlan

ACCOUNTANTS = ("basic", "rdp", "pld")
NEIGHBORING = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE

#: PLD discretisation: the interval is this fraction of a quick (RDP) estimate of the total epsilon,
#: clamped to [PLD_MIN_INTERVAL, PLD_MAX_INTERVAL]. It keeps every PLD a few thousand points wide (a few
#: milliseconds) while the pessimistic estimate stays within ~1e-3 relative of the exact epsilon.
PLD_RELATIVE_INTERVAL = 2e-4
PLD_MIN_INTERVAL = 1e-5
PLD_MAX_INTERVAL = 0.5

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


def _event_of(item: object, owner: str) -> Event:
    if isinstance(item, NoisePlan):
        return item.dp_event()
    return _check_event(item, owner)


def _pure_epsilon(event: Event) -> float | None:
    """The epsilon of a pure event (Laplace: 1 / multiplier; PureEpsilon; NoOp: 0), None for Gaussian."""
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, PureEpsilonDpEvent):
        return event.epsilon
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    return None


def _claim_of(item: object, owner: str) -> Claim:
    if isinstance(item, NoisePlan):
        return (item.epsilon, item.delta)
    if isinstance(item, (dp_accounting.LaplaceDpEvent, PureEpsilonDpEvent, dp_accounting.NoOpDpEvent)):
        return (_pure_epsilon(_check_event(item, owner)), 0.0)
    if isinstance(item, (dp_accounting.GaussianDpEvent, dp_accounting.PoissonSampledDpEvent)):
        raise InvalidParameterError(
            f"{owner}: a bare GaussianDpEvent carries no per-step (epsilon, delta) claim for basic "
            "composition; pass the NoisePlan or an explicit claim=(epsilon, delta).")
    if isinstance(item, (tuple, list)) and len(item) == 2:
        eps = check_float(item[0], "epsilon", owner, 0.0, math.inf, closed="left")
        dl = check_float(item[1], "delta", owner, 0.0, 1.0, closed="both")
        return (eps, dl)
    raise fail("entry", owner, "a NoisePlan, a dp_accounting event or an (epsilon, delta) claim", item)


def _event_size(event: Event) -> float:
    """The parameter events of one kind are ordered and merged by (larger = more private)."""
    if isinstance(event, PureEpsilonDpEvent):
        return 1.0 / event.epsilon
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return _event_size(event.event)
    return getattr(event, "noise_multiplier", 0.0)


def _event_kind(event: Event) -> tuple[Any, ...]:
    """What must agree for two events to merge: the type (and for a sampled event, its rate and inner type)."""
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return ("PoissonSampledDpEvent", float(event.sampling_probability), type(event.event).__name__)
    return (type(event).__name__,)


def _multiplier(event: Event) -> float:
    """The noise multiplier of a Laplace/Gaussian event (sampled or not); inf for the others."""
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return _multiplier(event.event)
    return float(getattr(event, "noise_multiplier", math.inf))


def _count(count: object, owner: str) -> int:
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
        event = _event_of(item, owner)
        n = _count(count, owner)
        if n and not isinstance(event, dp_accounting.NoOpDpEvent):
            counts[event] = counts.get(event, 0) + n
    ordered = sorted(counts.items(), key=lambda kv: (_event_kind(kv[0]), _event_size(kv[0])))
    merged: list[tuple[Event, int]] = []
    for event, n in ordered:
        if merged:
            head, m = merged[-1]
            if (_event_kind(head) == _event_kind(event)
                    and _event_size(event) <= _event_size(head) * (1.0 + MERGE_RTOL)):
                merged[-1] = (head, m + n)
                continue
        merged.append((event, n))
    return tuple(merged)


# --------------------------------------------------------------------------- composition
def basic_composition(entries: Iterable[tuple[object, int]]) -> Claim:
    """Basic composition (paper Thm 4.8): the sums of the per-step epsilons and deltas, times counts.

    Parameters
    ----------
    entries : iterable of (item, count)
        ``item`` is a NoisePlan, a LaplaceDpEvent or an (epsilon, delta) claim.

    Returns
    -------
    (float, float)
        Total epsilon and total delta (delta capped at 1).
    """
    eps = dl = 0.0
    for item, count in entries:
        e, d = _claim_of(item, "basic_composition")
        n = _count(count, "basic_composition")
        eps += n * e
        dl += n * d
    return eps, min(dl, 1.0)


def pure_epsilon_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """Renyi divergences of binary randomized response with ``epsilon`` at ``orders`` (> 1), exactly.

    ``D_a = log(p^a q^(1-a) + q^a p^(1-a)) / (a - 1)`` with ``p = e^eps / (1 + e^eps)``, ``q = 1 - p``: the
    largest RDP curve of any pure epsilon-DP mechanism (it is the worst-case pair, and Renyi divergences do
    not grow under post-processing). Equals dp-accounting's ``RandomizedResponseDpEvent(2 / (1 + e^eps), 2)``
    under REPLACE_ONE.
    """
    a = np.asarray(orders, dtype=float)
    log_p = -np.logaddexp(0.0, -epsilon)
    log_q = -np.logaddexp(0.0, epsilon)
    return np.logaddexp(a * log_p + (1.0 - a) * log_q, a * log_q + (1.0 - a) * log_p) / (a - 1.0)


class CvxdpRdpAccountant(RdpAccountant):
    """dp-accounting's RDP accountant that also composes :class:`PureEpsilonDpEvent` (see
    :func:`pure_epsilon_rdp`)."""

    def _maybe_compose(self, event: Event, count: int, do_compose: bool):
        if isinstance(event, PureEpsilonDpEvent):
            if do_compose:
                self._rdp += count * pure_epsilon_rdp(event.epsilon, self._orders)
            return None
        return super()._maybe_compose(event, count, do_compose)


class CvxdpPLDAccountant(PLDAccountant):
    """dp-accounting's PLD accountant that also composes :class:`PureEpsilonDpEvent`, as the pessimistic PLD
    of an (epsilon, 0)-DP mechanism (``privacy_loss_distribution.from_privacy_parameters``)."""

    def _maybe_compose(self, event: Event, count: int, do_compose: bool):
        if isinstance(event, PureEpsilonDpEvent):
            if do_compose:
                step = pld_lib.from_privacy_parameters(
                    common.DifferentialPrivacyParameters(event.epsilon, 0.0),
                    value_discretization_interval=self._value_discretization_interval)
                self._pld = self._pld.compose(step.self_compose(count) if count > 1 else step)
            return None
        return super()._maybe_compose(event, count, do_compose)


def rdp_accountant() -> RdpAccountant:
    """A fresh RDP accountant (default orders, ADD_OR_REMOVE_ONE; also composes PureEpsilonDpEvent)."""
    return CvxdpRdpAccountant(neighboring_relation=NEIGHBORING)


@functools.lru_cache(maxsize=4096)
def _rdp_cached(grouped: Grouped, delta: float) -> float:
    acc = rdp_accountant()
    for event, count in grouped:
        acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return float(acc.get_epsilon(delta))


#: Integer RDP orders of the quick estimate of subsampled events (closed form, cost linear in the order; the
#: fractional orders of the default list take about a second each for a Poisson-subsampled Gaussian). The estimate
#: only sizes the PLD grid, so a coarse list does.
SAMPLED_ESTIMATE_ORDERS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: Subsampled events use this many times the relative PLD interval: their PLD (dp-accounting's subsampled Gaussian)
#: is built point by point, about 20x slower per point than a Gaussian's. The estimate stays pessimistic (an upper
#: bound), within about 1e-3 relative of the finer grid's (tests/privacy/test_subsampling.py).
SAMPLED_INTERVAL_FACTOR = 5.0


@functools.lru_cache(maxsize=4096)
def _sampled_estimate(grouped: Grouped, delta: float) -> float:
    acc = CvxdpRdpAccountant(orders=list(SAMPLED_ESTIMATE_ORDERS), neighboring_relation=NEIGHBORING)
    for event, count in grouped:
        acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return float(acc.get_epsilon(delta))


def pld_interval(grouped: Grouped, delta: float) -> float:
    """The PLD value-discretisation interval used for these events (see ``PLD_RELATIVE_INTERVAL``)."""
    sampled = any(isinstance(e, dp_accounting.PoissonSampledDpEvent) for e, _ in grouped)
    estimate = (_sampled_estimate if sampled else _rdp_cached)(grouped, max(delta, 1e-12))
    if not math.isfinite(estimate):  # pragma: no cover - RDP is finite for positive multipliers
        estimate = sum(c / _event_size(e) for e, c in grouped)
    relative = PLD_RELATIVE_INTERVAL * (SAMPLED_INTERVAL_FACTOR if sampled else 1.0)
    interval = min(max(estimate * relative, PLD_MIN_INTERVAL), PLD_MAX_INTERVAL)
    pure = {e.epsilon for e, _ in grouped if isinstance(e, PureEpsilonDpEvent)}
    if len(pure) == 1:
        # one pure epsilon: a grid on which +-epsilon lie exactly, so the pessimistic rounding of its two
        # privacy-loss values does not accumulate over the steps (several epsilons: up to one interval each)
        eps = pure.pop()
        interval = eps / math.ceil(eps / interval)
    return interval


#: below this Gaussian noise multiplier the "pld" total falls back to RDP (an upper bound; see _pld_cached)
PLD_MIN_GAUSSIAN_MULTIPLIER = 0.05


@functools.lru_cache(maxsize=4096)
def _pld_cached(grouped: Grouped, delta: float) -> float:
    if delta == 0.0:
        # dp-accounting's pessimistic PLD puts the truncated tail at infinity, so its epsilon at delta = 0 is
        # always inf. For pure (Laplace, PureEpsilon) mechanisms the exact answer is the sum of the per-call
        # epsilons (the privacy losses add up and their maximum is attained); Gaussian noise has none.
        if all(_pure_epsilon(e) is not None for e, _ in grouped):
            return float(sum(c * _pure_epsilon(e) for e, c in grouped))
        return math.inf
    if any(isinstance(getattr(e, "event", e), dp_accounting.GaussianDpEvent)
           and _multiplier(e) < PLD_MIN_GAUSSIAN_MULTIPLIER for e, _ in grouped):
        # a nearly noiseless Gaussian makes dp-accounting's PLD grid astronomically large (terabytes); its
        # epsilon is huge anyway, and RDP's is a valid upper bound
        return _rdp_cached(grouped, delta)
    acc = CvxdpPLDAccountant(NEIGHBORING, value_discretization_interval=pld_interval(grouped, delta))
    with warnings.catch_warnings():  # dp-accounting overflows harmlessly (to inf) on very large totals
        warnings.simplefilter("ignore", RuntimeWarning)
        for event, count in grouped:
            acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
        return float(acc.get_epsilon(delta))


def composed_epsilon(grouped: Sequence[tuple[object, int]], delta: float, accountant: str) -> float:
    """Epsilon at ``delta`` of the composition of ``grouped`` under "rdp" or "pld" (cached)."""
    check_choice(accountant, "accountant", "composed_epsilon", ("rdp", "pld"))
    dl = check_float(delta, "delta", "composed_epsilon", 0.0, 1.0, closed="left")
    key = group_events(grouped, "composed_epsilon")
    if not key:
        return 0.0
    return _rdp_cached(key, dl) if accountant == "rdp" else _pld_cached(key, dl)


def rdp_epsilon(entries: Iterable[tuple[object, int]], delta: float) -> float:
    """Epsilon at ``delta`` under the RDP (moments) accountant, ``dp_accounting.rdp.RdpAccountant``.

    Infinite when ``delta == 0``. Laplace events use dp-accounting's exact Laplace RDP curve.
    """
    return composed_epsilon(tuple(entries), delta, "rdp")


def pld_epsilon(entries: Iterable[tuple[object, int]], delta: float) -> float:
    """Epsilon at ``delta`` under the PLD accountant, ``dp_accounting.pld.PLDAccountant``.

    Pessimistic estimate (an upper bound) with the discretisation interval of :func:`pld_interval`.
    """
    return composed_epsilon(tuple(entries), delta, "pld")


class AdaptivePLDAccountant(privacy_accountant.PrivacyAccountant):
    """A ``dp_accounting`` accountant that evaluates exactly like :func:`pld_epsilon`.

    Used by :func:`~cvxdp.privacy.calibration.calibrate_to_total`, so that the calibrated noise meets the
    target under the very computation the ledger later performs.
    """

    def __init__(self) -> None:
        super().__init__(NEIGHBORING)
        self._entries: list[tuple[Event, int]] = []

    def _maybe_compose(self, event: Event, count: int, do_compose: bool):
        if isinstance(event, dp_accounting.NoOpDpEvent):
            return None
        if isinstance(event, dp_accounting.SelfComposedDpEvent):
            return self._maybe_compose(event.event, event.count * count, do_compose)
        if isinstance(event, dp_accounting.ComposedDpEvent):
            for e in event.events:
                err = self._maybe_compose(e, count, do_compose)
                if err is not None:
                    return err
            return None
        if isinstance(event, (dp_accounting.LaplaceDpEvent, dp_accounting.GaussianDpEvent, PureEpsilonDpEvent,
                              dp_accounting.PoissonSampledDpEvent)):
            if do_compose:
                self._entries.append((event, count))
            return None
        return self.CompositionErrorDetails(invalid_event=event, error_message="Unsupported event.")

    def get_epsilon(self, target_delta: float) -> float:
        return pld_epsilon(self._entries, target_delta)


def accountant_factory(accountant: str) -> Callable[[], privacy_accountant.PrivacyAccountant]:
    """A zero-argument factory of fresh ``dp_accounting`` accountants for "rdp" or "pld"."""
    check_choice(accountant, "accountant", "accountant_factory", ("rdp", "pld"))
    return rdp_accountant if accountant == "rdp" else AdaptivePLDAccountant


# --------------------------------------------------------------------------- ledger
#: Below this noise multiplier (sigma / sensitivity) the PLD accountant is not run: its grid grows like
#: 1/multiplier^2 (about a second at 0.01) and the epsilon is in the thousands anyway; RDP (closed form) is reported.
MIN_PLD_MULTIPLIER = 0.05


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _first(value: Any) -> Any:
    """The epsilon of a summary entry: ``[eps, delta]`` (basic) or ``eps``."""
    return value[0] if isinstance(value, list) else value


PAPER_PRESET = ("paper preset: reproduces the published figure; not a privacy guarantee for this model "
                "(sensitivity=\"paper\" ignores the model's relation, the penalty and min(c); use the default "
                "sensitivity=\"exact\")")
LEMMA1_PRESET = ("paper preset: reproduces the published figure; not a privacy guarantee for this model "
                 "(Hu et al.'s Lemma 1 sensitivity is invalid in general; use sensitivity=\"worst_case\")")
COROLLARY1_NOTE = ("eps_corollary1 (Hu et al.'s Corollary 1) is the paper's figure, computed from its Lemma 1 "
                   "claim; it is not a guarantee unless the per-epoch claim is")

_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Issue ``message`` as a :class:`~cvxdp.errors.PrivacyWarning` the first time ``key`` is seen."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, PrivacyWarning, stacklevel=3)


class GuaranteeNotes:
    """Mixin of the ledgers: notes on what the recorded claim means.

    ``note(reason, voids=True)`` marks the ledger's totals as not a guarantee (``summary()["guarantee"]``
    is False); ``voids=False`` records a condition the guarantee rests on.
    """

    _notes: list[dict[str, Any]]

    def note(self, reason: str, *, voids: bool = True, warn: bool = True) -> None:
        """Record ``reason`` once; warn once per process (unless ``warn=False``)."""
        notes = self.__dict__.setdefault("_notes", [])
        if any(n["reason"] == reason for n in notes):
            return
        notes.append({"reason": str(reason), "voids": bool(voids)})
        if warn:
            warn_once(reason, ("Not a privacy guarantee: " if voids else "Conditional privacy guarantee: ")
                      + reason)

    @property
    def notes(self) -> list[dict[str, Any]]:
        return [dict(n) for n in self.__dict__.get("_notes", [])]

    @property
    def guarantee(self) -> bool:
        """False when a recorded note voids the claim."""
        return not any(n["voids"] for n in self.notes)

    def notes_summary(self) -> dict[str, Any]:
        """``{"guarantee": bool, "notes": [{"reason", "voids"}, ...]}`` for the ledger's summary."""
        return {"guarantee": self.guarantee, "notes": self.notes}

    def _restore_notes(self, d: Any) -> None:
        for n in (d.get("notes") or []) if hasattr(d, "get") else []:
            self.note(n["reason"], voids=n["voids"], warn=False)


class PrivacyLedger(GuaranteeNotes):
    """Per-agent record of the mechanism calls of a run and their composed privacy cost.

    Each agent's data are protected separately, so totals are per agent; the summary also reports the
    worst agent. Events are stored grouped (identical event and claim -> one count).

    Parameters
    ----------
    agent_names : iterable of str
        The agents whose calls are recorded (unique names).
    target_delta : float
        The delta at which RDP and PLD epsilons are reported, in [0, 1).
    """

    def __init__(self, agent_names: Iterable[str], *, target_delta: float) -> None:
        names = list(agent_names)
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise fail("agent_names", "PrivacyLedger", "a non-empty list of unique str", names)
        self.target_delta = check_float(target_delta, "target_delta", "PrivacyLedger", 0.0, 1.0, "left")
        self._entries: dict[str, dict[tuple[Event, Claim], int]] = {n: {} for n in names}

    def __repr__(self) -> str:
        return f"PrivacyLedger(agents={list(self._entries)}, target_delta={self.target_delta!r})"

    @property
    def agent_names(self) -> list[str]:
        """The agents of this ledger, in the order given."""
        return list(self._entries)

    def _name(self, agent: object) -> str:
        name = getattr(agent, "name", agent)
        if name not in self._entries:
            raise fail("agent", "PrivacyLedger", "one of " + ", ".join(map(repr, self._entries)), name)
        return name

    @staticmethod
    def _item(plan_or_event: object, claim: Claim | None) -> tuple[Event, Claim]:
        event = _event_of(plan_or_event, "PrivacyLedger.record")
        c = _claim_of(plan_or_event if claim is None else tuple(claim), "PrivacyLedger.record")
        return event, c

    def record(self, agent: object, plan_or_event: object, count: int = 1, *,
               claim: Claim | None = None) -> None:
        """Record ``count`` calls of a mechanism by ``agent`` (a name or an object with ``.name``).

        ``plan_or_event`` is a NoisePlan (its per-step claim is used for basic composition) or a Laplace /
        Gaussian DpEvent; a Gaussian event needs ``claim=(epsilon, delta)``.
        """
        name = self._name(agent)
        entries = self._entries[name]
        if claim is not None and type(count) is int and count >= 0:  # noqa: E721 - not bool, not numpy
            known = (plan_or_event, tuple(claim))
            if known in entries:  # the same event and claim as an earlier record (checked then): count up
                entries[known] += count
                return
        key = self._item(plan_or_event, claim)
        n = _count(count, "PrivacyLedger.record")
        if n:
            entries[key] = entries.get(key, 0) + n

    def record_event(self, name: object, event: Event, *, count: int = 1) -> None:
        """Record ``count`` steps of ``name`` described by a DpEvent whose claim is implied by the event.

        ``event`` is a :class:`PureEpsilonDpEvent` (claim ``(epsilon, 0)``; e.g.
        :func:`cvxdp.families.graph.mechanism.gamma_step_event`), a ``LaplaceDpEvent`` (``(1 / multiplier, 0)``) or a
        ``NoOpDpEvent`` (a step that touches no data, e.g. a recycled MR-ADMM iteration: counted by
        :meth:`free_steps`, costs nothing). A Gaussian event has no implied claim: use :meth:`record` with
        ``claim=``.
        """
        if isinstance(event, (dp_accounting.GaussianDpEvent, dp_accounting.PoissonSampledDpEvent)):
            raise InvalidParameterError(
                "PrivacyLedger.record_event: a GaussianDpEvent implies no per-step (epsilon, delta) claim; use "
                "PrivacyLedger.record(agent, plan_or_event, count, claim=(epsilon, delta)).")
        self.record(name, event, count)

    def steps(self, agent: object) -> int:
        """Number of mechanism calls recorded for ``agent`` (steps recorded as NoOp events excluded)."""
        return sum(n for (e, _), n in self._entries[self._name(agent)].items()
                   if not isinstance(e, dp_accounting.NoOpDpEvent))

    def free_steps(self, agent: object) -> int:
        """Number of steps of ``agent`` recorded as ``NoOpDpEvent`` (no data touched)."""
        return sum(n for (e, _), n in self._entries[self._name(agent)].items()
                   if isinstance(e, dp_accounting.NoOpDpEvent))

    def entries(self, agent: object) -> list[tuple[Event, Claim, int]]:
        """The grouped records of ``agent``: (event, per-step claim, count)."""
        return [(e, c, n) for (e, c), n in self._entries[self._name(agent)].items()]

    @staticmethod
    def _spent(entries: Mapping[tuple[Event, Claim], int], accountant: str, delta: float) -> Claim:
        basic = basic_composition((c, n) for (_, c), n in entries.items())
        if accountant == "basic":
            return basic
        grouped = [(e, n) for (e, _), n in entries.items()]
        eps = composed_epsilon(grouped, delta, accountant)
        if all(isinstance(e, (PureEpsilonDpEvent, dp_accounting.NoOpDpEvent)) for e, _ in entries):
            # pure-epsilon steps only: (basic epsilon, 0)-DP, hence (basic epsilon, delta)-DP too. (The same holds
            # for Laplace; not applied there, so Laplace totals stay exactly dp-accounting's.)
            eps = min(eps, basic[0])
        return eps, delta

    def spent(self, agent: object, accountant: str) -> Claim:
        """Privacy spent by ``agent`` so far: (epsilon, delta).

        "basic" sums the per-step claims; "rdp"/"pld" give epsilon at ``target_delta`` (and
        ``target_delta``). An agent with no records has spent (0, 0).
        """
        check_choice(accountant, "accountant", "PrivacyLedger.spent", ACCOUNTANTS)
        entries = self._entries[self._name(agent)]
        if not entries:
            return 0.0, 0.0
        return self._spent(entries, accountant, self.target_delta)

    def worst_epsilon(self, accountant: str) -> float:
        """The largest epsilon :meth:`spent` by any agent; agents with the same records are composed once."""
        check_choice(accountant, "accountant", "PrivacyLedger.worst_epsilon", ACCOUNTANTS)
        totals: dict[tuple[Any, ...], float] = {}
        for entries in self._entries.values():
            key = tuple(entries.items())
            if key not in totals:
                totals[key] = self._spent(entries, accountant, self.target_delta)[0] if entries else 0.0
        return max(totals.values())

    def would_exceed(self, agent: object, plan: object, count: int = 1, budget: Claim | None = None,
                     accountant: str = "pld", *, claim: Claim | None = None, rtol: float = 1e-9) -> bool:
        """Whether recording ``count`` more calls of ``plan`` would take ``agent`` past ``budget``.

        ``budget = (epsilon, delta)``: under "basic" both totals are compared; under "rdp"/"pld" the
        epsilon at the budget's delta is compared (a relative slack ``rtol`` absorbs rounding).
        """
        check_choice(accountant, "accountant", "PrivacyLedger.would_exceed", ACCOUNTANTS)
        if not (isinstance(budget, (tuple, list)) and len(budget) == 2):
            raise fail("budget", "PrivacyLedger.would_exceed", "a pair (epsilon, delta)", budget)
        b_eps = check_float(budget[0], "budget epsilon", "PrivacyLedger.would_exceed", 0.0, math.inf)
        b_dl = check_float(budget[1], "budget delta", "PrivacyLedger.would_exceed", 0.0, 1.0, "left")
        entries = dict(self._entries[self._name(agent)])
        key = self._item(plan, claim)
        entries[key] = entries.get(key, 0) + _count(count, "PrivacyLedger.would_exceed")
        eps, dl = self._spent(entries, accountant, b_dl)
        slack = 1.0 + rtol
        return eps > b_eps * slack or dl > b_dl * slack

    def repeats_within(self, agent: object, plan: object, count: int, budget: Claim, accountant: str = "pld", *,
                       claim: Claim | None = None, limit: int, rtol: float = 1e-9) -> int:
        """How many more rounds of ``count`` calls of ``plan`` fit ``agent``'s ``budget``: the largest ``k`` in
        ``[0, limit]`` for which ``would_exceed(agent, plan, k * count, budget, ...)`` is False.

        One composition when the whole ``limit`` fits, else a bisection (about ``log2(limit)`` compositions); each
        candidate is composed exactly as :meth:`would_exceed` composes it, so a guard that stops after ``k``
        rounds leaves a total that was itself checked against the budget. The bisection relies on the total growing
        with the count (it does for every accountant; a discretised PLD total is an upper bound at each count).
        """
        n = _count(count, "PrivacyLedger.repeats_within")
        k_max = check_int(limit, "limit", "PrivacyLedger.repeats_within", 0)
        if n == 0 or k_max == 0:
            return k_max

        def fits(k: int) -> bool:
            return not self.would_exceed(agent, plan, k * n, budget, accountant, claim=claim, rtol=rtol)

        if fits(k_max):
            return k_max
        lo, hi = 0, k_max  # fits(lo) is assumed (nothing more recorded), fits(hi) is False
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo

    def pld_feasible(self) -> bool:
        """Whether PLD is computed for this ledger: every recorded Laplace/Gaussian event has a noise multiplier of at
        least :data:`MIN_PLD_MULTIPLIER` (below it PLD's grid explodes and the epsilon is in the thousands anyway)."""
        return all(_multiplier(e) >= MIN_PLD_MULTIPLIER for entries in self._entries.values() for (e, _) in entries)

    def summary(self, *, pld: bool | None = None) -> dict[str, Any]:
        """JSON-able totals: per agent and worst agent, for every accountant (the one summary of every family).

        ``{"per_agent": {name: {"basic": [eps, delta], "rdp": eps, "pld": eps, "steps": n, "free_steps": m}},
        "worst": {... same keys, each the max over agents ..., "agent": name with the largest PLD eps},
        "target_delta": delta, "guarantee": bool, "notes": [...]}``. Infinite epsilons are written as None (JSON
        null). ``pld``: None (default) computes PLD unless a noise multiplier is below :data:`MIN_PLD_MULTIPLIER`
        (then the PLD totals are None, a ``"note"`` says why and the worst agent is the one with the largest RDP
        epsilon); False never computes it (the worst agent is then the one with the largest basic epsilon).
        ``free_steps`` counts the steps that read no data (NoOp events, e.g. recycled MR-ADMM iterations).
        """
        skipped = pld is None and not self.pld_feasible()
        pld = (not skipped) if pld is None else bool(pld)
        per_agent: dict[str, dict[str, Any]] = {}
        for name in self._entries:
            b = self.spent(name, "basic")
            per_agent[name] = {"basic": [_finite_or_none(b[0]), b[1]],
                               "rdp": _finite_or_none(self.spent(name, "rdp")[0]),
                               "pld": _finite_or_none(self.spent(name, "pld")[0]) if pld else None,
                               "steps": self.steps(name), "free_steps": self.free_steps(name)}

        def worst(key: str) -> Any:
            vals = [v[key] for v in per_agent.values()]
            return None if any(x is None for x in vals) else max(vals)

        basic = [v["basic"] for v in per_agent.values()]
        worst_eps = None if any(b[0] is None for b in basic) else max(b[0] for b in basic)
        key = "pld" if pld else ("rdp" if skipped else "basic")
        worst_agent = max(per_agent, key=lambda n: math.inf if _first(per_agent[n][key]) is None
                          else _first(per_agent[n][key]))
        out = {"per_agent": per_agent,
               "worst": {"basic": [worst_eps, max(b[1] for b in basic)], "rdp": worst("rdp"),
                         "pld": worst("pld") if pld else None, "steps": worst("steps"),
                         "free_steps": worst("free_steps"), "agent": worst_agent},
               "target_delta": self.target_delta, **self.notes_summary()}
        if skipped:
            out["note"] = f"PLD not computed: a noise multiplier is below {MIN_PLD_MULTIPLIER}"
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able full state; :meth:`from_dict` rebuilds an equal ledger."""
        return {"target_delta": self.target_delta, "notes": self.notes,
                "agents": {name: [{"event": event_to_dict(e), "claim": [c[0], c[1]], "count": n}
                                  for (e, c), n in entries.items()]
                           for name, entries in self._entries.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyLedger:
        """Rebuild a ledger saved with :meth:`to_dict`."""
        try:
            agents = d["agents"]
            ledger = cls(list(agents), target_delta=d["target_delta"])
            for name, rows in agents.items():
                for row in rows:
                    ledger.record(name, event_from_dict(row["event"]), row["count"],
                                  claim=(row["claim"][0], row["claim"][1]))
            ledger._restore_notes(d)
        except (KeyError, TypeError, IndexError) as err:
            raise InvalidParameterError(f"PrivacyLedger.from_dict: malformed ledger dict ({err!r}).") from err
        return ledger

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrivacyLedger):
            return NotImplemented
        return (self.target_delta == other.target_delta and self._entries == other._entries
                and self.notes == other.notes)

    __hash__ = None  # type: ignore[assignment]


class BudgetGuard:
    """The budget check of a run whose agents repeat the same charges round after round: one
    :meth:`PrivacyLedger.repeats_within` search per distinct (agent's records, charge), then a comparison of the
    round's charges with the last ones, instead of a composition per agent and round.

    Parameters
    ----------
    budget : tuple of float
        ``(epsilon, delta)`` per agent over the run.
    accountant : {"basic", "rdp", "pld"}
        The accountant the budget is checked under.
    """

    def __init__(self, budget: Claim, accountant: str) -> None:
        self.budget, self.accountant = budget, accountant
        self.searches = 0  # how many searches ran (benchmarks and tests read it)
        self._fits: dict[tuple[Any, ...], int] = {}  # (records, key, its count, count, limit) -> rounds that fit
        self._charges: tuple[Any, ...] | None = None  # the charges last checked ...
        self._last_round = 0  # ... and the last round they fit every agent

    def exceeds(self, ledger: PrivacyLedger, charges: Sequence[tuple[str, object, int, Claim]], *, round: int,
                rounds: int) -> bool:
        """Whether recording round ``round``'s ``charges`` (``(agent, event, count, claim)`` each) would take some
        agent past the budget, in a run of ``rounds`` rounds whose earlier charges are recorded in ``ledger``."""
        key = tuple(charges)
        if key == self._charges and round <= self._last_round:  # the same charges: known to fit until then
            return False
        self._charges, fit = key, rounds - round + 1
        for agent, event, count, claim in charges:
            fit = min(fit, self._rounds_that_fit(ledger, agent, event, count, claim, rounds - round + 1))
        self._last_round = round - 1 + fit
        return fit == 0

    def _rounds_that_fit(self, ledger: PrivacyLedger, agent: str, event: object, count: int, claim: Claim,
                         limit: int) -> int:
        entries = ledger._entries[ledger._name(agent)]
        item = ledger._item(event, claim)
        others = tuple((k, v) for k, v in entries.items() if k != item)
        position = list(entries).index(item) if item in entries else len(entries)  # the composition's order
        cache = (others, position, item, entries.get(item, 0), count, limit)  # agents with equal records share it
        if cache not in self._fits:
            self.searches += 1
            self._fits[cache] = ledger.repeats_within(agent, event, count, self.budget, self.accountant, claim=claim,
                                                      limit=limit)
        return self._fits[cache]


def ledger_from_dict(d: Mapping[str, Any]) -> PrivacyLedger:
    """A :class:`PrivacyLedger` from its :meth:`~PrivacyLedger.to_dict`, or from the per-iteration format that graph
    runs were saved in before there was one ledger (``"cvxdp-gamma-ledger/1"``: one pure-epsilon claim per
    iteration, 0 for a recycled one), converted: a pure-epsilon event per claim, a NoOp event per recycled step."""
    if not (isinstance(d, Mapping) and d.get("format") == "cvxdp-gamma-ledger/1"):
        return PrivacyLedger.from_dict(d)
    try:
        ledger = PrivacyLedger(list(d["agents"]), target_delta=d["target_delta"])
        for name, steps in d["agents"].items():
            for _, eps in steps:
                event = dp_accounting.NoOpDpEvent() if float(eps) == 0.0 else pure_epsilon_event(float(eps))
                ledger.record(name, event, 1)
        ledger._restore_notes(d)
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidParameterError(f"ledger_from_dict: malformed graph ledger dict ({err!r}).") from err
    return ledger
