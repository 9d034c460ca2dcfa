"""Composition: basic, RDP and PLD totals of grouped events, and the accountants behind them (SPEC §2.2).

Pure epsilon-DP steps are accounted through their worst case, binary randomized response with the same
epsilon (every epsilon-DP pair of output distributions is a post-processing of it; Kairouz, Oh & Viswanath
2015): its Renyi divergences (exact, closed form) under "rdp" and dp-accounting's pessimistic PLD of an
(epsilon, 0)-DP mechanism (``from_privacy_parameters``) under "pld". An agent whose records are all PureEpsilon (or
NoOp) events has spent at most its basic total at any delta, so its "rdp"/"pld" totals are capped there.

Identical events are grouped and composed once with ``SelfComposedDpEvent`` (never one by one), and results are
cached. Accounting uses ``NeighboringRelation.ADD_OR_REMOVE_ONE`` with ``noise_multiplier = scale / sensitivity``
for the model's own neighbouring relation (SPEC §2.2 pitfalls).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Sequence

import dp_accounting
import numpy as np
from dp_accounting import privacy_accountant
from dp_accounting.pld import PLDAccountant, common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from ..errors import check_choice, check_float
from .events import (
    Claim,
    Event,
    Grouped,
    PureEpsilonDpEvent,
    checked_count,
    claim_of,
    event_size,
    group_events,
    multiplier_of,
    pure_epsilon_of,
)

ACCOUNTANTS = ("basic", "rdp", "pld")
NEIGHBORING = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE

#: PLD discretisation: the interval is this fraction of a quick (RDP) estimate of the total epsilon,
#: clamped to [PLD_MIN_INTERVAL, PLD_MAX_INTERVAL]. It keeps every PLD a few thousand points wide (a few
#: milliseconds) while the pessimistic estimate stays an upper bound within 1e-3 relative of the exact epsilon at
#: delta >= 1e-13 (Gaussian totals within 1e-5; subsampled ones within 2e-3 of a grid of 1e-4; at delta 1e-15
#: dp-accounting's truncated tail adds 6e-3: tests/privacy/test_pld_accuracy.py).
PLD_RELATIVE_INTERVAL = 2e-4
PLD_MIN_INTERVAL = 1e-5
PLD_MAX_INTERVAL = 0.5

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
        e, d = claim_of(item, "basic_composition")
        n = checked_count(count, "basic_composition")
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
        estimate = sum(c / event_size(e) for e, c in grouped)
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
        if all(pure_epsilon_of(e) is not None for e, _ in grouped):
            return float(sum(c * pure_epsilon_of(e) for e, c in grouped))
        return math.inf
    if any(isinstance(getattr(e, "event", e), dp_accounting.GaussianDpEvent)
           and multiplier_of(e) < PLD_MIN_GAUSSIAN_MULTIPLIER for e, _ in grouped):
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


