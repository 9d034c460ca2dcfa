"""How close the "pld" totals are to the exact epsilon, against references computed here without the module's grid:
the k-fold Gaussian mechanism in closed form (Balle & Wang 2018: k Gaussians of multiplier sigma are one of
sigma / sqrt(k)), k-fold binary randomized response (every pure epsilon-DP step's worst case) by summing its
privacy-loss distribution exactly, the Laplace mechanism's closed form, and a Poisson-subsampled Gaussian against
dp-accounting's PLD on a finer grid.

Each total must be an upper bound (the accounting is pessimistic: it may over-state what was spent, never
under-state it) and within the accuracy the module states (``cvxdp.privacy.composition``'s comment on
``PLD_RELATIVE_INTERVAL``). The cases cover the interval's three regimes: clamped to ``PLD_MIN_INTERVAL`` (a small
total), relative to the estimate, and clamped to ``PLD_MAX_INTERVAL`` (a huge total).
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from scipy import optimize, special, stats

from cvxdp.privacy.composition import PLD_MAX_INTERVAL, PLD_MIN_INTERVAL, pld_epsilon, pld_interval
from cvxdp.privacy.events import PureEpsilonDpEvent, group_events

DELTA = 1e-5


def gaussian_epsilon(multiplier: float, count: int, delta: float) -> float:
    """Exact epsilon at ``delta`` of ``count`` Gaussian mechanisms of noise multiplier ``multiplier``:
    delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2), mu = sqrt(count) / multiplier."""
    mu = math.sqrt(count) / multiplier

    def excess(eps: float) -> float:
        return (stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2))
                - delta)

    return optimize.brentq(excess, 0.0, mu * mu + 50 * mu + 50, xtol=1e-14, rtol=1e-14)


def randomized_response_epsilon(epsilon: float, count: int, delta: float) -> float:
    """Exact epsilon at ``delta`` of ``count`` binary randomized responses of ``epsilon``: the privacy loss is
    (count - 2 j) epsilon with j ~ Binomial(count, 1 / (1 + e^eps)), and delta(eps') = E[(1 - e^(eps' - loss))+]."""
    j = np.arange(count + 1)
    log_weight = (special.gammaln(count + 1) - special.gammaln(j + 1) - special.gammaln(count - j + 1)
                  - (count - j) * np.logaddexp(0.0, -epsilon) - j * np.logaddexp(0.0, epsilon))
    loss = (count - 2 * j) * epsilon

    def excess(eps: float) -> float:
        return float(np.sum(np.exp(log_weight) * np.clip(1.0 - np.exp(eps - loss), 0.0, None))) - delta

    return optimize.brentq(excess, 0.0, count * epsilon, xtol=1e-14, rtol=1e-14)


def test_the_references_agree_with_what_they_model():
    """The two exact references against facts they must meet (so that a wrong reference cannot pass a test)."""
    # one Gaussian of multiplier sigma at delta: the classical bound sigma >= sqrt(2 ln(1.25 / delta)) / eps
    # holds for eps < 1, so the exact epsilon is at most that bound's
    assert gaussian_epsilon(20.0, 1, DELTA) <= math.sqrt(2 * math.log(1.25 / DELTA)) / 20.0
    # four Gaussians of multiplier 2 are one of multiplier 1
    assert gaussian_epsilon(2.0, 4, DELTA) == pytest.approx(gaussian_epsilon(1.0, 1, DELTA), rel=1e-12)
    # one randomized response of epsilon spends epsilon (at any delta small enough to need it all) ...
    assert randomized_response_epsilon(0.7, 1, 1e-9) == pytest.approx(0.7, rel=1e-6)
    # ... and k of them less than k epsilon at delta > 0 (advanced composition's point)
    assert randomized_response_epsilon(0.1, 400, DELTA) < 0.5 * 400 * 0.1


@pytest.mark.parametrize(("multiplier", "count"), [
    (100.0, 1),     # a total of 0.027: the interval clamped to PLD_MIN_INTERVAL
    (1.0, 1), (5.0, 10), (1.0, 100), (0.3, 50),
    (0.06, 2000),   # a total of 2.8e5: the interval clamped to PLD_MAX_INTERVAL
])
def test_gaussian_totals_are_upper_bounds_within_1e_5_of_the_exact_epsilon(multiplier, count):
    event = dp_accounting.GaussianDpEvent(multiplier)
    exact = gaussian_epsilon(multiplier, count, DELTA)
    got = pld_epsilon([(event, count)], DELTA)
    assert exact <= got <= exact * (1 + 1e-5), (got, exact, got / exact - 1)


def test_a_tiny_delta_keeps_the_gaussian_total_an_upper_bound_within_1e_4():
    # below delta 1e-12 the grid is sized at 1e-12 (measured: 2.7e-5 above the exact epsilon at 1e-13; at 1e-15,
    # dp-accounting's truncated tail puts it 5.7e-3 above, outside the stated accuracy)
    exact = gaussian_epsilon(2.0, 5, 1e-13)
    got = pld_epsilon([(dp_accounting.GaussianDpEvent(2.0), 5)], 1e-13)
    assert exact <= got <= exact * (1 + 1e-4), (got, exact, got / exact - 1)


def test_the_cases_reach_both_clamps_of_the_interval():
    small = pld_interval(group_events([(dp_accounting.GaussianDpEvent(100.0), 1)]), DELTA)
    large = pld_interval(group_events([(dp_accounting.GaussianDpEvent(0.06), 2000)]), DELTA)
    assert small == PLD_MIN_INTERVAL and large == PLD_MAX_INTERVAL


@pytest.mark.parametrize(("epsilon", "count"), [(0.1, 1), (0.1, 100), (1.0, 30), (0.01, 500), (2.0, 3)])
def test_pure_epsilon_totals_are_upper_bounds_within_1e_3_of_the_exact_composition(epsilon, count):
    exact = randomized_response_epsilon(epsilon, count, DELTA)
    got = pld_epsilon([(PureEpsilonDpEvent(epsilon), count)], DELTA)
    assert exact * (1 - 1e-9) <= got <= exact * (1 + 1e-3), (got, exact, got / exact - 1)


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 4.0])
def test_one_laplace_release_is_within_1e_3_of_its_closed_form(epsilon):
    # the Laplace mechanism of epsilon: delta(eps') = 1 - exp((eps' - epsilon) / 2) for 0 <= eps' <= epsilon
    # (measured: within 1e-10 at delta 1e-3; 1e-4 at delta 1e-5 and epsilon 4, dp-accounting's truncated tail)
    for delta in (1e-3, DELTA):
        exact = epsilon + 2 * math.log1p(-delta)
        got = pld_epsilon([(dp_accounting.LaplaceDpEvent(1 / epsilon), 1)], delta)
        assert exact <= got <= exact * (1 + 1e-3), (got, exact)


@pytest.mark.parametrize(("multiplier", "rate", "count"), [(1.0, 0.05, 200), (2.0, 0.01, 1000), (0.8, 0.1, 20)])
def test_subsampled_gaussian_totals_are_within_2e_3_of_a_finer_grid(multiplier, rate, count):
    # the reference's grid: 1e-4, 7 to 67 times finer than the module's (6.9e-4 to 6.7e-3 for these cases)
    event = dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(multiplier))
    finer = PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
    finer.compose(event, count)
    reference = finer.get_epsilon(DELTA)
    got = pld_epsilon([(event, count)], DELTA)
    assert reference <= got <= reference * (1 + 2e-3), (got, reference, got / reference - 1)
