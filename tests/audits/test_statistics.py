"""The audits' statistics (cvxdp.audits.statistics) at their edges: the lower bound on epsilon recomputed here from
its definition with SciPy's beta quantiles (Bonferroni over 4 tests per threshold), the default thresholds, the
argument checks by name, the result's fields and the reductions of a node's release."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from cvxdp.audits.statistics import (
    DEFAULT_QUANTILES,
    AuditResult,
    clopper_pearson_lower,
    empirical_epsilon,
    fixed_sampler,
    rounds_ratio,
    two_statistics,
)
from cvxdp.errors import InvalidParameterError


def lower_bound_by_hand(x: np.ndarray, y: np.ndarray, thresholds: np.ndarray, alpha: float, delta: float) -> float:
    """max over thresholds t, events {> t} and {< t} and both directions of log((p_lo - delta) / p'_hi), with
    one-sided Clopper-Pearson bounds at level alpha / (4 * len(thresholds)); 0 when none is positive."""
    n, level, best = x.size, alpha / (4 * len(thresholds)), 0.0
    for t in thresholds:
        for a, b in ((x, y), (y, x)):
            for k, k_prime in ((np.sum(a > t), np.sum(b > t)), (np.sum(a < t), np.sum(b < t))):
                p_lo = stats.beta.ppf(level, k, n - k + 1) if k > 0 else 0.0
                q_hi = stats.beta.ppf(1 - level, k_prime + 1, n - k_prime) if k_prime < n else 1.0
                if p_lo > delta:
                    best = max(best, math.log((p_lo - delta) / q_hi))
    return best


@pytest.fixture(scope="module")
def shifted_samples():
    """Outputs of a Laplace mechanism of epsilon 1 on D and D' (means 0 and 1), 20,000 each."""
    rng = np.random.default_rng(11)
    return rng.laplace(0.0, 1.0, 20_000), rng.laplace(1.0, 1.0, 20_000)


@pytest.mark.parametrize(("alpha", "delta"), [(0.05, 0.0), (0.2, 1e-3)])
def test_the_lower_bound_is_its_definition_with_four_tests_per_threshold(shifted_samples, alpha, delta):
    x, y = shifted_samples
    thresholds = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    res = empirical_epsilon(fixed_sampler(x), fixed_sampler(y), trials=x.size, delta=delta, alpha=alpha,
                            thresholds=thresholds, rng=np.random.default_rng(0), claimed=1.0)
    expected = lower_bound_by_hand(x, y, thresholds, alpha, delta)
    assert expected > 0.5  # a strong signal, so that the level matters in the digits compared
    assert res.epsilon_lower == pytest.approx(expected, rel=1e-10)
    assert res.delta == delta and res.alpha == alpha and res.trials == x.size


def test_the_default_thresholds_are_the_documented_quantiles_of_the_pooled_outputs(shifted_samples):
    tails = [1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.02, 0.05]
    documented = sorted({*tails, *np.round(np.arange(0.1, 0.9 + 1e-9, 0.05), 12), *(1 - np.array(tails))})
    np.testing.assert_allclose(DEFAULT_QUANTILES, documented, rtol=0, atol=1e-12)
    x, y = shifted_samples
    rng = np.random.default_rng(0)
    default = empirical_epsilon(fixed_sampler(x), fixed_sampler(y), trials=x.size, rng=rng)
    explicit = empirical_epsilon(fixed_sampler(x), fixed_sampler(y), trials=x.size, rng=rng,
                                 thresholds=np.quantile(np.concatenate([x, y]), documented))
    assert default.epsilon_lower > 0
    assert default.epsilon_lower == pytest.approx(explicit.epsilon_lower, rel=1e-12)
    assert default.counts == explicit.counts


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("delta", -0.1, r"'delta' parameter of empirical_epsilon must be a float in \[0, 1\)"),
    ("delta", 1.0, r"'delta' parameter of empirical_epsilon must be a float in \[0, 1\)"),
    ("alpha", 0.0, r"'alpha' parameter of empirical_epsilon must be a float in \(0, 1\)"),
    ("alpha", 1.0, r"'alpha' parameter of empirical_epsilon must be a float in \(0, 1\)"),
    ("claimed", -0.5, r"'claimed' parameter of empirical_epsilon must be a float in \[0, inf\)"),
])
def test_delta_alpha_and_the_claim_are_checked_by_name(name, value, expected):
    same = fixed_sampler(np.zeros(10))
    with pytest.raises(InvalidParameterError, match=expected):
        empirical_epsilon(same, same, trials=10, rng=np.random.default_rng(0), **{name: value})


@pytest.mark.parametrize("thresholds", [[], [0.0, np.nan], [np.inf]])
def test_thresholds_must_be_a_non_empty_array_of_finite_floats(thresholds):
    same = fixed_sampler(np.zeros(10))
    with pytest.raises(InvalidParameterError, match="'thresholds' parameter of empirical_epsilon must be a "
                                                    "non-empty array of finite floats"):
        empirical_epsilon(same, same, trials=10, rng=np.random.default_rng(0), thresholds=np.array(thresholds))


def test_a_bound_equal_to_the_claim_does_not_refute_it():
    assert not AuditResult(1.5, 1.5, 0.0).violated
    assert AuditResult(1.5 + 1e-12, 1.5, 0.0).violated
    assert not AuditResult(9.0, None, 0.0).violated  # nothing claimed, nothing refuted


def test_an_audit_result_is_immutable_and_its_defaults_are_empty():
    res = AuditResult(0.0, None, None)
    assert (res.counts, res.trials, res.delta, res.alpha, res.statistic, res.details) == ({}, 0, 0.0, 0.05, None, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.epsilon_lower = 2.0  # type: ignore[misc]


def test_two_statistics_options_are_keyword_only():
    out = np.zeros(10)
    with pytest.raises(TypeError):
        two_statistics(out, out, out, 0.0, 0.05, 1.0, 0, {})  # type: ignore[misc]


def test_rounds_ratio_is_the_second_release_over_the_first_and_zero_where_the_first_is():
    profiles = np.array([[2.0, 0.0, -4.0, 1.0], [3.0, 7.0, 2.0, 5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero on the way
        np.testing.assert_array_equal(rounds_ratio(profiles), [1.5, 0.0, -0.5, 5.0])


def test_one_hit_has_a_positive_lower_bound_and_none_has_zero():
    k = np.array([0, 1, 2])
    np.testing.assert_allclose(clopper_pearson_lower(k, 50, 0.01),
                               [0.0, stats.beta.ppf(0.01, 1, 50), stats.beta.ppf(0.01, 2, 49)], rtol=1e-12)
    assert clopper_pearson_lower(k, 50, 0.01)[1] > 0


def test_two_statistics_names_no_statistic_when_nothing_is_refuted():
    rng = np.random.default_rng(3)
    out, ref = rng.normal(size=2_000), rng.normal(size=2_000)
    res = two_statistics(out, out.copy(), ref, delta=0.0, alpha=0.05, claimed=1.0, seed=0, details={"k": 1})
    assert res.epsilon_lower == 0.0 and res.statistic is None and not res.violated
    assert res.details == {"k": 1, "statistics": {"output": 0.0, "difference": 0.0}}
    shifted = two_statistics(out, out + 3.0, ref, delta=0.0, alpha=0.05, claimed=1.0, seed=0, details={})
    assert shifted.statistic in ("output", "difference") and shifted.violated


def test_one_threshold_is_enough(shifted_samples):
    x, y = shifted_samples
    res = empirical_epsilon(fixed_sampler(x), fixed_sampler(y), trials=x.size, thresholds=np.array([2.0]),
                            rng=np.random.default_rng(0))
    assert res.best_threshold == 2.0
    assert res.epsilon_lower == pytest.approx(lower_bound_by_hand(x, y, np.array([2.0]), 0.05, 0.0), rel=1e-10)


def test_two_statistics_spends_alpha_over_its_statistics(shifted_samples):
    x, y = shifted_samples
    ref = np.random.default_rng(5).laplace(0.0, 1.0, x.size)
    res = two_statistics(x, y, ref, delta=0.0, alpha=0.1, claimed=0.5, seed=0, details={})
    for name, (a, b) in {"output": (x, y), "difference": (x - ref, y - ref)}.items():
        thresholds = np.unique(np.quantile(np.concatenate([a, b]), DEFAULT_QUANTILES))
        assert res.details["statistics"][name] == pytest.approx(
            lower_bound_by_hand(a, b, thresholds, 0.1 / 2, 0.0), rel=1e-10)
    assert res.epsilon_lower == max(res.details["statistics"].values()) and res.alpha == 0.1


def test_one_trial_is_enough():
    res = empirical_epsilon(fixed_sampler(np.zeros(1)), fixed_sampler(np.ones(1)), trials=1,
                            rng=np.random.default_rng(0))
    assert res.epsilon_lower == 0.0 and res.trials == 1
