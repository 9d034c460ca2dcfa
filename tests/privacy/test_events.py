"""The events a ledger records (cvxdp.privacy.events): their checks at each bound, their JSON form, and how identical
events are grouped before composition (each group composed once, the conservative member kept)."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from cvxdp.errors import CvxdpError
from cvxdp.privacy.events import (
    PureEpsilonDpEvent,
    checked_count,
    claim_of,
    event_from_dict,
    event_of,
    group_events,
    pure_epsilon_event,
    sampled_event,
)

LAPLACE = dp_accounting.LaplaceDpEvent
GAUSSIAN = dp_accounting.GaussianDpEvent
NOOP = dp_accounting.NoOpDpEvent()
SAMPLED = dp_accounting.PoissonSampledDpEvent


def test_a_rate_of_one_or_none_is_no_sampling_and_any_other_rate_is_poisson_sampling():
    event = GAUSSIAN(2.0)
    assert sampled_event(event, None) is event and sampled_event(event, 1.0) is event
    assert sampled_event(event, 0.25) == SAMPLED(0.25, event)
    for rate in (0.0, -0.5, 1.5, 2.0):
        with pytest.raises(CvxdpError, match="'sampling_rate' parameter of sampled_event"):
            sampled_event(event, rate)


@pytest.mark.parametrize("d, key", [
    ({"type": "gaussian", "noise_multiplier": 0.0}, "noise_multiplier"),
    ({"type": "laplace", "noise_multiplier": -0.5}, "noise_multiplier"),
    ({"type": "pure", "epsilon": -0.5}, "epsilon"),
    ({"type": "pure", "epsilon": 0.0}, "epsilon"),
    ({"type": "poisson", "sampling_probability": 1.5, "event": {"type": "gaussian", "noise_multiplier": 1.0}},
     "sampling_rate"),
    ({"type": "poisson", "sampling_probability": -0.5, "event": {"type": "gaussian", "noise_multiplier": 1.0}},
     "sampling_rate"),
])
def test_a_recorded_event_outside_its_range_is_refused_naming_the_field(d, key):
    with pytest.raises(CvxdpError, match=f"'{key}' parameter"):
        event_from_dict(d)


def test_a_pure_event_needs_a_positive_epsilon():
    assert pure_epsilon_event(0.5) == PureEpsilonDpEvent(0.5)
    for eps in (0.0, -0.5, math.inf, math.nan):
        with pytest.raises(CvxdpError, match="'epsilon' parameter of pure_epsilon_event"):
            pure_epsilon_event(eps)


@pytest.mark.parametrize("event, key", [
    (SAMPLED(1.5, GAUSSIAN(1.0)), "sampling_probability"),
    (SAMPLED(-0.5, GAUSSIAN(1.0)), "sampling_probability"),
    (SAMPLED(0.0, GAUSSIAN(1.0)), "sampling_probability"),
    (GAUSSIAN(0.0), "noise_multiplier"),
    (GAUSSIAN(-1.0), "noise_multiplier"),
    (LAPLACE(-0.5), "noise_multiplier"),
    (GAUSSIAN(math.inf), "noise_multiplier"),
    (GAUSSIAN("1.0"), "noise_multiplier"),
])
def test_an_event_a_caller_builds_is_checked_before_it_is_composed(event, key):
    with pytest.raises(CvxdpError, match=f"'{key}' parameter"):
        event_of(event, "test")
    assert event_of(SAMPLED(1.0, GAUSSIAN(1.0)), "test") == SAMPLED(1.0, GAUSSIAN(1.0))


def test_a_step_that_touches_no_data_claims_nothing_and_is_dropped_from_the_groups():
    assert event_of(NOOP, "test") == NOOP
    assert claim_of(NOOP, "test") == (0.0, 0.0)
    assert group_events([(NOOP, 3), (LAPLACE(2.0), 2)]) == ((LAPLACE(2.0), 2),)


def test_a_zero_count_is_allowed_and_groups_to_nothing_and_a_negative_one_is_refused():
    assert checked_count(0, "test") == 0
    assert group_events([(LAPLACE(2.0), 0)]) == ()
    with pytest.raises(CvxdpError, match="'count' parameter of test"):
        checked_count(-1, "test")


def test_a_claim_is_a_pair_in_range():
    assert claim_of((0.5, 1e-6), "test") == (0.5, 1e-6)
    assert claim_of([0.0, 1.0], "test") == (0.0, 1.0)
    for bad, key in (((0.5, -0.5), "delta"), ((0.5, 1.5), "delta"), ((-0.5, 0.0), "epsilon"),
                     ((0.5, 0.1, 9), "entry"), ("ab", "entry")):
        with pytest.raises(CvxdpError, match=f"'{key}' parameter of test"):
            claim_of(bad, "test")


def test_pure_events_of_different_epsilons_stay_apart_and_near_equal_ones_keep_the_larger():
    small, large = PureEpsilonDpEvent(0.5), PureEpsilonDpEvent(1.0)
    assert group_events([(small, 1), (large, 2)]) == ((large, 2), (small, 1))
    near = PureEpsilonDpEvent(1.0 * (1 + 1e-12))
    assert group_events([(large, 1), (near, 2)]) == ((near, 3),)  # the larger epsilon: the conservative one


def test_events_merge_within_their_kind_only_whatever_order_their_sizes_interleave():
    """Sorted by kind first: a Gaussian whose multiplier falls between two near-equal Laplace ones neither merges
    with them nor keeps them apart."""
    l1, g, l2 = LAPLACE(1.0), GAUSSIAN(1.0 * (1 + 1e-12)), LAPLACE(1.0 * (1 + 2e-12))
    assert group_events([(l1, 1), (g, 1), (l2, 1)]) == ((g, 1), (l1, 2))
    assert group_events([(l2, 4), (g, 1), (l1, 1), (GAUSSIAN(3.0), 2)]) == ((g, 1), (GAUSSIAN(3.0), 2), (l1, 5))
