"""Composition (cvxdp.privacy.composition) read against dp-accounting itself: the pure-epsilon steps dp-accounting has
no event for (their RDP curve is binary randomized response's, their PLD the pessimistic one of an (epsilon, 0)
mechanism), composed any number of times, and basic composition's totals."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from cvxdp.privacy.composition import (
    basic_composition,
    pld_epsilon,
    pld_interval,
    pure_epsilon_rdp,
    rdp_accountant,
    rdp_epsilon,
)
from cvxdp.privacy.events import PureEpsilonDpEvent, group_events

ORDERS = np.array([1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 32.0, 256.0])


def randomized_response(epsilon: float, orders=ORDERS, count: int = 1) -> RdpAccountant:
    """dp-accounting's binary randomized response of ``epsilon`` (noise parameter 2 / (1 + e^eps)), replace-one."""
    acc = RdpAccountant(orders=list(orders), neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    event = dp_accounting.RandomizedResponseDpEvent(noise_parameter=2 / (1 + math.exp(epsilon)), num_buckets=2)
    acc.compose(event, count)
    return acc


@pytest.mark.parametrize("epsilon", [0.05, 0.7, 3.0])
def test_a_pure_steps_rdp_curve_is_binary_randomized_responses(epsilon):
    np.testing.assert_allclose(pure_epsilon_rdp(epsilon, ORDERS), randomized_response(epsilon)._rdp,
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("count", [1, 2, 5])
def test_pure_steps_compose_under_rdp_as_randomized_response_does(count):
    ours = rdp_accountant()
    ours.compose(dp_accounting.SelfComposedDpEvent(PureEpsilonDpEvent(0.4), count))
    reference = randomized_response(0.4, ours._orders, count)
    np.testing.assert_allclose(ours._rdp, reference._rdp, rtol=1e-12, atol=0)
    assert rdp_epsilon([(PureEpsilonDpEvent(0.4), count)], 1e-6) == pytest.approx(reference.get_epsilon(1e-6),
                                                                                  rel=1e-12)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_pure_steps_compose_under_pld_as_dp_accountings_pessimistic_pld(count):
    delta = 1e-7
    grouped = group_events([(PureEpsilonDpEvent(0.5), count)])
    step = pld_lib.from_privacy_parameters(common.DifferentialPrivacyParameters(0.5, 0.0),
                                           value_discretization_interval=pld_interval(grouped, delta))
    expected = (step.self_compose(count) if count > 1 else step).get_epsilon_for_delta(delta)
    got = pld_epsilon([(PureEpsilonDpEvent(0.5), count)], delta)
    assert got == pytest.approx(expected, rel=1e-12)
    assert 0.5 * count * 0.5 < got <= 0.5 * count * (1 + 1e-9)  # between half the sum and the sum of the epsilons


def test_pure_steps_at_delta_zero_add_up_exactly():
    assert pld_epsilon([(PureEpsilonDpEvent(0.25), 4), (dp_accounting.LaplaceDpEvent(2.0), 2)], 0.0) == 2.0
    assert pld_epsilon([(dp_accounting.GaussianDpEvent(2.0), 1)], 0.0) == math.inf


def test_basic_composition_adds_claims_and_caps_the_total_delta_at_one():
    assert basic_composition([((0.5, 0.25), 3), ((0.25, 0.0), 2)]) == (2.0, 0.75)
    assert basic_composition([((0.5, 0.4), 3)]) == (1.5, 1.0)
    assert basic_composition([]) == (0.0, 0.0)


def test_nothing_composed_spends_nothing_and_a_delta_of_one_or_more_is_refused():
    from cvxdp.errors import CvxdpError
    from cvxdp.privacy.composition import composed_epsilon

    for accountant in ("rdp", "pld"):
        assert composed_epsilon((), 1e-5, accountant) == 0.0
        assert composed_epsilon(((dp_accounting.NoOpDpEvent(), 4),), 1e-5, accountant) == 0.0
        for delta in (1.0, 1.5, -0.1):
            with pytest.raises(CvxdpError, match="'delta' parameter of composed_epsilon"):
                composed_epsilon(((dp_accounting.GaussianDpEvent(2.0), 1),), delta, accountant)


def test_the_adaptive_pld_accountant_composes_nested_events_as_pld_epsilon_does():
    from cvxdp.privacy.composition import AdaptivePLDAccountant

    g, lap = dp_accounting.GaussianDpEvent(3.0), dp_accounting.LaplaceDpEvent(4.0)
    acc = AdaptivePLDAccountant()
    acc.compose(dp_accounting.ComposedDpEvent([g, dp_accounting.SelfComposedDpEvent(lap, 3)]), 2)
    acc.compose(dp_accounting.NoOpDpEvent())
    assert acc.get_epsilon(1e-6) == pld_epsilon([(g, 2), (lap, 6)], 1e-6)
    assert acc.get_epsilon(1e-6) > pld_epsilon([(g, 2)], 1e-6)
