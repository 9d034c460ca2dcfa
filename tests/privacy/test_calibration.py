"""Noise calibration: Laplace, classic and analytic Gaussian, total-budget calibration (SPEC §2.1, §2.2)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from scipy import stats

from cvxdp.errors import InvalidParameterError
from cvxdp.privacy import (
    calibrate_to_total,
    gaussian_epsilon,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_scale,
    per_step_scale,
    total_epsilon,
)


def profile(sigma: float, sens: float, eps: float) -> float:
    """Balle & Wang's defining delta(sigma), written independently of the module (plain norm.cdf)."""
    a = sens / (2 * sigma) - eps * sigma / sens
    b = -sens / (2 * sigma) - eps * sigma / sens
    return stats.norm.cdf(a) - math.exp(eps) * stats.norm.cdf(b)


def test_laplace_scale_is_sensitivity_over_epsilon():
    assert laplace_scale(2.0, 0.5) == pytest.approx(4.0)
    assert laplace_scale(0.3, 3.0) == pytest.approx(0.1)


def test_classic_gaussian_formula():
    got = gaussian_sigma_classic(2.0, 0.5, 1e-5)
    assert got == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5, rel=1e-12)


@pytest.mark.parametrize("eps", [1.0, 2.5])
def test_classic_gaussian_refuses_large_epsilon(eps):
    with pytest.raises(InvalidParameterError, match='calibration="analytic"'):
        gaussian_sigma_classic(1.0, eps, 1e-5)


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.99, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 1e-2])
@pytest.mark.parametrize("sens", [0.01, 1.0, 7.0])
def test_analytic_gaussian_solves_defining_equation(eps, delta, sens):
    sigma = gaussian_sigma_analytic(sens, eps, delta)
    assert profile(sigma, sens, eps) <= delta * (1 + 1e-9)
    assert profile(sigma, sens, eps) == pytest.approx(delta, rel=1e-7)
    # smallest such sigma: a relative 1e-9 less noise already breaks the bound (or sits at it)
    assert profile(sigma * (1 - 1e-6), sens, eps) > delta


@pytest.mark.parametrize("eps", [0.05, 0.3, 0.9])
def test_analytic_gaussian_below_classic(eps):
    assert gaussian_sigma_analytic(1.0, eps, 1e-5) < gaussian_sigma_classic(1.0, eps, 1e-5)


def test_analytic_gaussian_agrees_with_dp_accounting():
    for eps, delta in [(0.5, 1e-5), (1.0, 1e-6), (4.0, 1e-3)]:
        ours = gaussian_sigma_analytic(1.0, eps, delta)
        theirs = dp_accounting.get_sigma_gaussian(eps, delta)
        assert ours == pytest.approx(theirs, rel=1e-6)
        assert gaussian_epsilon(1.0, ours, delta) == pytest.approx(eps, rel=1e-6)


def test_analytic_gaussian_scales_with_sensitivity():
    assert gaussian_sigma_analytic(3.0, 0.7, 1e-5) == pytest.approx(3 * gaussian_sigma_analytic(1.0, 0.7, 1e-5),
                                                                    rel=1e-10)


@pytest.mark.parametrize("call", [
    lambda: laplace_scale(0.0, 1.0), lambda: laplace_scale(1.0, -1.0),
    lambda: gaussian_sigma_analytic(1.0, 1.0, 0.0), lambda: gaussian_sigma_analytic(1.0, 1.0, 1.0),
    lambda: gaussian_sigma_classic(1.0, 0.5, 1.5), lambda: per_step_scale("gaussian", 1.0, 1.0, None),
    lambda: per_step_scale("cauchy", 1.0, 1.0, None),
])
def test_bad_parameters_raise(call):
    with pytest.raises(InvalidParameterError):
        call()


def test_uniform_message():
    with pytest.raises(InvalidParameterError,
                       match=r"The 'epsilon' parameter of laplace_scale must be a float in \(0, inf\)\. Got -1"):
        laplace_scale(1.0, -1.0)


# ------------------------------------------------------------------ total budget
def test_basic_total_splits_evenly():
    assert calibrate_to_total("laplace", 2.0, 1.0, None, 10, "basic") == pytest.approx(20.0)
    sigma = calibrate_to_total("gaussian", 2.0, 1.0, 1e-5, 10, "basic")
    assert sigma == pytest.approx(gaussian_sigma_analytic(2.0, 0.1, 1e-6), rel=1e-12)
    classic = calibrate_to_total("gaussian", 2.0, 1.0, 1e-5, 10, "basic", calibration="classic")
    assert classic == pytest.approx(gaussian_sigma_classic(2.0, 0.1, 1e-6), rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("steps", [1, 50, 400])
def test_total_calibration_meets_target_tightly(noise, accountant, steps):
    eps, delta, sens = 2.0, 1e-5, 0.5
    scale = calibrate_to_total(noise, sens, eps, delta, steps, accountant)
    got, _ = total_epsilon(noise, scale, sens, steps, delta, accountant)
    assert got <= eps
    assert got == pytest.approx(eps, rel=1e-4)
    # and it is the same as asking dp-accounting's own accountant (up to PLD discretisation)
    event = dp_accounting.SelfComposedDpEvent(
        (dp_accounting.LaplaceDpEvent if noise == "laplace" else dp_accounting.GaussianDpEvent)(scale / sens), steps)
    own = (dp_accounting.rdp.RdpAccountant() if accountant == "rdp" else dp_accounting.pld.PLDAccountant(
        value_discretization_interval=1e-3))
    assert own.compose(event).get_epsilon(delta) == pytest.approx(eps, rel=5e-3)


def test_tighter_accountants_need_less_noise():
    for noise in ("laplace", "gaussian"):
        scales = {acc: calibrate_to_total(noise, 1.0, 1.0, 1e-5, 200, acc) for acc in ("basic", "rdp", "pld")}
        assert scales["pld"] <= scales["rdp"] <= scales["basic"]


def test_pure_laplace_total_under_pld_is_basic_split():
    assert calibrate_to_total("laplace", 1.0, 2.0, None, 20, "pld") == pytest.approx(10.0, rel=1e-6)


def test_laplace_rdp_needs_positive_delta():
    with pytest.raises(InvalidParameterError, match="RDP"):
        calibrate_to_total("laplace", 1.0, 1.0, None, 10, "rdp")


def test_gaussian_total_needs_delta():
    with pytest.raises(InvalidParameterError, match="delta"):
        calibrate_to_total("gaussian", 1.0, 1.0, None, 10, "pld")


def test_total_epsilon_basic_gaussian_splits_delta():
    sigma = gaussian_sigma_analytic(1.0, 0.2, 1e-6)
    eps, delta = total_epsilon("gaussian", sigma, 1.0, 10, 1e-5, "basic")
    assert eps == pytest.approx(2.0, rel=1e-6) and delta == 1e-5


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 1e-2])
def test_the_analytic_ratio_meets_delta_in_its_own_arithmetic(eps, delta):
    """The root is moved up ulp by ulp until the profile, as the module computes it, is at most delta: the noise is
    never a rounding error short of the target."""
    from cvxdp.privacy import calibration

    log_ratio = calibration._analytic_log_ratio.__wrapped__(eps, delta)  # solved here, not read from the cache
    assert calibration.gaussian_log_delta(math.exp(log_ratio), eps) <= math.log(delta)
    assert calibration.gaussian_log_delta(math.exp(np.nextafter(log_ratio, -math.inf)), eps) > math.log(delta) - 1e-9


def test_a_sampling_rate_of_one_is_no_sampling():
    from cvxdp.privacy import step_epsilon

    for noise, delta in (("laplace", None), ("gaussian", 1e-5)):
        plain = calibrate_to_total(noise, 1.0, 2.0, delta, 30, "pld")
        assert calibrate_to_total(noise, 1.0, 2.0, delta, 30, "pld", sampling_rate=1.0) == plain
        assert total_epsilon(noise, plain, 1.0, 30, delta, "basic", sampling_rate=1.0) == total_epsilon(
            noise, plain, 1.0, 30, delta, "basic")
    assert step_epsilon("gaussian", 1.0, 3.0, 1e-5, sampling_rate=1.0) == step_epsilon("gaussian", 1.0, 3.0, 1e-5)
    assert step_epsilon("laplace", 1.0, 4.0, 0.0, sampling_rate=1.0) == 0.25


def test_basic_laplace_totals_are_pure_and_the_inverse_checks_its_arguments():
    assert total_epsilon("laplace", 4.0, 2.0, 10, None, "basic") == (5.0, 0.0)
    with pytest.raises(InvalidParameterError, match="'sensitivity' parameter of gaussian_epsilon"):
        gaussian_epsilon(0.0, 1.0, 1e-5)


def test_the_last_bit_check_raises_the_scale_until_the_recorded_plan_meets_the_target(monkeypatch):
    """``calibrate_to_total`` checks the plan the engine will record and raises the scale while its composed epsilon
    is above the target (a cached multiplier a hair too small is made to need it here)."""
    from cvxdp.privacy import calibration

    exact = calibration._calibrated_multiplier("gaussian", 2.0, 1e-5, 50, "pld", None)
    monkeypatch.setattr(calibration, "_calibrated_multiplier", lambda *a: exact * (1 - 1e-9))
    scale = calibrate_to_total("gaussian", 0.5, 2.0, 1e-5, 50, "pld")
    assert exact * 0.5 * (1 - 1e-9) < scale <= exact * 0.5 * (1 + 1e-9)
    assert total_epsilon("gaussian", scale, 0.5, 50, 1e-5, "pld")[0] <= 2.0


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("steps", [1, 50])
def test_the_total_calibration_is_the_least_noise_to_a_relative_1e_7(noise, steps):
    """Calibrated under PLD to 1e-8 relative: a scale 1e-7 smaller already exceeds the target."""
    from cvxdp.privacy import calibration

    calibration._calibrated_multiplier.cache_clear()  # calibrated here, not read from the cache
    delta = 1e-5 if noise == "gaussian" else None
    scale = calibrate_to_total(noise, 0.5, 2.0, delta, steps, "pld")
    assert total_epsilon(noise, scale, 0.5, steps, delta, "pld")[0] <= 2.0
    assert total_epsilon(noise, scale * (1 - 1e-7), 0.5, steps, delta, "pld")[0] > 2.0


def test_the_gaussian_profile_is_zero_where_it_underflows():
    """Far past any useful noise (sigma 1000 times the sensitivity, epsilon 1000) delta is below every float: log 0."""
    from cvxdp.privacy.calibration import gaussian_log_delta

    assert gaussian_log_delta(1000.0, 1000.0) == -math.inf
    assert -math.inf < gaussian_log_delta(3.0, 1.0) < 0.0


@pytest.mark.parametrize("call, match", [
    (lambda: gaussian_epsilon(1.0, 1.0, 0.0), "'delta' parameter of gaussian_epsilon"),
    (lambda: calibrate_to_total("laplace", 0.0, 1.0, None, 10, "basic"), "'sensitivity' parameter of calibrate"),
    (lambda: calibrate_to_total("laplace", 1.0, 1.0, None, 0, "basic"), "'steps' parameter of calibrate_to_total"),
    (lambda: calibrate_to_total("laplace", 1.0, 1.0, -0.5, 10, "basic"), "'delta' parameter of calibrate_to_total"),
    (lambda: calibrate_to_total("laplace", 1.0, 1.0, 1.0, 10, "basic"), "'delta' parameter of calibrate_to_total"),
    (lambda: calibrate_to_total("gaussian", 1.0, 1.0, 0.0, 10, "pld"), "'delta' parameter of calibrate_to_total"),
    (lambda: total_epsilon("laplace", 0.0, 1.0, 10, None, "basic"), "'scale' parameter of total_epsilon"),
    (lambda: total_epsilon("gaussian", 1.0, 1.0, 10, 1e-5, "pld", sampling_rate=1.5), "'sampling_rate' parameter of total"),
    (lambda: calibrate_to_total("laplace", 1.0, 0.0, None, 10, "basic"), "'epsilon' parameter of calibrate_to_total"),
    (lambda: gaussian_epsilon(1.0, 0.0, 1e-5), "'sigma' parameter of gaussian_epsilon"),
    (lambda: gaussian_epsilon(1.0, 1.0, 1.0), "'delta' parameter of gaussian_epsilon"),
    (lambda: gaussian_sigma_classic(1.0, 0.5, 0.0), "'delta' parameter of gaussian_sigma_classic"),
])
def test_the_total_budget_functions_refuse_bad_arguments_by_name(call, match):
    with pytest.raises(InvalidParameterError, match=match):
        call()


def test_the_totals_scale_with_the_sensitivity():
    """Only the multiplier scale / sensitivity matters: twice the noise on twice the sensitivity spends the same, under
    basic composition and with subsampling (the calibrations' own tests use a sensitivity of 1)."""
    sigma = gaussian_sigma_analytic(1.0, 0.2, 1e-6)
    assert total_epsilon("gaussian", 2 * sigma, 2.0, 10, 1e-5, "basic")[0] == pytest.approx(2.0, rel=1e-6)
    sampled = calibrate_to_total("gaussian", 0.5, 1.0, 1e-5, 40, "pld", sampling_rate=0.1)
    eps, _ = total_epsilon("gaussian", sampled, 0.5, 40, 1e-5, "pld", sampling_rate=0.1)
    assert 0.99 < eps <= 1.0
