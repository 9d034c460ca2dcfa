"""Gamma-norm steps as pure-epsilon DpEvents in the one PrivacyLedger: the papers' bounds (26)/(32), hand
composition, the exact composition of randomized response as a lower bound, round trips and the graph-run
summary, and the conversion of ledgers saved in the older per-iteration format."""

from __future__ import annotations

import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy import optimize, stats

from cvxdp.errors import InvalidParameterError
from cvxdp.families.graph.mechanism import (
    bound_26,
    bound_32,
    gamma_step_event,
    madmm_step_epsilon,
    mradmm_step_epsilon,
)
from cvxdp.privacy import PrivacyLedger, PureEpsilonDpEvent
from cvxdp.privacy.accounting import pure_epsilon_rdp

DELTA = 1e-6


def exact_rr_epsilon(eps: float, k: int, delta: float) -> float:
    """Epsilon at ``delta`` of k-fold binary randomized response with ``eps``, exactly (binomial privacy loss).

    RR with eps is itself a pure eps-DP mechanism, so no valid accountant of k pure eps-steps may report less.
    """
    j = np.arange(k + 1)
    pmf = stats.binom.pmf(j, k, 1.0 / (1.0 + math.exp(eps)))  # j "flipped" outputs under P
    loss = eps * (k - 2 * j)

    def excess(e: float) -> float:
        return float(np.sum(pmf * np.maximum(0.0, 1.0 - np.exp(e - loss)))) - delta

    return 0.0 if excess(0.0) <= 0 else optimize.brentq(excess, 0.0, k * eps, xtol=1e-12)


def test_gamma_step_event_is_pure_and_checked():
    event = gamma_step_event(0.25)
    assert isinstance(event, PureEpsilonDpEvent) and isinstance(event, dp_accounting.DpEvent)
    assert event == PureEpsilonDpEvent(0.25) and event.epsilon == 0.25
    for bad in (0.0, -1.0, math.inf, "x"):
        with pytest.raises(InvalidParameterError, match="'epsilon' parameter of gamma_step_event"):
            gamma_step_event(bad)
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    with pytest.raises(InvalidParameterError, match="GaussianDpEvent implies no"):
        ledger.record_event("a", dp_accounting.GaussianDpEvent(2.0))


def test_bound_26_is_the_basic_total_and_rdp_pld_are_below_it():
    T, C, c1 = 15, 10.0, 0.25
    V, B = np.array([1.0, 2.0, 1.0]), np.array([80.0, 120.0, 95.0])
    t = np.arange(1, T + 1)
    eta = np.array([0.5, 0.6, 0.55])[:, None] * 1.03 ** (t - 1)
    alpha = np.array([2.0, 3.0, 2.5])[:, None] * 1.05 ** (t - 1)
    ledger = PrivacyLedger(["a", "b", "c"], target_delta=DELTA)
    for i, name in enumerate(ledger.agent_names):
        for s in range(T):
            ledger.record_event(name, gamma_step_event(madmm_step_epsilon(C, c1, alpha[i, s], eta[i, s], V[i], B[i])))
    summary = ledger.summary()

    assert summary["worst"]["basic"][0] == pytest.approx(bound_26(C, c1, alpha, eta, V, B), rel=1e-12)
    for i, name in enumerate(ledger.agent_names):
        hand = sum(madmm_step_epsilon(C, c1, alpha[i, s], eta[i, s], V[i], B[i]) for s in range(T))
        assert ledger.spent(name, "basic") == (pytest.approx(hand, rel=1e-12), 0.0)
        assert 0 < ledger.spent(name, "pld")[0] <= hand and 0 < ledger.spent(name, "rdp")[0] <= hand
        assert ledger.steps(name) == T and ledger.free_steps(name) == 0
    assert summary["worst"]["steps"] == T


def test_bound_32_counts_recycled_iterations_as_free():
    N, K, C, c1, rho = 2, 10, 10.0, 0.25, 1.0
    V, B = np.array([1.0, 1.0]), np.array([100.0, 60.0])
    eta = np.array([[0.5] * K, [0.7] * K])  # eta_i(2k - 1)
    alpha = np.array([[2.0] * K, [1.5] * K])
    ledger = PrivacyLedger(["a", "b"], target_delta=DELTA)
    for i, name in enumerate(ledger.agent_names):
        for k in range(K):
            ledger.record_event(name, gamma_step_event(
                mradmm_step_epsilon(C, c1, alpha[i, k], eta[i, k], V[i], B[i], rho / N)))
            ledger.record_event(name, dp_accounting.NoOpDpEvent())  # the even, recycled iteration
    summary = ledger.summary()

    assert summary["worst"]["basic"][0] == pytest.approx(bound_32(C, c1, rho, N, alpha, eta, V, B), rel=1e-12)
    assert ledger.steps("a") == K and ledger.free_steps("a") == K
    assert summary["worst"]["free_steps"] == K and summary["worst"]["steps"] == K


@pytest.mark.parametrize(("eps", "k"), [(0.1, 200), (0.5, 40), (1.0, 10), (2.0, 3)])
def test_k_pure_steps_against_hand_composition_and_the_exact_rr_curve(eps, k):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    ledger.record_event("a", gamma_step_event(eps), count=k)
    basic, pld, rdp = ledger.spent("a", "basic")[0], ledger.spent("a", "pld")[0], ledger.spent("a", "rdp")[0]
    exact = exact_rr_epsilon(eps, k, DELTA)

    assert basic == pytest.approx(k * eps, rel=1e-12)
    assert exact <= pld * (1 + 1e-9) and exact <= rdp * (1 + 1e-9)  # no accountant beats the true curve
    assert pld <= basic and rdp <= basic
    assert pld <= exact * 1.01 + 1e-9  # PLD is tight up to its discretisation
    if exact < 0.5 * basic:  # many small steps: both are far below basic composition
        assert pld < 0.6 * basic and rdp < 0.6 * basic
    with pytest.raises(InvalidParameterError):  # recording does not allow negative counts
        ledger.record_event("a", gamma_step_event(eps), count=-1)


def test_rdp_curve_is_dp_accountings_randomized_response():
    eps, k = 0.7, 25
    orders = np.array([1.5, 2.0, 4.0, 16.0, 64.0])
    assert np.all(pure_epsilon_rdp(eps, orders) <= np.minimum(eps, orders * eps ** 2 / 2) + 1e-12)
    rr = dp_accounting.RandomizedResponseDpEvent(noise_parameter=2.0 / (1.0 + math.exp(eps)), num_buckets=2)
    ref = RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    ref.compose(dp_accounting.SelfComposedDpEvent(rr, k))
    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    ledger.record_event("a", gamma_step_event(eps), count=k)
    assert ledger.spent("a", "rdp")[0] == pytest.approx(ref.get_epsilon(1e-5), rel=1e-9)


def test_pure_steps_at_delta_zero_and_mixed_with_laplace():
    ledger = PrivacyLedger(["a"], target_delta=0.0)
    ledger.record_event("a", gamma_step_event(0.2), count=5)
    ledger.record_event("a", dp_accounting.LaplaceDpEvent(noise_multiplier=2.0), count=3)
    assert ledger.spent("a", "basic") == (pytest.approx(2.5), 0.0)
    assert ledger.spent("a", "pld") == (pytest.approx(2.5), 0.0)


def test_round_trip_and_the_old_per_iteration_format_converts_to_the_same_ledger():
    from cvxdp.privacy import ledger_from_dict

    new = PrivacyLedger(["a", "b"], target_delta=DELTA)
    old = {"format": "cvxdp-gamma-ledger/1", "target_delta": DELTA, "bound": "(32)", "notes": [],
           "agents": {"a": [], "b": []}}
    for t in range(1, 41):
        for name, eps in (("a", 0.1), ("b", 0.2 + 0.001 * t)):
            if t % 2:
                new.record_event(name, gamma_step_event(eps))
                old["agents"][name].append([t, eps])
            else:
                new.record_event(name, dp_accounting.NoOpDpEvent())
                old["agents"][name].append([t, 0.0])
    new.note("a test note", voids=False, warn=False)
    old["notes"].append({"reason": "a test note", "voids": False})

    assert PrivacyLedger.from_dict(json.loads(json.dumps(new.to_dict()))) == new
    assert ledger_from_dict(json.loads(json.dumps(old))) == new
    summary = new.summary()
    for name in ("a", "b"):
        assert summary["per_agent"][name]["steps"] == 20 and summary["per_agent"][name]["free_steps"] == 20
    assert new.summary(pld=False)["worst"]["pld"] is None
