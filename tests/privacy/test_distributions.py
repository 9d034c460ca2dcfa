"""Noise as a type: the registry, each distribution's claim, event, samples and audit statistic, and a third
distribution defined here that runs end to end with no other file edited (docs/architecture.md, "Adding a noise
distribution")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import cvxpy as cp
import dp_accounting
import numpy as np
import pytest
from scipy import stats

import cvxdp
from cvxdp.errors import InvalidParameterError
from cvxdp.privacy import (
    Gaussian,
    InputPerturbation,
    Laplace,
    Noise,
    NoisePlan,
    calibrate_to_total,
    distributions,
    make_mechanism,
    per_step_scale,
    step_epsilon,
    total_epsilon,
)


def test_the_registry_finds_each_distribution_by_its_name_and_refuses_others_by_name():
    assert Noise.from_name("laplace") == Laplace() and Noise.from_name("gaussian") == Gaussian()
    assert distributions.names() == ("laplace", "gaussian")
    with pytest.raises(InvalidParameterError, match=r"'noise' parameter of NoisePlan must be one of 'laplace', "
                       r"'gaussian' \(did you mean 'gaussian'\?\)\. Got 'gausian'"):
        Noise.from_name("gausian", "NoisePlan")
    with pytest.raises(InvalidParameterError, match="'noise' parameter of per_step_scale"):
        per_step_scale("uniform", 1.0, 1.0, None)


def test_a_taken_name_or_letter_or_a_missing_norm_is_refused():
    @dataclass(frozen=True)
    class Other(Laplace):
        name: ClassVar[str] = "other"

    @dataclass(frozen=True)
    class NoNorm(Laplace):
        name: ClassVar[str] = "nonorm"
        letter: ClassVar[str] = "N"
        norm: ClassVar[int] = 3

    @dataclass(frozen=True)
    class Unset(Noise):  # a distribution that forgot its norm
        name: ClassVar[str] = "unset"
        letter: ClassVar[str] = "U"

    @dataclass(frozen=True)
    class Unlettered(Noise):  # a name and a norm, but no letter for its mechanisms' short names
        name: ClassVar[str] = "unlettered"
        norm: ClassVar[int] = 1

    with pytest.raises(InvalidParameterError, match="norm of 1 or 2"):
        distributions.register(Unset())
    with pytest.raises(InvalidParameterError, match="a name, a letter"):
        distributions.register(Unlettered())
    with pytest.raises(InvalidParameterError, match="letter 'L' is already registered"):
        distributions.register(Other())
    with pytest.raises(InvalidParameterError, match="norm of 1 or 2"):
        distributions.register(NoNorm())
    with pytest.raises(InvalidParameterError, match="already registered"):
        distributions.register(Gaussian())
    assert distributions.names() == ("laplace", "gaussian")


def test_a_distribution_is_a_frozen_value_and_not_pure_unless_it_says_so():
    """Instances hold no state: two of one class are equal (and hash alike), none can be changed; a subclass that
    does not say ``pure`` is not (its claims carry a delta)."""
    import dataclasses

    class Plain(Noise):  # no decorator of its own: it inherits the frozen value semantics
        name: ClassVar[str] = "plain"

    for cls in (Laplace, Gaussian, Plain):
        assert cls() == cls() and hash(cls()) == hash(cls())
    for cls in (Laplace, Gaussian):  # (a subclass is frozen when it is a frozen dataclass itself, as these are)
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().scale_factor = 2.0
    assert Laplace() != Gaussian()
    assert Plain.pure is False and Laplace.pure is True and Gaussian.pure is False


@pytest.mark.parametrize("bad", [["laplace"], {"laplace": 1}, None, 1])
def test_a_name_that_is_not_a_string_is_refused_by_name(bad):
    with pytest.raises(InvalidParameterError, match="'noise' parameter of NoisePlan must be one of"):
        Noise.from_name(bad, "NoisePlan")


def test_only_a_noise_instance_can_be_registered():
    for bad in ("laplace", Laplace, 1.0):
        with pytest.raises(InvalidParameterError, match="a Noise instance"):
            distributions.register(bad)
    assert distributions.names() == ("laplace", "gaussian")


@pytest.mark.parametrize("sens", [0.3, 2.0])
def test_the_claim_of_the_scale_for_a_claim_is_that_claim(sens):
    assert Laplace().scale(sens, 0.5, None) == sens / 0.5
    assert Laplace().epsilon(sens, Laplace().scale(sens, 0.5, None), 0.0) == pytest.approx(0.5, rel=1e-15)
    sigma = Gaussian().scale(sens, 0.8, 1e-5)
    assert Gaussian().epsilon(sens, sigma, 1e-5) == pytest.approx(0.8, rel=1e-6)
    assert Gaussian().scale(sens, 0.5, 1e-5, "classic") == sens * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    with pytest.raises(InvalidParameterError, match="needs a delta"):
        Gaussian().scale(sens, 0.5, None)


def test_the_norms_letters_and_deltas_of_a_claim():
    assert (Laplace.norm, Laplace.letter, Laplace.pure) == (1, "L", True)
    assert (Gaussian.norm, Gaussian.letter, Gaussian.pure) == (2, "G", False)
    assert Laplace().claim_delta(1e-3) == 0.0 and Gaussian().claim_delta(1e-3) == 1e-3
    assert Gaussian().step_refusal(1.0, "classic") is not None and Gaussian().step_refusal(0.9, "classic") is None
    assert Gaussian().step_refusal(5.0, "analytic") is None and Laplace().step_refusal(5.0, "classic") is None


def test_the_events_are_dp_accountings_of_the_multiplier():
    assert Laplace().event(2) == dp_accounting.LaplaceDpEvent(noise_multiplier=2.0)
    assert Gaussian().event(0.7) == dp_accounting.GaussianDpEvent(noise_multiplier=0.7)
    assert isinstance(Laplace().event(2).noise_multiplier, float)


def test_basic_composition_sums_the_steps_with_delta_split():
    assert Laplace().basic_epsilon(2.0, 4.0, 10, 0.0) == 10 * 2.0 / 4.0
    got = Gaussian().basic_epsilon(1.0, 3.0, 10, 1e-5)
    assert got == 10 * float(dp_accounting.get_epsilon_gaussian(3.0, 1e-6))


def test_samples_are_the_callers_generators_draws_with_the_stated_spread():
    for noise, draw in ((Laplace(), np.random.default_rng(3).laplace(0.0, 1.5, (4, 2))),
                        (Gaussian(), np.random.default_rng(3).normal(0.0, 1.5, (4, 2)))):
        rng = np.random.default_rng(3)
        assert np.array_equal(noise.sample(rng, 1.5, (4, 2)), draw)
        big = noise.sample(np.random.default_rng(4), 1.5, 200_000)
        assert np.var(big) == pytest.approx(noise.variance(1.5), rel=0.02)
        assert noise.std(1.5) == pytest.approx(math.sqrt(noise.variance(1.5)), rel=1e-15)
    assert Laplace().variance(1.5) == 2 * 1.5 ** 2 and Gaussian().std(1.5) == 1.5


def test_the_audit_statistic_is_the_log_likelihood_ratio_or_monotone_in_it():
    rng = np.random.default_rng(0)
    x, xp = np.array([0.3, -1.0, 2.0]), np.array([0.1, -0.5, 2.4])
    b = 0.7
    for y in rng.normal(0.0, 2.0, (5, 3)):
        llr = np.sum(stats.laplace.logpdf(y, x, b) - stats.laplace.logpdf(y, xp, b))
        assert Laplace().audit_statistic(y, x, xp) == pytest.approx(b * llr, rel=1e-9, abs=1e-12)
        llr = np.sum(stats.norm.logpdf(y, x, b) - stats.norm.logpdf(y, xp, b))
        assert Gaussian().audit_statistic(y, x, xp) == pytest.approx(b ** 2 * llr + (x @ x - xp @ xp) / 2,
                                                                     rel=1e-9, abs=1e-12)


# --------------------------------------------------------------------------- a third distribution, defined here
@dataclass(frozen=True)
class LaplaceTwin(Laplace):
    """Laplace noise under another name and letter: every number must be Laplace's."""

    name: ClassVar[str] = "laplace_twin"
    letter: ClassVar[str] = "T"


@pytest.fixture
def twin():
    noise = distributions.register(LaplaceTwin())
    yield noise
    distributions.unregister("laplace_twin")
    assert distributions.names() == ("laplace", "gaussian")


def test_a_distribution_defined_outside_the_package_calibrates_like_its_twin(twin):
    assert Noise.from_name("laplace_twin") is twin
    assert per_step_scale("laplace_twin", 2.0, 0.5, None) == per_step_scale("laplace", 2.0, 0.5, None)
    assert step_epsilon("laplace_twin", 2.0, 3.0, 0.0) == step_epsilon("laplace", 2.0, 3.0, 0.0)
    for acc in ("basic", "pld", "rdp"):
        twin_scale = calibrate_to_total("laplace_twin", 1.0, 2.0, 1e-5, 20, acc)
        assert twin_scale == calibrate_to_total("laplace", 1.0, 2.0, 1e-5, 20, acc)
        assert total_epsilon("laplace_twin", twin_scale, 1.0, 20, 1e-5, acc) == \
            total_epsilon("laplace", twin_scale, 1.0, 20, 1e-5, acc)
    plan = NoisePlan("laplace_twin", 2.0, 1.0, 0.5)
    assert plan.dp_event() == NoisePlan("laplace", 2.0, 1.0, 0.5).dp_event()
    assert np.array_equal(plan.sample(np.random.default_rng(1), 5),
                          NoisePlan("laplace", 2.0, 1.0, 0.5).sample(np.random.default_rng(1), 5))
    released, record = InputPerturbation("laplace_twin", epsilon=1.0).perturb(np.ones(3), l1=1.0, l2=1.0,
                                                                               rng=np.random.default_rng(2))
    assert InputPerturbation("laplace_twin", epsilon=1.0).name == "InT" and record.delta == 0.0
    assert np.array_equal(released, InputPerturbation("laplace", epsilon=1.0).perturb(
        np.ones(3), l1=1.0, l2=1.0, rng=np.random.default_rng(2))[0])


def test_a_distribution_defined_outside_the_package_runs_through_solve_like_its_twin(twin):
    x = cp.Variable(2)
    d = np.array([0.2, -0.4])
    agent = cvxdp.Agent("a", 0.5 * cp.sum_squares(x - d), [x >= -1, x <= 1], shared={"x": x},
                        gradient=lambda u: u - d, sensitivity=cvxdp.Sensitivity(l1=0.1, l2=0.1))
    algo = cvxdp.LinearizedADMM(rho=1.0, eta=1.0, local_updates=2, rounds=3)
    runs = {}
    for name in ("ObjT", "ObjL", "OutT"):
        mech = make_mechanism(name, epsilon=0.5)
        runs[name] = cvxdp.solve([agent], algorithm=algo, privacy=mech, seed=0)
    assert make_mechanism("objt", epsilon=0.5).short_name == "ObjT" and make_mechanism("OutT", epsilon=1).q == 1
    assert np.array_equal(runs["ObjT"].local["a"], runs["ObjL"].local["a"])
    assert runs["ObjT"].ledger.spent("a", "basic") == runs["ObjL"].ledger.spent("a", "basic") == (3.0, 0.0)
    assert runs["OutT"].config["privacy"]["mechanism"] == "OutT"
