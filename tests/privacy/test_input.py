"""One-shot input perturbation (cvxdp.privacy.input): calibration, DP event and errors (issue 39)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from cvxdp.errors import InvalidParameterError
from cvxdp.privacy import InputPerturbation, gaussian_sigma_analytic


def test_laplace_scale_is_l1_sensitivity_over_epsilon_and_the_event_says_so():
    mech = InputPerturbation("laplace", 0.5)
    noisy, release = mech.perturb(np.zeros(4), l1=0.2, l2=0.14, rng=np.random.default_rng(0))
    assert release.scale == pytest.approx(0.4) and release.sensitivity == 0.2
    assert isinstance(release.event, dp_accounting.LaplaceDpEvent)
    assert release.event.noise_multiplier == pytest.approx(2.0)  # 1 / epsilon
    assert (release.epsilon, release.delta) == (0.5, 0.0)
    assert noisy.shape == (4,) and np.all(noisy != 0.0)
    assert mech.pld_epsilon(0.2, 0.14) == pytest.approx(0.5, rel=1e-6)


def test_gaussian_scale_is_the_analytic_calibration_of_the_l2_sensitivity():
    mech = InputPerturbation("gaussian", 1.0, 1e-5)
    _, release = mech.perturb(np.ones(3), l1=0.2, l2=math.sqrt(2) * 0.1, rng=np.random.default_rng(0))
    assert release.scale == pytest.approx(gaussian_sigma_analytic(math.sqrt(2) * 0.1, 1.0, 1e-5))
    assert isinstance(release.event, dp_accounting.GaussianDpEvent)
    assert (release.epsilon, release.delta) == (1.0, 1e-5)
    assert mech.pld_epsilon(0.2, math.sqrt(2) * 0.1) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_noise_has_the_calibrated_spread(noise):
    """The noise drawn is the noise claimed: E|Laplace(b)| = b, std(Gaussian(sigma)) = sigma (200,000 draws: the
    estimates' relative error is about 0.002; noise drawn at half its scale is off by 50 %)."""
    mech = InputPerturbation(noise, 1.0, 1e-5 if noise == "gaussian" else None)
    noisy, release = mech.perturb(np.zeros(200_000), l1=0.3, l2=0.4, rng=np.random.default_rng(1))
    assert release.scale == pytest.approx(mech.scale(0.3, 0.4))
    spread = np.mean(np.abs(noisy)) if noise == "laplace" else np.std(noisy)
    assert spread == pytest.approx(release.scale, rel=0.02)
    assert abs(np.mean(noisy)) < 0.01 * release.scale


def test_the_same_generator_state_gives_the_same_release():
    mech = InputPerturbation("gaussian", 2.0, 1e-6)
    a = mech.perturb(np.arange(5.0), l1=1.0, l2=1.0, rng=np.random.default_rng(3))[0]
    b = mech.perturb(np.arange(5.0), l1=1.0, l2=1.0, rng=np.random.default_rng(3))[0]
    assert np.array_equal(a, b)


@pytest.mark.parametrize("kwargs, match", [
    ({"noise": "uniform", "epsilon": 1.0}, "'noise'"),
    ({"noise": "laplace", "epsilon": 0.0}, "'epsilon'"),
    ({"noise": "gaussian", "epsilon": 1.0}, "'delta'"),
    ({"noise": "gaussian", "epsilon": 1.0, "delta": 1.5}, "'delta'"),
    ({"noise": "gaussian", "epsilon": 1.0, "delta": 0.0}, "'delta'"),
])
def test_bad_parameters_are_refused_by_name(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        InputPerturbation(**kwargs)


def test_a_zero_sensitivity_is_refused():
    with pytest.raises(InvalidParameterError, match="'l1'"):
        InputPerturbation("laplace", 1.0).perturb(np.zeros(2), l1=0.0, l2=1.0, rng=np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="'l2'"):
        InputPerturbation("gaussian", 1.0, 1e-5).perturb(np.zeros(2), l1=1.0, l2=0.0, rng=np.random.default_rng(0))


def test_the_mechanism_is_named_and_frozen():
    import dataclasses

    laplace, gaussian = InputPerturbation("laplace", 1.0), InputPerturbation("gaussian", 1.0, 1e-5)
    assert (laplace.name, gaussian.name) == ("InL", "InG")
    with pytest.raises(dataclasses.FrozenInstanceError):
        laplace.epsilon = 100.0  # the claim cannot change after the noise is drawn
    _, release = laplace.perturb(np.zeros(2), l1=1.0, l2=1.0, rng=np.random.default_rng(0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.epsilon = 0.0  # nor what a release spent
