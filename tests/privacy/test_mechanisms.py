"""Contract tests shared by the four mechanisms ObjL, ObjG, OutL, OutG, and NoisePlan (SPEC §2.1)."""

from __future__ import annotations

import dataclasses
import json
import math
from types import SimpleNamespace

import dp_accounting
import numpy as np
import pytest

from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.model import Sensitivity
from cvxdp.privacy import (
    NoisePlan,
    ObjectivePerturbation,
    OutputPerturbation,
    PrivacyLedger,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    make_mechanism,
    mechanism_from_dict,
)

NAMES = ["ObjL", "ObjG", "OutL", "OutG"]
PLAN_KW = {"min_weight": 2.0, "separable": True, "steps": 10, "accountant": "pld"}


def agent(l1=0.8, l2=0.5, alpha=0.1, n=9, name="zone1"):
    return SimpleNamespace(name=name, layout=SimpleNamespace(size=n),
                           sensitivity=Sensitivity(l1=l1, l2=l2, relation="one load differs by alpha",
                                                   alpha=alpha))


def mech(name, **kw):
    kw.setdefault("epsilon", 0.5)
    if name.endswith("G"):
        kw.setdefault("delta", 1e-5)
    return make_mechanism(name, **kw)


@pytest.fixture(params=NAMES)
def name(request):
    return request.param


# ------------------------------------------------------------------ construction and validation
def test_short_name_placement_q(name):
    m = mech(name)
    assert m.short_name == name
    assert m.placement == ("objective" if name.startswith("Obj") else "output")
    assert m.q == (1 if name.endswith("L") else 2)
    assert isinstance(m, ObjectivePerturbation if name.startswith("Obj") else OutputPerturbation)


def test_constructor_only_stores(name):
    cls = ObjectivePerturbation if name.startswith("Obj") else OutputPerturbation
    m = cls("bogus", epsilon=-1, delta=7, calibration="x", sensitivity="y", calibrate="z")
    assert (m.noise, m.epsilon, m.delta, m.calibration, m.sensitivity, m.scope) == ("bogus", -1, 7, "x", "y", "z")
    with pytest.raises(InvalidParameterError, match=f"The 'noise' parameter of {cls.__name__} must be one of"):
        m.validate()


@pytest.mark.parametrize("field,value,match", [
    ("epsilon", 0.0, r"'epsilon' parameter of \w+ must be a float in \(0, inf\)\. Got 0\.0 instead"),
    ("epsilon", "1", r"'epsilon' parameter"),
    ("epsilon", math.nan, r"'epsilon' parameter"),
    ("calibration", "exact", r"'calibration' parameter of \w+ must be one of 'analytic', 'classic'"),
    ("sensitivity", "worst", r"'sensitivity' parameter of \w+ must be one of 'exact', 'paper'"),
    ("calibrate", "run", r"'calibrate' parameter of \w+ must be one of 'step', 'total'"),
    ("delta", 1.5, r"'delta' parameter"),
    ("delta", -0.1, r"'delta' parameter"),
])
def test_validate_uniform_messages(name, field, value, match):
    m = mech(name)
    setattr(m, field, value)
    with pytest.raises(InvalidParameterError, match=match):
        m.validate()


def test_every_parameter_may_be_passed_by_keyword():
    for cls in (ObjectivePerturbation, OutputPerturbation):
        assert cls(noise="laplace", epsilon=0.5).describe() == cls("laplace", epsilon=0.5).describe()


def test_gaussian_needs_delta():
    for cls in (ObjectivePerturbation, OutputPerturbation):
        with pytest.raises(InvalidParameterError, match=f"'delta' parameter of {cls.__name__}"):
            cls("gaussian", epsilon=0.5).validate()
        cls("laplace", epsilon=0.5).validate()  # Laplace: delta optional


def test_classic_refused_for_large_step_epsilon():
    with pytest.raises(InvalidParameterError, match="analytic"):
        ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-5, calibration="classic").validate()
    ObjectivePerturbation("gaussian", epsilon=0.5, delta=1e-5, calibration="classic").validate()


def test_describe_round_trip(name):
    m = mech(name, sensitivity="paper", calibrate="total")
    d = m.describe()
    assert json.loads(json.dumps(d)) == d
    assert d["mechanism"] == name
    back = mechanism_from_dict(d)
    assert back == m and type(back) is type(m)
    assert name in repr(m) or type(m).__name__ in repr(m)


def test_make_mechanism_names():
    assert make_mechanism("none") is None and make_mechanism(None) is None
    assert make_mechanism("objg", epsilon=1.0, delta=1e-5).short_name == "ObjG"
    with pytest.raises(InvalidParameterError, match="'mechanism' parameter of make_mechanism must be one of"):
        make_mechanism("ObjX", epsilon=1.0)
    with pytest.raises(InvalidParameterError):
        make_mechanism("ObjL", epsilon=1.0, sigma=3)


# ------------------------------------------------------------------ noise plans
def expected_sensitivity(name, a, *, min_weight, separable):
    d = a.sensitivity.l1 if name.endswith("L") else a.sensitivity.l2
    if name.startswith("Obj"):
        return d
    if name == "OutG" or separable:
        return d / min_weight
    return math.sqrt(a.layout.size) * a.sensitivity.l2 / min_weight


@pytest.mark.parametrize("separable", [True, False])
def test_exact_step_plan(name, separable):
    a, m = agent(), mech(name)
    plan = m.noise_plan(a, **{**PLAN_KW, "separable": separable})
    sens = expected_sensitivity(name, a, min_weight=2.0, separable=separable)
    assert isinstance(plan, NoisePlan)
    assert plan.noise == m.noise and plan.sensitivity == pytest.approx(sens)
    assert plan.relation == "one load differs by alpha"
    if name.endswith("L"):
        assert plan.scale == pytest.approx(sens / 0.5) and (plan.epsilon, plan.delta) == (0.5, 0.0)
    else:
        assert plan.scale == pytest.approx(gaussian_sigma_analytic(sens, 0.5, 1e-5))
        assert (plan.epsilon, plan.delta) == (0.5, 1e-5)
    assert plan.noise_multiplier == pytest.approx(plan.scale / sens)


def test_outl_nonseparable_uses_l1_when_l2_missing():
    a = agent(l2=None)
    plan = mech("OutL").noise_plan(a, **{**PLAN_KW, "separable": False})
    assert plan.sensitivity == pytest.approx(3.0 * 0.8 / 2.0)


def test_classic_plan():
    m = ObjectivePerturbation("gaussian", epsilon=0.5, delta=1e-5, calibration="classic")
    assert m.noise_plan(agent(), **PLAN_KW).scale == pytest.approx(gaussian_sigma_classic(0.5, 0.5, 1e-5))


def test_paper_sensitivity(name):
    plan = mech(name, sensitivity="paper").noise_plan(agent(alpha=0.1), **PLAN_KW)
    assert plan.sensitivity == pytest.approx(0.2 if name.startswith("Obj") else 0.1)  # no division by min_weight


def test_missing_sensitivity_names_agent_and_field(name):
    field = "l1" if name.endswith("L") else "l2"
    a = agent(**{field: None})
    with pytest.raises(DeclarationError, match=rf"Agent 'zone1': {name} needs sensitivity=cvxdp.Sensitivity\({field}="):
        mech(name).noise_plan(a, **PLAN_KW)
    no_sens = SimpleNamespace(name="zone2", sensitivity=None, layout=SimpleNamespace(size=3))
    with pytest.raises(DeclarationError, match="Agent 'zone2'"):
        mech(name).noise_plan(no_sens, **PLAN_KW)
    with pytest.raises(DeclarationError, match=r"paper.*Sensitivity\(alpha="):
        mech(name, sensitivity="paper").noise_plan(agent(alpha=None), **PLAN_KW)


def test_missing_norm_says_how_to_get_it_not_the_relation(name):
    """Issue 51: an agent that declares the other norm is told how to bound this one from it, or to switch noise;
    its relation (a statement of what the bounds hold for) is not quoted as a reason for having none."""
    gaussian = name.endswith("G")
    a = agent(**({"l2": None} if gaussian else {"l1": None}))
    with pytest.raises(DeclarationError) as err:
        mech(name).noise_plan(a, **PLAN_KW)
    text = str(err.value)
    assert "one load differs by alpha" not in text and "says why" not in text
    if gaussian:  # l2 <= l1: the declared l1 = 0.8 is a valid l2
        assert "declares l1 = 0.8 only" in text and "l2 = 0.8 is a valid" in text
        assert f"{name[:-1]}L: cvxdp.{type(mech(name)).__name__}('laplace'" in text
    else:  # l1 <= sqrt(n) l2 with the agent's n = 9 variables
        assert "declares l2 = 0.5 only" in text and "l1 = sqrt(9) x 0.5 = 1.5 is a valid" in text
        assert f"{name[:-1]}G: cvxdp.{type(mech(name)).__name__}('gaussian'" in text


def test_missing_sensitivity_quotes_the_models_reason_only_when_it_declares_no_bound(name):
    refused = SimpleNamespace(name="zone1", layout=SimpleNamespace(size=9),
                              sensitivity=Sensitivity(relation="none: the loads sit in the constraints", alpha=0.1))
    with pytest.raises(DeclarationError, match="declares no bound and says why: none: the loads sit in the"):
        mech(name).noise_plan(refused, **PLAN_KW)
    bare = SimpleNamespace(name="zone1", layout=SimpleNamespace(size=9), sensitivity=Sensitivity())
    with pytest.raises(DeclarationError) as err:
        mech(name).noise_plan(bare, **PLAN_KW)
    assert "says why" not in str(err.value) and "docs/own-agent.md" in str(err.value)


@pytest.mark.parametrize("kw", [{"min_weight": 0.0}, {"steps": 0}, {"accountant": "moments"},
                                {"separable": "yes"}])
def test_noise_plan_bad_arguments(name, kw):
    with pytest.raises(InvalidParameterError):
        mech(name).noise_plan(agent(), **{**PLAN_KW, **kw})


@pytest.mark.parametrize("accountant", ["basic", "rdp", "pld"])
def test_total_budget_plan_meets_total(name, accountant):
    m = mech(name, epsilon=2.0, delta=1e-5, calibrate="total")
    steps = 40
    ledger = PrivacyLedger(["zone1"], target_delta=1e-5)
    for t in range(steps // 4):  # as the engine does: a fresh plan every round, min(c) varying (rho schedule)
        kw = {**PLAN_KW, "steps": steps, "accountant": accountant, "min_weight": 2.0 + 0.37 * t}
        plan = m.noise_plan(agent(), **kw)
        assert not ledger.would_exceed("zone1", plan, 4, budget=(2.0, 1e-5), accountant=accountant)
        ledger.record("zone1", plan, 4)
    eps, delta = ledger.spent("zone1", accountant)
    assert eps <= 2.0 * (1 + 1e-9) and delta <= 1e-5 * (1 + 1e-9)
    assert eps == pytest.approx(2.0, rel=1e-3)
    assert ledger.would_exceed("zone1", plan, 1, budget=(2.0, 1e-5), accountant=accountant)
    # the per-step claim is honest: basic composition of the claims is a valid (looser) total
    b_eps, b_delta = ledger.spent("zone1", "basic")
    assert b_eps >= eps * (1 - 1e-9) and b_delta <= 1e-5 * (1 + 1e-9)


def test_total_budget_laplace_rdp_without_delta_is_refused():
    with pytest.raises(InvalidParameterError, match="RDP"):
        mech("ObjL", calibrate="total").noise_plan(agent(), **{**PLAN_KW, "accountant": "rdp"})


# ------------------------------------------------------------------ NoisePlan
def test_plan_sampling_uses_callers_generator(name):
    plan = mech(name).noise_plan(agent(), **PLAN_KW)
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    x1, x2 = plan.sample(a, 5), plan.sample(a, 5)
    assert np.array_equal(x1, plan.sample(b, 5)) and not np.array_equal(x1, x2)
    big = plan.sample(np.random.default_rng(0), 200_000)
    std = plan.scale * (math.sqrt(2) if plan.noise == "laplace" else 1.0)
    assert big.shape == (200_000,) and big.std() == pytest.approx(std, rel=0.02)
    assert abs(big.mean()) < 0.02 * std
    assert plan.sample(a, 0).shape == (0,)


def test_plan_expected_norm_is_the_root_mean_square_norm_of_its_draws(name):
    """``sqrt(E ||xi||^2)``: sqrt(2 n) b for Laplace, sqrt(n) sigma for Gaussian, and what the draws show."""
    plan = mech(name).noise_plan(agent(), **PLAN_KW)
    per = math.sqrt(2.0) * plan.scale if plan.noise == "laplace" else plan.scale
    assert plan.expected_norm(9) == pytest.approx(3.0 * per, rel=1e-12)
    draws = plan.sample(np.random.default_rng(5), (20_000 * 9)).reshape(20_000, 9)
    assert np.sqrt(np.mean(np.sum(draws ** 2, axis=1))) == pytest.approx(plan.expected_norm(9), rel=0.02)


def test_plan_dp_event(name):
    plan = mech(name).noise_plan(agent(), **PLAN_KW)
    ev = plan.dp_event()
    cls = dp_accounting.LaplaceDpEvent if name.endswith("L") else dp_accounting.GaussianDpEvent
    assert isinstance(ev, cls) and ev.noise_multiplier == pytest.approx(plan.scale / plan.sensitivity)


def test_plan_validation_and_round_trip():
    plan = NoisePlan("gaussian", 2.0, 0.5, 0.3, 1e-6)
    assert NoisePlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    with pytest.raises(InvalidParameterError, match="'delta' parameter of NoisePlan"):
        NoisePlan("gaussian", 2.0, 0.5, 0.3)
    with pytest.raises(InvalidParameterError, match="'scale' parameter of NoisePlan"):
        NoisePlan("laplace", 0.0, 0.5, 0.3)
    with pytest.raises(InvalidParameterError, match="'rng' parameter"):
        plan.sample(np.random.RandomState(0), 3)
    with pytest.raises(InvalidParameterError, match="'n' parameter of NoisePlan.sample"):
        plan.sample(np.random.default_rng(0), -1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.scale = 3.0
    for kw, name in [({"delta": -0.5}, "delta"), ({"delta": 1.0}, "delta"), ({"sampling_rate": 0.0}, "sampling_rate"),
                     ({"sampling_rate": 1.5}, "sampling_rate")]:
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of NoisePlan"):
            NoisePlan("laplace", 2.0, 0.5, 0.3, **kw)
    for clip in (0.0, -1.0):  # a subsampled plan needs a positive clip
        with pytest.raises(InvalidParameterError, match="'clip_norm' parameter of NoisePlan"):
            NoisePlan("gaussian", 2.0, 0.5, 0.3, 1e-6, sampling_rate=0.5, clip_norm=clip)


def test_calibrate_is_the_one_name_and_budget_means_only_the_stopping_guard():
    new = ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-5, calibrate="total")
    assert new.scope == "total" and new.describe()["calibrate"] == "total"
    with pytest.raises(TypeError, match="budget"):  # "budget" names only solve(budget=(eps, delta)), a stopping guard
        OutputPerturbation("gaussian", epsilon=1.0, delta=1e-5, budget="total")
    from cvxdp.privacy import mechanism_from_dict
    assert mechanism_from_dict(new.describe()) == new
