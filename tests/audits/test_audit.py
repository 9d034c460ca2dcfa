"""Empirical audit of one local update of DP linearized ADMM on a 1-D box problem (SPEC §2, §2.1).

Problem: f(u; d) = 0.5 (u - d)^2 on W = [lo, hi], neighbours d' = d + Delta, so the gradient
g(u; d) = u - d has sensitivity Delta (l1 = l2 in 1-D). One local update with c = eta + rho:

    ObjPert: u1 = clip((eta u0 + rho w + lam - g(u0; d) - xi) / c, lo, hi),   xi calibrated to Delta
    OutPert: u1 = clip((eta u0 + rho w + lam - g(u0; d)) / c, lo, hi) + xi,  xi calibrated to Delta / c

The noise comes from the mechanisms' own NoisePlans (pure numpy, no solver). Each mechanism must pass the
audit (empirical lower bound <= claimed epsilon) and its broken twin, whose noise is calibrated to HALF the
sensitivity, must be caught (empirical lower bound > claimed epsilon).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cvxdp.audits.release import clopper_pearson_lower, clopper_pearson_upper, empirical_epsilon
from cvxdp.errors import InvalidParameterError
from cvxdp.model import Sensitivity
from cvxdp.privacy import make_mechanism

ETA, RHO, U0, W, LAM, D, DELTA_GRAD = 1.0, 1.0, 0.3, 0.5, 0.1, 0.2, 1.0
C = ETA + RHO
TRIALS = 1_000_000
SEED = 20240607
EPSILON = {"L": 1.0, "G": 1.0}
DELTA = 1e-5


def centre(d: float) -> float:
    """The noiseless pre-projection point v = (eta u0 + rho w + lam - g(u0; d)) / c."""
    return (ETA * U0 + RHO * W + LAM - (U0 - d)) / C


V, V_PRIME = centre(D), centre(D + DELTA_GRAD)  # V_PRIME = V + Delta / c


def plan_for(name: str, broken: bool):
    """The mechanism's NoisePlan for this problem; the broken twin declares half the true sensitivity."""
    kw = {"epsilon": EPSILON[name[-1]]}
    if name.endswith("G"):
        kw["delta"] = DELTA
    declared = DELTA_GRAD / 2 if broken else DELTA_GRAD
    agent = SimpleNamespace(name="audit", layout=SimpleNamespace(size=1),
                            sensitivity=Sensitivity(l1=declared, l2=declared, relation="d' = d + Delta"))
    return make_mechanism(name, **kw).noise_plan(agent, min_weight=C, separable=True, steps=1,
                                                 accountant="pld")


def samplers(name: str, plan):
    spread = plan.scale / C if name.startswith("Obj") else plan.scale
    if name.startswith("Obj"):
        lo, hi = V - 3 * spread, V_PRIME + 1.5 * spread  # the optimum sits on the boundary now and then

        def update(d):
            return lambda rng, n: np.clip(centre(d) - plan.sample(rng, n) / C, lo, hi)
    else:
        lo, hi = V - 3.0, V_PRIME  # D' puts the optimum exactly on the upper boundary

        def update(d):
            return lambda rng, n: np.clip(centre(d), lo, hi) + plan.sample(rng, n)
    return update(D), update(D + DELTA_GRAD)


def audit(name: str, broken: bool, seed: int = SEED):
    plan = plan_for(name, broken)
    s, s_prime = samplers(name, plan)
    return empirical_epsilon(s, s_prime, trials=TRIALS, delta=plan.delta, rng=np.random.default_rng(seed),
                             claimed=plan.epsilon)


@pytest.mark.parametrize("name", ["ObjL", "ObjG", "OutL", "OutG"])
def test_correct_mechanism_passes_audit(name):
    res = audit(name, broken=False)
    assert res.claimed == EPSILON[name[-1]]
    assert res.epsilon_lower <= res.claimed and not res.violated
    if name.endswith("L"):  # Laplace tail events are exactly tight: the audit must see most of epsilon
        assert res.epsilon_lower > 0.9 * res.claimed
    else:
        assert res.epsilon_lower > 0.3 * res.claimed


@pytest.mark.parametrize("name", ["ObjL", "ObjG", "OutL", "OutG"])
def test_broken_twin_is_flagged(name):
    res = audit(name, broken=True)
    assert res.violated and res.epsilon_lower > res.claimed
    assert res.best_threshold is not None and res.counts["trials"] == TRIALS


def test_identical_samplers_give_zero():
    def same(rng, n):
        return rng.normal(size=n)

    res = empirical_epsilon(same, same, trials=100_000, rng=np.random.default_rng(1))
    assert res.epsilon_lower == 0.0 and res.best_threshold is None


def test_clopper_pearson_bounds():
    k = np.array([0, 5, 50, 100])
    lo, hi = clopper_pearson_lower(k, 100, 0.025), clopper_pearson_upper(k, 100, 0.025)
    assert lo[0] == 0.0 and hi[-1] == 1.0
    assert np.all(lo <= k / 100) and np.all(hi >= k / 100)
    assert lo[2] == pytest.approx(0.3983, abs=1e-3) and hi[2] == pytest.approx(0.6017, abs=1e-3)


def test_audit_checks_arguments():
    rng = np.random.default_rng(0)

    def ok(r, n):
        return r.normal(size=n)

    with pytest.raises(InvalidParameterError, match="sampler"):
        empirical_epsilon(ok, lambda r, n: np.zeros((n, 2)), trials=10, rng=rng)
    with pytest.raises(InvalidParameterError, match="'trials'"):
        empirical_epsilon(ok, ok, trials=0, rng=rng)
    with pytest.raises(InvalidParameterError, match="'rng'"):
        empirical_epsilon(ok, ok, trials=10, rng=0)
