"""The secure noise option ``noise_source="opendp"`` (issue 5 item 2) and its accounting.

The claim of a secure plan is the numpy plan's claim; its scale is raised until OpenDP's own privacy map
(``meas.map(sensitivity)``; for Gaussian via ``make_zCDP_to_approxDP``) certifies that claim.
"""

from __future__ import annotations

import json
import math
import sys
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest
from scipy import stats

import cvxdp
from cvxdp.audits.release import audit_mechanism
from cvxdp.errors import InvalidParameterError, OptionalDependencyError
from cvxdp.model import Sensitivity
from cvxdp.privacy import (
    NoisePlan,
    ObjectivePerturbation,
    OutputPerturbation,
    make_mechanism,
    mechanism_from_dict,
)
from cvxdp.privacy import noise as secure  # the OpenDP samplers live with the noise plans

NAMES = ["ObjL", "ObjG", "OutL", "OutG"]
needs_opendp = pytest.mark.skipif(not secure.available(), reason="OpenDP is not installed (cvxdp[secure])")


def mech(name, noise_source="opendp", **kw):
    kw.setdefault("epsilon", 1.0)
    if name.endswith("G"):
        kw.setdefault("delta", 1e-5)
    return make_mechanism(name, noise_source=noise_source, **kw)


def fake_agent(n=50, l1=0.8, l2=0.5):
    return SimpleNamespace(name="zone", layout=SimpleNamespace(size=n),
                           sensitivity=Sensitivity(l1=l1, l2=l2, relation="test"))


PLAN_KW = {"min_weight": 2.0, "separable": True, "steps": 10}


# ------------------------------------------------------------------ parameters (no OpenDP needed)
@pytest.mark.parametrize("cls", [ObjectivePerturbation, OutputPerturbation])
def test_noise_source_is_validated_with_the_uniform_message(cls):
    m = cls("laplace", epsilon=1.0, noise_source="secure")
    assert m.noise_source == "secure"  # the constructor only stores
    with pytest.raises(InvalidParameterError, match=r"The 'noise_source' parameter of "
                       rf"{cls.__name__} must be one of 'numpy', 'opendp'. Got 'secure' instead."):
        m.validate()
    with pytest.raises(InvalidParameterError, match="'noise_source' parameter of NoisePlan"):
        NoisePlan("laplace", 1.0, 1.0, 1.0, noise_source="os")


@pytest.mark.parametrize("name", NAMES)
def test_describe_records_noise_source_and_round_trips(name):
    default = mech(name, noise_source="numpy")
    assert default.describe()["noise_source"] == "numpy" and "noise_source" not in repr(default)
    m = mech(name, calibrate="total")
    d = m.describe()
    assert d["noise_source"] == "opendp" and json.loads(json.dumps(d)) == d
    assert mechanism_from_dict(d) == m and m != default
    assert "noise_source='opendp'" in repr(m)
    old = {k: v for k, v in default.describe().items() if k != "noise_source"}  # saved before the option
    assert mechanism_from_dict(old) == default


def test_plan_dict_round_trip_and_default():
    plan = NoisePlan("gaussian", 2.0, 1.0, 0.5, 1e-6, "rel", "opendp")
    assert NoisePlan.from_dict(plan.to_dict()) == plan
    legacy = {k: v for k, v in plan.to_dict().items() if k != "noise_source"}
    assert NoisePlan.from_dict(legacy).noise_source == "numpy"
    assert NoisePlan("laplace", 1.0, 1.0, 1.0).noise_source == "numpy"


def test_numpy_default_is_unchanged_and_reproducible():
    plan = mech("ObjL", noise_source="numpy").noise_plan(fake_agent(), accountant="pld", **PLAN_KW)
    assert plan.noise_source == "numpy"
    a = plan.sample(np.random.default_rng(7), 100)
    assert np.array_equal(a, np.random.default_rng(7).laplace(0.0, plan.scale, 100))
    assert np.array_equal(plan.perturb(np.random.default_rng(7), np.ones(100)), 1.0 + a)


def test_missing_opendp_raises_optional_dependency_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "opendp", None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    secure.require_opendp.cache_clear()
    secure._measurement.cache_clear()
    secure.secure_scale.cache_clear()
    try:
        assert not secure.available()
        with pytest.raises(OptionalDependencyError, match=r"pip install 'cvxdp\[secure\]'"):
            mech("ObjL").noise_plan(fake_agent(), accountant="pld", **PLAN_KW)
        plan = NoisePlan("laplace", 1.0, 1.0, 1.0, noise_source="opendp")
        with pytest.raises(OptionalDependencyError, match="OpenDP"):
            plan.sample(np.random.default_rng(0), 3)
        assert isinstance(OptionalDependencyError("x"), ImportError)
    finally:
        secure.require_opendp.cache_clear()


# ------------------------------------------------------------------ OpenDP
@needs_opendp
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("budget,accountant", [("step", "pld"), ("total", "pld"), ("total", "basic"),
                                               ("total", "rdp")])
def test_opendp_privacy_map_certifies_the_claim(name, budget, accountant):
    n = 50
    kw = {"calibrate": budget}
    if accountant == "rdp" and name.endswith("L"):
        kw["delta"] = 1e-6
    numpy_plan = mech(name, noise_source="numpy", **kw).noise_plan(fake_agent(n), accountant=accountant, **PLAN_KW)
    plan = mech(name, **kw).noise_plan(fake_agent(n), accountant=accountant, **PLAN_KW)
    assert plan.noise_source == "opendp"
    assert (plan.epsilon, plan.delta, plan.sensitivity) == (numpy_plan.epsilon, numpy_plan.delta,
                                                            numpy_plan.sensitivity)
    # OpenDP's own privacy map at the plan's sensitivity is within the claim
    assert plan.opendp_epsilon(n) <= plan.epsilon
    assert secure.opendp_epsilon(plan.noise, plan.scale, plan.sensitivity, n, plan.delta) <= plan.epsilon
    ratio = plan.scale / numpy_plan.scale
    if name.endswith("L"):  # the discrete Laplace's map is Delta / scale (+ lattice slack): a few ulps at most
        assert 1.0 <= ratio <= 1.0 + 1e-12
        assert plan.opendp_epsilon(n) == pytest.approx(plan.sensitivity / plan.scale, rel=1e-12)
    else:  # zCDP -> (eps, delta) costs a little more noise than the analytic Gaussian calibration
        assert 1.0 <= ratio <= 1.2
        assert plan.opendp_epsilon(n) == pytest.approx(plan.epsilon, rel=1e-6)  # tight, not wasteful
    assert plan.dp_event().noise_multiplier == pytest.approx(plan.scale / plan.sensitivity)


@needs_opendp
def test_gaussian_rho_is_the_continuous_gaussians():
    # OpenDP certifies rho = Delta^2 / (2 sigma^2)-zCDP: the Renyi curve the RDP accountant uses
    for sigma, delta_s in ((2.0, 1.0), (0.37, 0.1), (15.0, 3.0)):
        assert secure.opendp_rho(sigma, delta_s, 100) == pytest.approx(delta_s ** 2 / (2 * sigma ** 2), rel=1e-9)
        assert secure.opendp_rho(sigma, delta_s, 100) >= delta_s ** 2 / (2 * sigma ** 2)


@needs_opendp
def test_granularity_is_far_below_the_noise_scale():
    for scale in (1e-3, 0.7, 1.0, 3.9, 250.0):
        k = secure.granularity(scale)
        assert 2.0 ** k <= scale * 2.0 ** -99 and 2.0 ** k > scale * 2.0 ** -101


@needs_opendp
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_opendp_samples_have_the_right_law_and_ignore_the_seed(noise):
    scale, n = 1.7, 20_000
    plan = NoisePlan(noise, scale, 1.0, 1.0 if noise == "laplace" else 2.0, 0.0 if noise == "laplace" else 1e-5,
                     noise_source="opendp")
    x = plan.sample(np.random.default_rng(3), n)
    y = plan.sample(np.random.default_rng(3), n)
    assert x.shape == (n,) and x.dtype == float and np.all(np.isfinite(x))
    assert not np.array_equal(x, y)  # OS randomness: the same seed does not replay
    law = stats.laplace(scale=scale) if noise == "laplace" else stats.norm(scale=scale)
    assert stats.kstest(x, law.cdf).pvalue > 1e-6
    assert plan.sample(np.random.default_rng(0), 0).shape == (0,)
    with pytest.raises(InvalidParameterError, match="'n' parameter of sample"):
        secure.sample(noise, scale, -1)
    z = plan.perturb(np.random.default_rng(0), np.full(n, 5.0))
    assert abs(z.mean() - 5.0) < 6 * law.std() / math.sqrt(n)
    with pytest.raises(InvalidParameterError, match="'rng'"):
        plan.sample(0, 3)


@needs_opendp
def test_opendp_samples_have_the_requested_shape_and_spread():
    # timings live in benchmarks/bench_timings.py; here: shape, finiteness and a scale that could be wrong
    for noise, n in (("laplace", 2000), ("gaussian", 1000)):
        draw = np.asarray(secure.sample(noise, 1.3, n))
        assert draw.shape == (n,) and np.all(np.isfinite(draw))
        spread = np.mean(np.abs(draw)) if noise == "laplace" else np.std(draw)
        assert 1.1 < spread < 1.5, (noise, spread)  # E|Laplace(b)| = b and std N(0, s) = s, here 1.3


@needs_opendp
def test_secure_run_through_solve_records_the_source_and_is_not_seed_reproducible():
    x = cp.Variable(3)
    d = cp.Parameter(3, value=np.array([0.2, -0.4, 0.9]))
    agent = cvxdp.Agent("a", 0.5 * cp.sum_squares(x - d), [x >= -1, x <= 1], shared={"x": x},
                        gradient=lambda u: u - d.value, sensitivity=cvxdp.Sensitivity(l1=0.1, l2=0.1))
    algo = cvxdp.LinearizedADMM(rho=1.0, eta=1.0, local_updates=2, rounds=3)
    privacy = cvxdp.ObjectivePerturbation("gaussian", epsilon=0.5, delta=1e-6, noise_source="opendp")
    r1 = cvxdp.solve([agent], algorithm=algo, privacy=privacy, seed=0)
    r2 = cvxdp.solve([agent], algorithm=algo, privacy=privacy, seed=0)
    assert r1.config["privacy"]["noise_source"] == "opendp"
    assert not np.array_equal(r1.local["a"], r2.local["a"])
    assert r1.agent_history["violation"].max() <= 1e-7  # ObjPert stays feasible
    eps, dl = r1.ledger.spent("a", "basic")
    assert eps == pytest.approx(6 * 0.5) and dl == pytest.approx(6 * 1e-6)


@needs_opendp
def test_audit_of_opendp_noise():
    m = mech("ObjL")
    ok = audit_mechanism(m, trials=50_000, seed=0)
    assert not ok.violated and ok.epsilon_lower > 0.8 and ok.details["noise_source"] == "opendp"
    assert audit_mechanism(m, trials=50_000, seed=0, broken="half-sensitivity").violated
    # OpenDP ignores seeds, so the reused-seed bug cannot happen to it: the same audit stays clean
    assert not audit_mechanism(m, trials=50_000, seed=0, broken="reused-seed").violated


@needs_opendp
def test_the_laplace_secure_scale_moves_by_a_few_ulps_and_the_arguments_are_checked():
    """OpenDP's Laplace map is Delta / scale up to the lattice: the certified scale is found by stepping ulps (at most
    64), not by the coarser search the Gaussian needs (a relative step of 1e-12 is thousands of ulps)."""
    for scale in (0.3, 1.7, 40.0):
        certified = secure.secure_scale("laplace", 1.0, scale, 1.0 / scale)
        bound = scale
        for _ in range(64):
            bound = float(np.nextafter(bound, math.inf))
        assert scale <= certified <= bound
        assert secure.opendp_epsilon("laplace", certified, 1.0) <= 1.0 / scale
    assert secure.secure_scale("laplace", 1.0, 2.0, 0.5) == secure.secure_scale("laplace", 1.0, 2.0, 0.5, n=1)
    gaussian = secure.secure_scale("gaussian", 1.0, 3.0, 0.5, 1e-5)
    assert gaussian >= 3.0 and secure.opendp_epsilon("gaussian", gaussian, 1.0, delta=1e-5) <= 0.5
    for delta in (0.0, 1.0, 1.5):
        with pytest.raises(InvalidParameterError, match="'delta' parameter of opendp_epsilon"):
            secure.opendp_epsilon("gaussian", 3.0, 1.0, delta=delta)
    for noise in ("laplace", "gaussian"):
        with pytest.raises(InvalidParameterError, match="'sensitivity' parameter of opendp_epsilon"):
            secure.opendp_epsilon(noise, 3.0, 0.0, delta=1e-5)


def test_opendp_is_reported_available_where_it_is_installed():
    """Every OpenDP test above skips when ``available()`` says no: it must say yes wherever OpenDP imports (CI
    installs it with the test extra), or the secure noise would go untested without a failure."""
    import importlib.util

    assert secure.available() == (importlib.util.find_spec("opendp") is not None)


@needs_opendp
def test_the_opendp_helpers_refuse_bad_arguments_and_keep_their_defaults():
    for call, name in [(lambda: secure.measurement("laplace", 0.0, 3), "scale"),
                       (lambda: secure.measurement("laplace", 1.0, 0), "n"),
                       (lambda: secure.opendp_rho(1.0, 0.0), "sensitivity"),
                       (lambda: secure.secure_scale("laplace", 0.0, 1.0, 1.0), "sensitivity"),
                       (lambda: secure.secure_scale("laplace", 1.0, 1.0, 0.0), "epsilon")]:
        owners = "(measurement|opendp_rho|secure_scale)"  # the function called, not one below it
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of {owners}"):
            call()
    assert secure.opendp_rho(2.0, 1.0) == secure.opendp_rho(2.0, 1.0, 1)
    plan = mech("OutL").noise_plan(fake_agent(), accountant="pld", **PLAN_KW)
    assert plan.opendp_epsilon() == plan.opendp_epsilon(1)


@needs_opendp
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_opendp_perturbs_every_coordinate_of_any_length(noise):
    """A one-coordinate release is perturbed too (the empty vector is the only one returned as it is)."""
    for n in (1, 2, 7):
        x = np.full(n, 5.0)
        out = secure.perturb(noise, 1.0, x)
        assert out.shape == (n,) and np.all(out != 5.0)
    assert secure.perturb(noise, 1.0, np.zeros(0)).shape == (0,)
