"""Accounting: basic composition, RDP and PLD totals, and the per-agent PrivacyLedger (SPEC §2.2)."""

from __future__ import annotations

import json

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from cvxdp.errors import InvalidParameterError
from cvxdp.privacy import (
    NoisePlan,
    PrivacyLedger,
    PureEpsilonDpEvent,
    accounting,
    basic_composition,
    event_from_dict,
    event_to_dict,
    pld_epsilon,
    rdp_epsilon,
)

LAP = NoisePlan("laplace", scale=4.0, sensitivity=2.0, epsilon=0.5)            # multiplier 2
GAU = NoisePlan("gaussian", scale=3.0, sensitivity=0.5, epsilon=0.9, delta=1e-6)  # multiplier 6
GAU2 = NoisePlan("gaussian", scale=10.0, sensitivity=1.0, epsilon=0.4, delta=1e-7)


def reference(events_counts, delta, kind):
    acc = RdpAccountant() if kind == "rdp" else PLDAccountant(value_discretization_interval=1e-4)
    for event, count in events_counts:
        acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return acc.get_epsilon(delta)


def test_basic_composition_is_hand_sum():
    eps, delta = basic_composition([(LAP, 10), (GAU, 5), ((0.1, 1e-8), 3), (dp_accounting.LaplaceDpEvent(4.0), 2)])
    assert eps == pytest.approx(10 * 0.5 + 5 * 0.9 + 3 * 0.1 + 2 * 0.25)
    assert delta == pytest.approx(5 * 1e-6 + 3 * 1e-8)
    assert basic_composition([]) == (0.0, 0.0)


def test_bare_gaussian_event_has_no_basic_claim():
    with pytest.raises(InvalidParameterError, match="claim"):
        basic_composition([(dp_accounting.GaussianDpEvent(2.0), 1)])


@pytest.mark.parametrize("entries", [
    [(LAP, 100)], [(GAU, 300)], [(LAP, 30), (GAU, 70)], [(GAU, 20), (GAU2, 40), (GAU, 20)],
])
def test_rdp_and_pld_match_dp_accounting(entries):
    events = {}
    for plan, count in entries:
        events[plan.dp_event()] = events.get(plan.dp_event(), 0) + count
    delta = 1e-5
    assert rdp_epsilon(entries, delta) == pytest.approx(reference(events.items(), delta, "rdp"), rel=1e-12)
    assert pld_epsilon(entries, delta) == pytest.approx(reference(events.items(), delta, "pld"), rel=2e-3)
    # events and plans give the same numbers
    assert pld_epsilon([(p.dp_event(), c) for p, c in entries], delta) == pld_epsilon(entries, delta)


def test_pld_is_an_upper_bound_close_to_exact_gaussian():
    # T Gaussian calls with multiplier m are exactly one with m / sqrt(T): compare with the analytic epsilon.
    exact = dp_accounting.get_epsilon_gaussian(6.0 / 20.0, 1e-5)
    got = pld_epsilon([(GAU, 400)], 1e-5)
    assert exact <= got <= exact * (1 + 1e-3)


def test_pure_laplace_at_delta_zero():
    assert pld_epsilon([(LAP, 7)], 0.0) == pytest.approx(3.5)
    assert rdp_epsilon([(LAP, 7)], 0.0) == float("inf")
    assert pld_epsilon([(GAU, 7)], 0.0) == float("inf")


def test_pld_for_many_events_is_bounded_by_rdp():
    # a thousand composed calls stay computable and PLD stays at or below RDP (timings: benchmarks/bench_timings.py)
    for plan in (LAP, GAU):
        scaled = NoisePlan(plan.noise, plan.scale * 1.2345, plan.sensitivity, plan.epsilon, plan.delta)
        pld = pld_epsilon([(scaled, 1000)], 1e-5)
        assert np.isfinite(pld) and 0 < pld <= rdp_epsilon([(scaled, 1000)], 1e-5) * (1 + 1e-9)


def test_event_dict_round_trip():
    for event in (LAP.dp_event(), GAU.dp_event(), PureEpsilonDpEvent(0.3), dp_accounting.NoOpDpEvent()):
        assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event
    with pytest.raises(InvalidParameterError):
        event_to_dict(dp_accounting.ZCDpEvent(rho=0.1))


# ------------------------------------------------------------------ ledger
def filled_ledger():
    ledger = PrivacyLedger(["a", "b", "c"], target_delta=1e-5)
    for _ in range(50):
        ledger.record("a", LAP, 2)
        ledger.record("b", GAU, 3)
    ledger.record("b", GAU2, 10)
    return ledger


def test_ledger_totals_equal_dp_accounting():
    ledger = filled_ledger()
    assert ledger.steps("a") == 100 and ledger.steps("b") == 160 and ledger.steps("c") == 0
    assert ledger.spent("a", "basic") == pytest.approx((50.0, 0.0))
    eps_b, delta_b = ledger.spent("b", "basic")
    assert eps_b == pytest.approx(150 * 0.9 + 10 * 0.4) and delta_b == pytest.approx(150e-6 + 10e-7)
    events = [(GAU.dp_event(), 150), (GAU2.dp_event(), 10)]
    assert ledger.spent("b", "rdp") == (pytest.approx(reference(events, 1e-5, "rdp"), rel=1e-12), 1e-5)
    assert ledger.spent("b", "pld")[0] == pytest.approx(reference(events, 1e-5, "pld"), rel=2e-3)
    assert ledger.spent("a", "pld")[0] == pytest.approx(reference([(LAP.dp_event(), 100)], 1e-5, "pld"), rel=2e-3)
    assert ledger.spent("c", "pld") == (0.0, 0.0)


def test_ledger_accepts_agent_objects_and_events():
    class A:
        name = "a"

    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    ledger.record(A(), dp_accounting.LaplaceDpEvent(2.0), 3)
    ledger.record("a", GAU.dp_event(), 1, claim=(0.9, 1e-6))
    assert ledger.spent("a", "basic") == pytest.approx((1.5 + 0.9, 1e-6))
    with pytest.raises(InvalidParameterError, match="'agent' parameter of PrivacyLedger"):
        ledger.record("zz", LAP)
    with pytest.raises(InvalidParameterError, match="claim"):
        ledger.record("a", GAU.dp_event())
    with pytest.raises(InvalidParameterError):
        ledger.spent("a", "moments")
    with pytest.raises(InvalidParameterError):
        PrivacyLedger(["a", "a"], target_delta=1e-5)
    with pytest.raises(InvalidParameterError):
        PrivacyLedger(["a"], target_delta=1.0)


def test_summary_is_json_and_has_worst_agent():
    summary = filled_ledger().summary()
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary
    assert set(summary["per_agent"]) == {"a", "b", "c"}
    row = summary["per_agent"]["b"]
    assert set(row) == {"basic", "rdp", "pld", "steps", "free_steps"} and row["steps"] == 160
    worst = summary["worst"]
    assert worst["pld"] == max(r["pld"] for r in summary["per_agent"].values())
    assert worst["basic"][0] == pytest.approx(139.0) and worst["steps"] == 160
    assert summary["per_agent"][worst["agent"]]["pld"] == worst["pld"]
    assert summary["target_delta"] == 1e-5


def test_summary_writes_infinite_epsilon_as_null():
    ledger = PrivacyLedger(["a"], target_delta=0.0)
    ledger.record("a", GAU, 1)
    s = ledger.summary()
    assert s["per_agent"]["a"]["rdp"] is None and s["per_agent"]["a"]["pld"] is None
    json.dumps(s, allow_nan=False)


def test_ledger_round_trip():
    ledger = filled_ledger()
    back = PrivacyLedger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert back == ledger
    assert back.summary() == ledger.summary()
    with pytest.raises(InvalidParameterError):
        PrivacyLedger.from_dict({"agents": {"a": [{"event": {}}]}, "target_delta": 1e-5})


@pytest.mark.parametrize("accountant", ["basic", "rdp", "pld"])
def test_would_exceed(accountant):
    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    ledger.record("a", GAU, 10)
    spent = PrivacyLedger(["a"], target_delta=1e-5)
    spent.record("a", GAU, 11)
    eps11 = spent.spent("a", accountant)[0]
    budget_delta = 1e-5 if accountant != "basic" else 11e-6
    assert not ledger.would_exceed("a", GAU, 1, budget=(eps11 * 1.0001, budget_delta), accountant=accountant)
    assert ledger.would_exceed("a", GAU, 1, budget=(eps11 * 0.999, budget_delta), accountant=accountant)
    assert ledger.steps("a") == 10  # would_exceed records nothing
    if accountant == "basic":  # basic also guards delta
        assert ledger.would_exceed("a", GAU, 1, budget=(100.0, 10.5e-6), accountant="basic")


def test_spent_every_round_is_cheap():
    agents = [f"zone{i}" for i in range(10)]
    ledger = PrivacyLedger(agents, target_delta=1e-5)
    plans = [NoisePlan("gaussian", 3.0 + 0.1 * (i % 3), 0.5, 0.9, 1e-6) for i in range(10)]
    for p, name in enumerate(agents):
        ledger.record(name, plans[p], 300)
    for name in agents:  # warm: first evaluation of each distinct plan
        ledger.spent(name, "pld")
        ledger.spent(name, "rdp")
    before = (accounting._pld_cached.cache_info().misses, accounting._rdp_cached.cache_info().misses)
    for _ in range(20):
        for name in agents:
            ledger.spent(name, "pld")
            ledger.spent(name, "rdp")
            ledger.spent(name, "basic")
    # every repeated question is answered from the cache: no accountant is rebuilt per round
    after = (accounting._pld_cached.cache_info().misses, accounting._rdp_cached.cache_info().misses)
    assert after == before


def test_last_bit_differences_are_merged_conservatively():
    a, b = dp_accounting.GaussianDpEvent(6.0), dp_accounting.GaussianDpEvent(6.0 * (1 + 1e-13))
    assert pld_epsilon([(a, 10), (b, 10)], 1e-5) == pld_epsilon([(a, 20)], 1e-5)
    assert rdp_epsilon([(b, 10), (a, 10)], 1e-5) == rdp_epsilon([(a, 20)], 1e-5)
    c = dp_accounting.GaussianDpEvent(6.1)  # a real difference is kept apart
    assert rdp_epsilon([(a, 10), (c, 10)], 1e-5) != rdp_epsilon([(a, 20)], 1e-5)


def test_pld_of_a_nearly_noiseless_gaussian_falls_back_to_rdp():
    import dp_accounting

    from cvxdp.privacy import pld_epsilon, rdp_epsilon

    event = dp_accounting.GaussianDpEvent(noise_multiplier=0.01)  # dp-accounting's PLD would need terabytes

    eps = pld_epsilon([(event, 10)], 1e-5)

    assert eps == rdp_epsilon([(event, 10)], 1e-5)


# --------------------------------------------------------------------------- the budget guard
def _scan(ledger, agent, event, count, budget, accountant, claim, limit):
    """The rounds that fit, one composition per candidate (what the guard did every round before)."""
    k = 0
    while k < limit and not ledger.would_exceed(agent, event, (k + 1) * count, budget, accountant, claim=claim):
        k += 1
    return k


@pytest.mark.parametrize("accountant,noise", [("pld", "gaussian"), ("rdp", "gaussian"), ("basic", "laplace"),
                                              ("pld", "laplace")])
def test_repeats_within_equals_a_scan(accountant, noise):
    from cvxdp.privacy import PrivacyLedger

    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    if noise == "gaussian":
        event, claim = dp_accounting.GaussianDpEvent(4.0), (0.9, 1e-7)
    else:
        event, claim = dp_accounting.LaplaceDpEvent(2.0), (0.5, 0.0)
    ledger.record("a", dp_accounting.LaplaceDpEvent(3.0), 2)  # another mechanism recorded earlier
    for budget in [(2.0, 1e-5), (4.5, 1e-5), (50.0, 1e-5)]:
        expected = _scan(ledger, "a", event, 2, budget, accountant, claim, 30)
        assert ledger.repeats_within("a", event, 2, budget, accountant, claim=claim, limit=30) == expected


def test_the_guard_stops_at_the_round_a_check_per_round_stops():
    from cvxdp.privacy import BudgetGuard, PrivacyLedger

    names = ["a", "b", "c"]
    events = {"a": dp_accounting.GaussianDpEvent(3.0), "b": dp_accounting.GaussianDpEvent(5.0),
              "c": dp_accounting.GaussianDpEvent(3.0)}
    claim, budget, rounds = (1.0, 1e-7), (8.0, 1e-5), 40
    stops = []
    for guarded in (False, True):
        ledger, guard = PrivacyLedger(names, target_delta=1e-5), BudgetGuard(budget, "pld")
        stop = None
        for t in range(1, rounds + 1):
            if t == 3:  # the plan changes once: agent c's noise is raised
                events["c"] = dp_accounting.GaussianDpEvent(4.0)
            if guarded:
                over = guard.exceeds(ledger, [(n, events[n], 2, claim) for n in names], round=t, rounds=rounds)
            else:
                over = any(ledger.would_exceed(n, events[n], 2, budget, "pld", claim=claim) for n in names)
            if over:
                stop = t
                break
            for n in names:
                ledger.record(n, events[n], 2, claim=claim)
        stops.append(stop)
        events["c"] = dp_accounting.GaussianDpEvent(3.0)
    assert stops[0] is not None and 3 < stops[0] < rounds
    assert stops[1] == stops[0]
    # searches at round 1, at the plan change and at the stop (a and c share the first): not one per agent and round
    assert guard.searches <= 3 * len(names) < stops[0] * len(names)


def test_recording_a_known_charge_again_counts_up_and_a_new_one_is_still_checked():
    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    event = dp_accounting.GaussianDpEvent(2.0)
    for _ in range(3):
        ledger.record("a", event, 2, claim=(0.5, 1e-6))
    ledger.record("a", event, np.int64(1), claim=(np.float64(0.5), np.float64(1e-6)))  # numpy numbers: same key
    assert ledger.entries("a") == [(event, (0.5, 1e-6), 7)]
    with pytest.raises(InvalidParameterError, match="epsilon"):
        ledger.record("a", event, 1, claim=(-1.0, 1e-6))
    with pytest.raises(InvalidParameterError, match="count"):
        ledger.record("a", event, -1, claim=(0.5, 1e-6))
    assert ledger.entries("a") == [(event, (0.5, 1e-6), 7)]
