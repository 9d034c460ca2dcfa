"""The privacy ledger at its edges (SPEC §2.2): PrivacyLedger's checks, totals, summary and notes, the BudgetGuard's
rounds and searches, and the legacy graph-ledger format, each read against a closed form or dp-accounting itself."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from cvxdp.errors import InvalidParameterError, PrivacyWarning
from cvxdp.privacy import BudgetGuard, PrivacyLedger, PureEpsilonDpEvent, accounting
from cvxdp.privacy.accounting import ledger_from_dict
from cvxdp.privacy.composition import rdp_accountant

DELTA = 1e-5
GAUSS = dp_accounting.GaussianDpEvent(1.0)
GAUSS_CLAIM = (0.1, 1e-6)  # a per-step claim for basic composition (any valid pair: basic only sums them)


def rdp_reference(events_counts, delta):
    acc = RdpAccountant()
    for event, count in events_counts:
        acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return acc.get_epsilon(delta)


def randomized_response_rdp(epsilon, count, delta):
    """A pure epsilon step is accounted as binary randomized response with that epsilon (events.PureEpsilonDpEvent):
    dp-accounting's, replace-one, at the orders of the ledger's RDP accountant."""
    acc = RdpAccountant(orders=list(rdp_accountant()._orders),
                        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_accounting.RandomizedResponseDpEvent(noise_parameter=2 / (1 + math.exp(epsilon)), num_buckets=2),
                count)
    return acc.get_epsilon(delta)


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which privacy warnings were issued, so each test sees its own."""
    monkeypatch.setattr(accounting, "_WARNED", set())


# --------------------------------------------------------------------------- construction and API shape
def test_agent_names_must_be_a_non_empty_list_of_unique_strings():
    for names in ([], ["a", 1], ["a", "a"]):
        with pytest.raises(InvalidParameterError,
                           match=r"'agent_names' parameter of PrivacyLedger must be a non-empty list of unique str"):
            PrivacyLedger(names, target_delta=DELTA)
    ledger = PrivacyLedger(iter(["z", "a"]), target_delta=0.0)  # any iterable; delta 0 is allowed
    assert ledger.agent_names == ["z", "a"] and ledger.target_delta == 0.0


@pytest.mark.parametrize("delta", [-0.1, 1.0, float("nan")])
def test_target_delta_outside_zero_one_is_refused(delta):
    with pytest.raises(InvalidParameterError,
                       match=r"'target_delta' parameter of PrivacyLedger must be a float in \[0, 1\)"):
        PrivacyLedger(["a"], target_delta=delta)


def test_the_ledgers_options_are_keyword_only():
    with pytest.raises(TypeError):
        PrivacyLedger(["a"], DELTA)
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    with pytest.raises(TypeError):
        ledger.record("a", GAUSS, 1, GAUSS_CLAIM)
    with pytest.raises(TypeError):
        ledger.record_event("a", PureEpsilonDpEvent(0.5), 2)
    with pytest.raises(TypeError):
        ledger.spent("a", "rdp", 1e-3)
    with pytest.raises(TypeError):
        ledger.summary(False)
    with pytest.raises(TypeError):
        ledger.note("a reason", False)
    assert ledger.steps("a") == 0 and ledger.notes == []


# --------------------------------------------------------------------------- recording
def test_record_and_record_event_count_one_call_by_default():
    ledger = PrivacyLedger(["a", "b"], target_delta=DELTA)
    ledger.record("a", dp_accounting.LaplaceDpEvent(2.0))
    ledger.record_event("b", PureEpsilonDpEvent(0.3))
    ledger.record_event("b", dp_accounting.NoOpDpEvent())
    assert ledger.steps("a") == 1 and ledger.spent("a", "basic") == (0.5, 0.0)
    assert ledger.steps("b") == 1 and ledger.free_steps("b") == 1 and ledger.spent("b", "basic") == (0.3, 0.0)


def test_record_event_refuses_a_gaussian_without_a_claim():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    for event in (GAUSS, dp_accounting.PoissonSampledDpEvent(0.1, GAUSS)):
        with pytest.raises(InvalidParameterError, match="record_event: a GaussianDpEvent implies no"):
            ledger.record_event("a", event, count=3)
    ledger.record_event("a", dp_accounting.LaplaceDpEvent(4.0), count=3)
    assert ledger.entries("a") == [(dp_accounting.LaplaceDpEvent(4.0), (0.25, 0.0), 3)]


@pytest.mark.parametrize("count", [1.0, True, 2.5])
def test_a_known_charge_recorded_again_still_needs_an_int_count(count):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    ledger.record("a", GAUSS, 2, claim=GAUSS_CLAIM)
    with pytest.raises(InvalidParameterError, match=r"'count' parameter of PrivacyLedger.record must be an int"):
        ledger.record("a", GAUSS, count, claim=GAUSS_CLAIM)
    assert ledger.entries("a") == [(GAUSS, GAUSS_CLAIM, 2)]


# --------------------------------------------------------------------------- totals
def test_pure_epsilon_steps_spend_at_most_their_basic_sum():
    ledger = PrivacyLedger(["few", "many"], target_delta=DELTA)
    ledger.record_event("few", PureEpsilonDpEvent(1.0), count=2)
    ledger.record_event("many", PureEpsilonDpEvent(0.05), count=400)
    # two steps of epsilon 1: RDP's conversion gives more than the sum, so the (exact) sum is reported
    assert randomized_response_rdp(1.0, 2, DELTA) > 2.0
    assert ledger.spent("few", "rdp") == (2.0, DELTA)
    assert ledger.spent("few", "pld")[0] <= 2.0
    # 400 steps of 0.05: RDP's total is far below the sum of 20 and is dp-accounting's randomized response
    expected = randomized_response_rdp(0.05, 400, DELTA)
    assert expected < 10.0
    assert ledger.spent("many", "rdp")[0] == pytest.approx(expected, rel=1e-12)


def test_spent_at_another_delta_is_dp_accountings():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    ledger.record("a", GAUSS, 3, claim=GAUSS_CLAIM)
    eps, delta = ledger.spent("a", "rdp", delta=1e-3)
    assert delta == 1e-3 and eps == pytest.approx(rdp_reference([(GAUSS, 3)], 1e-3), rel=1e-12)
    assert eps < ledger.spent("a", "rdp")[0]  # a larger delta buys a smaller epsilon
    pld = PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dp_accounting.SelfComposedDpEvent(GAUSS, 3))
    assert ledger.spent("a", "pld", delta=1e-3)[0] == pytest.approx(pld.get_epsilon(1e-3), rel=2e-3)
    assert ledger.spent("a", "basic", delta=1e-3) == pytest.approx((0.3, 3e-6))  # basic ignores delta
    laplace = PrivacyLedger(["a"], target_delta=DELTA)
    laplace.record("a", dp_accounting.LaplaceDpEvent(2.0), 3)
    assert laplace.spent("a", "pld", delta=0.0) == (1.5, 0.0)  # pure: the sum at delta 0


@pytest.mark.parametrize("delta", [-1e-3, 1.0, 1.5])
def test_spent_refuses_a_delta_outside_zero_one(delta):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    ledger.record("a", GAUSS, 1, claim=GAUSS_CLAIM)
    with pytest.raises(InvalidParameterError,
                       match=r"'delta' parameter of PrivacyLedger.spent must be a float in \[0, 1\)"):
        ledger.spent("a", "rdp", delta=delta)


def test_worst_epsilon_is_the_largest_total_and_zero_for_no_records():
    ledger = PrivacyLedger(["a", "b", "idle"], target_delta=DELTA)
    assert ledger.worst_epsilon("basic") == 0.0 and ledger.worst_epsilon("rdp") == 0.0
    ledger.record_event("a", PureEpsilonDpEvent(0.3))
    assert ledger.worst_epsilon("basic") == 0.3  # the idle agents spent 0, not more
    ledger.record("b", GAUSS, 2, claim=GAUSS_CLAIM)
    assert ledger.worst_epsilon("rdp") == pytest.approx(rdp_reference([(GAUSS, 2)], DELTA), rel=1e-12)
    assert ledger.worst_epsilon("basic") == 0.3
    with pytest.raises(InvalidParameterError, match="'accountant' parameter of PrivacyLedger.worst_epsilon"):
        ledger.worst_epsilon("moments")


# --------------------------------------------------------------------------- would_exceed and repeats_within
def test_would_exceed_adds_one_call_by_default():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    laplace = dp_accounting.LaplaceDpEvent(2.0)  # epsilon 0.5 per call
    assert not ledger.would_exceed("a", laplace, budget=(0.6, 0.0), accountant="basic")
    assert ledger.would_exceed("a", laplace, budget=(0.4, 0.0), accountant="basic")
    ledger.record("a", laplace, 1)
    assert not ledger.would_exceed("a", laplace, budget=(1.1, 0.0), accountant="basic")
    assert ledger.would_exceed("a", laplace, budget=(0.9, 0.0), accountant="basic")


def test_a_budget_met_exactly_is_not_exceeded():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    laplace = dp_accounting.LaplaceDpEvent(2.0)
    ledger.record("a", laplace, 1)
    assert not ledger.would_exceed("a", laplace, 1, (1.0, 0.0), "basic", rtol=0.0)
    assert ledger.would_exceed("a", laplace, 1, (0.999, 0.0), "basic", rtol=0.0)
    # delta: a Gaussian claim's deltas are met exactly too
    ledger.record("a", GAUSS, 1, claim=GAUSS_CLAIM)
    assert not ledger.would_exceed("a", GAUSS, 1, (10.0, 2e-6), "basic", claim=GAUSS_CLAIM, rtol=0.0)
    assert ledger.would_exceed("a", GAUSS, 1, (10.0, 1.9e-6), "basic", claim=GAUSS_CLAIM, rtol=0.0)


@pytest.mark.parametrize("budget,message", [
    (None, r"'budget' parameter of PrivacyLedger.would_exceed must be a pair \(epsilon, delta\)"),
    ((1.0,), r"'budget' parameter of PrivacyLedger.would_exceed must be a pair \(epsilon, delta\)"),
    ((1.0, 1e-5, 0.0), r"'budget' parameter of PrivacyLedger.would_exceed must be a pair \(epsilon, delta\)"),
    ((0.0, 1e-5), r"'budget epsilon' parameter of PrivacyLedger.would_exceed must be a float in \(0, inf\)"),
    ((-0.5, 1e-5), r"'budget epsilon' parameter of PrivacyLedger.would_exceed must be a float in \(0, inf\)"),
    ((1.0, -1e-5), r"'budget delta' parameter of PrivacyLedger.would_exceed must be a float in \[0, 1\)"),
    ((1.0, 1.0), r"'budget delta' parameter of PrivacyLedger.would_exceed must be a float in \[0, 1\)"),
])
def test_would_exceed_refuses_a_bad_budget_by_name(budget, message):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    with pytest.raises(InvalidParameterError, match=message):
        ledger.would_exceed("a", dp_accounting.LaplaceDpEvent(2.0), 1, budget, "basic")


def test_a_budget_below_one_epsilon_is_a_budget():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    assert not ledger.would_exceed("a", dp_accounting.LaplaceDpEvent(4.0), 1, (0.5, 0.0), "pld")
    assert ledger.would_exceed("a", dp_accounting.LaplaceDpEvent(4.0), 3, (0.5, 0.0), "pld")


def test_repeats_within_is_the_closed_form_count():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    laplace = dp_accounting.LaplaceDpEvent(2.0)  # 0.5 per call
    ledger.record("a", dp_accounting.LaplaceDpEvent(4.0), 2)  # 0.5 spent earlier
    # rounds of one call: (3.0 - 0.5) / 0.5 = 5 fit
    assert ledger.repeats_within("a", laplace, 1, (3.0, 0.0), "basic", limit=10) == 5
    assert ledger.repeats_within("a", laplace, 1, (3.0, 0.0), "basic", limit=3) == 3
    # rounds of two calls: 2 fit
    assert ledger.repeats_within("a", laplace, 2, (3.0, 0.0), "basic", limit=10) == 2
    # one round of 6 calls (3.0) does not fit after 0.5: a limit of 1 is searched too
    assert ledger.repeats_within("a", laplace, 6, (3.0, 0.0), "basic", limit=1) == 0
    assert ledger.repeats_within("a", laplace, 5, (3.0, 0.0), "basic", limit=1) == 1
    assert ledger.repeats_within("a", laplace, 1, (3.0, 0.0), "basic", limit=0) == 0


def test_repeats_within_under_rdp_is_dp_accountings_count():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    event, budget = dp_accounting.GaussianDpEvent(3.0), (6.0, DELTA)
    calls = next(k for k in range(1, 41) if rdp_reference([(event, k + 1)], DELTA) > budget[0])  # calls that fit
    assert 10 <= calls < 40
    assert ledger.repeats_within("a", event, 1, budget, "rdp", claim=GAUSS_CLAIM, limit=40) == calls
    assert ledger.repeats_within("a", event, 2, budget, "rdp", claim=GAUSS_CLAIM, limit=40) == calls // 2


def test_nothing_more_fits_an_agent_already_past_its_budget_but_zero_calls_always_do():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    laplace = dp_accounting.LaplaceDpEvent(1.0)
    ledger.record("a", laplace, 3)  # 3.0 spent against a budget of 2.0
    for limit in (1, 2, 3, 7):
        assert ledger.repeats_within("a", laplace, 1, (2.0, 0.0), "basic", limit=limit) == 0
    assert ledger.repeats_within("a", laplace, 0, (2.0, 0.0), "basic", limit=7) == 7


def test_repeats_within_refuses_a_negative_limit_by_name():
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    with pytest.raises(InvalidParameterError,
                       match=r"'limit' parameter of PrivacyLedger.repeats_within must be an int in \[0, inf\]"):
        ledger.repeats_within("a", dp_accounting.LaplaceDpEvent(1.0), 1, (2.0, 0.0), "basic", limit=-1)


# --------------------------------------------------------------------------- summary
def test_summary_rows_and_worst_are_the_closed_form_totals():
    ledger = PrivacyLedger(["a", "b"], target_delta=DELTA)
    ledger.record("a", dp_accounting.LaplaceDpEvent(0.5), 2)  # basic (4.0, 0)
    ledger.record("b", GAUSS, 3, claim=(0.5, 2e-6))  # basic (1.5, 6e-6)
    s = ledger.summary(pld=False)
    assert s["per_agent"]["a"]["basic"] == [4.0, 0.0]
    assert s["per_agent"]["b"]["basic"] == [1.5, pytest.approx(6e-6)]
    assert s["worst"]["basic"] == [4.0, pytest.approx(6e-6)]  # the largest epsilon and the largest delta
    assert s["worst"]["agent"] == "a"  # pld=False: by basic epsilon (b has the larger delta and RDP epsilon)
    rdp_b = rdp_reference([(GAUSS, 3)], DELTA)
    assert s["per_agent"]["b"]["rdp"] == pytest.approx(rdp_b, rel=1e-12) and rdp_b > s["per_agent"]["a"]["rdp"]
    assert s["worst"]["rdp"] == s["per_agent"]["b"]["rdp"] and s["worst"]["pld"] is None
    assert "note" not in s


def test_summary_worst_agent_is_the_largest_pld_epsilon_not_the_first():
    ledger = PrivacyLedger(["small", "large", "idle"], target_delta=DELTA)
    ledger.record("small", dp_accounting.LaplaceDpEvent(4.0), 1)
    ledger.record("large", dp_accounting.LaplaceDpEvent(1.0), 1)
    s = ledger.summary()
    assert s["worst"]["agent"] == "large" and s["worst"]["pld"] == s["per_agent"]["large"]["pld"]
    assert s["per_agent"]["large"]["pld"] == pytest.approx(1.0, rel=1e-3)
    assert s["per_agent"]["idle"] == {"basic": [0.0, 0.0], "rdp": 0.0, "pld": 0.0, "steps": 0, "free_steps": 0}
    assert "note" not in s


def test_summary_worst_agent_is_one_with_an_infinite_epsilon():
    ledger = PrivacyLedger(["pure", "gauss"], target_delta=0.0)  # Gaussian noise has no epsilon at delta 0
    ledger.record("pure", dp_accounting.LaplaceDpEvent(0.5), 4)
    ledger.record("gauss", GAUSS, 1, claim=GAUSS_CLAIM)
    s = ledger.summary()
    assert s["per_agent"]["gauss"]["pld"] is None and s["per_agent"]["pure"]["pld"] == 8.0
    assert s["worst"]["agent"] == "gauss" and s["worst"]["pld"] is None and s["worst"]["rdp"] is None


def test_summary_worst_basic_epsilon_is_none_when_one_is_infinite():
    ledger = PrivacyLedger(["a", "b"], target_delta=DELTA)
    ledger.record("a", GAUSS, 2, claim=(1e308, 1e-6))  # the sum overflows to inf
    ledger.record("b", GAUSS, 1, claim=GAUSS_CLAIM)
    s = ledger.summary(pld=False)
    assert s["per_agent"]["a"]["basic"] == [None, 2e-6]
    assert s["worst"]["basic"] == [None, 2e-6] and s["worst"]["agent"] == "a"


def test_a_multiplier_exactly_at_the_pld_floor_is_composed_under_pld():
    assert accounting.MIN_PLD_MULTIPLIER == 0.05
    at_floor = PrivacyLedger(["a"], target_delta=DELTA)
    at_floor.record("a", dp_accounting.GaussianDpEvent(0.05), 1, claim=GAUSS_CLAIM)
    assert at_floor.pld_feasible()
    s = at_floor.summary()
    assert "note" not in s
    exact = dp_accounting.get_epsilon_gaussian(0.05, DELTA)  # one Gaussian call: the analytic epsilon
    assert exact <= s["per_agent"]["a"]["pld"] <= exact * 1.01 < s["per_agent"]["a"]["rdp"]
    # well above the floor: composed as well
    above = PrivacyLedger(["a"], target_delta=DELTA)
    above.record("a", dp_accounting.GaussianDpEvent(0.5), 1, claim=GAUSS_CLAIM)
    assert above.pld_feasible() and above.summary()["per_agent"]["a"]["pld"] is not None


def test_below_the_pld_floor_the_summary_skips_pld_and_ranks_by_rdp():
    ledger = PrivacyLedger(["noisy", "laplace"], target_delta=DELTA)
    ledger.record("noisy", dp_accounting.GaussianDpEvent(0.049), 1, claim=(0.1, 1e-6))  # huge RDP, small claim
    ledger.record("laplace", dp_accounting.LaplaceDpEvent(0.5), 1)  # basic 2.0, RDP about 2
    assert not ledger.pld_feasible()
    s = ledger.summary()
    assert s["note"] == "PLD not computed: a noise multiplier is below 0.05"
    assert s["per_agent"]["noisy"]["pld"] is None and s["worst"]["pld"] is None
    assert s["per_agent"]["noisy"]["rdp"] == pytest.approx(
        rdp_reference([(dp_accounting.GaussianDpEvent(0.049), 1)], DELTA), rel=1e-12)
    assert s["worst"]["agent"] == "noisy"  # by RDP (by basic it would be "laplace")
    assert s["per_agent"]["laplace"]["basic"][0] > s["per_agent"]["noisy"]["basic"][0]
    # asked for explicitly, PLD is computed and no note is added
    forced = ledger.summary(pld=True)
    assert "note" not in forced and forced["per_agent"]["noisy"]["pld"] is not None
    assert forced["worst"]["agent"] == "noisy"


# --------------------------------------------------------------------------- notes and warnings
def test_a_note_voids_the_guarantee_and_warns_from_the_callers_line(fresh_warnings):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    with pytest.warns(PrivacyWarning, match="^Not a privacy guarantee: a preset") as record:
        ledger.note("a preset")
    assert [w.filename for w in record] == [__file__]
    assert ledger.guarantee is False and ledger.notes == [{"reason": "a preset", "voids": True}]
    with pytest.warns(PrivacyWarning, match="^Conditional privacy guarantee: an assumption") as record:
        ledger.note("an assumption", voids=False)
    assert [w.filename for w in record] == [__file__]
    assert ledger.summary()["notes"][1] == {"reason": "an assumption", "voids": False}


def test_a_note_without_a_warning_still_voids(fresh_warnings, recwarn):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    ledger.note("silent", warn=False)
    assert ledger.guarantee is False and not [w for w in recwarn if w.category is PrivacyWarning]


def test_a_ledger_read_back_restores_its_notes_without_warning(fresh_warnings, recwarn):
    ledger = PrivacyLedger(["a"], target_delta=DELTA)
    ledger.record("a", GAUSS, 2, claim=GAUSS_CLAIM)
    ledger.note("voiding", warn=False)
    ledger.note("conditional", voids=False, warn=False)
    back = PrivacyLedger.from_dict(ledger.to_dict())
    assert back == ledger and back.guarantee is False
    assert back.notes == [{"reason": "voiding", "voids": True}, {"reason": "conditional", "voids": False}]
    assert not [w for w in recwarn if w.category is PrivacyWarning]


def test_ledgers_equal_only_with_equal_delta_records_and_notes():
    def make(delta=DELTA, count=2, note=None):
        ledger = PrivacyLedger(["a"], target_delta=delta)
        ledger.record("a", GAUSS, count, claim=GAUSS_CLAIM)
        if note:
            ledger.note(note, warn=False)
        return ledger

    assert make() == make()
    assert make() != make(delta=1e-6)
    assert make() != make(count=3)
    assert make() != make(note="a reason")
    assert make() != "not a ledger"


# --------------------------------------------------------------------------- the budget guard
LAP1 = dp_accounting.LaplaceDpEvent(1.0)  # epsilon 1 per call
PURE1 = PureEpsilonDpEvent(1.0)


def run_guarded(guard, ledger, charges_of_round, rounds):
    """Rounds 1..rounds, each checked by the guard and recorded if it fits; the round that stopped, or None."""
    for t in range(1, rounds + 1):
        charges = charges_of_round(t)
        if guard.exceeds(ledger, charges, round=t, rounds=rounds):
            return t
        for agent, event, count, claim in charges:
            ledger.record(agent, event, count, claim=claim)
    return None


def test_a_run_within_its_budget_is_never_stopped_and_searches_once():
    ledger, guard = PrivacyLedger(["a", "b"], target_delta=DELTA), BudgetGuard((5.0, 0.0), "basic")
    assert guard.searches == 0
    charges = [("a", PURE1, 1, (1.0, 0.0)), ("b", PURE1, 1, (1.0, 0.0))]
    assert run_guarded(guard, ledger, lambda t: charges, rounds=5) is None  # 5 x 1.0 meets the budget exactly
    assert ledger.spent("a", "basic") == (5.0, 0.0) == ledger.spent("b", "basic")
    assert guard.searches == 1  # a and b share one search; rounds 2-5 are known to fit


def test_the_guard_stops_at_the_first_round_past_the_budget():
    ledger, guard = PrivacyLedger(["a"], target_delta=DELTA), BudgetGuard((3.5, 0.0), "basic")
    charges = [("a", PURE1, 1, (1.0, 0.0))]
    assert run_guarded(guard, ledger, lambda t: charges, rounds=10) == 4  # 3 x 1.0 fit, a fourth does not
    assert ledger.spent("a", "basic") == (3.0, 0.0)


def test_new_charges_are_checked_even_within_the_rounds_the_old_ones_fit():
    ledger, guard = PrivacyLedger(["a"], target_delta=DELTA), BudgetGuard((3.5, 0.0), "basic")
    cheap, dear = [("a", PURE1, 1, (1.0, 0.0))], [("a", PureEpsilonDpEvent(3.0), 1, (3.0, 0.0))]
    stop = run_guarded(guard, ledger, lambda t: cheap if t == 1 else dear, rounds=10)
    assert stop == 2 and ledger.spent("a", "basic") == (1.0, 0.0)  # 1.0 + 3.0 > 3.5


def test_agents_with_different_records_do_not_share_a_search():
    # both agents have one earlier record and no record of the charge: a spent 1.0 (one more round fits),
    # b spent 3.0 (none fits)
    ledger = PrivacyLedger(["a", "b"], target_delta=DELTA)
    ledger.record("a", LAP1, 1)
    ledger.record("b", LAP1, 3)
    guard = BudgetGuard((2.5, 0.0), "basic")
    assert guard.exceeds(ledger, [("a", PURE1, 1, (1.0, 0.0)), ("b", PURE1, 1, (1.0, 0.0))], round=1, rounds=5)
    assert guard.searches == 2


def test_an_agent_without_the_charge_does_not_share_a_search_with_one_that_has_it_once():
    # a: [Laplace 1.0]; b: [Laplace 1.0, the charge once] -- the same other records and position
    ledger = PrivacyLedger(["a", "b"], target_delta=DELTA)
    ledger.record("a", LAP1, 1)
    ledger.record("b", LAP1, 1)
    ledger.record_event("b", PURE1)
    guard = BudgetGuard((2.5, 0.0), "basic")
    charges = [("a", PURE1, 1, (1.0, 0.0)), ("b", PURE1, 1, (1.0, 0.0))]
    assert guard.exceeds(ledger, charges, round=1, rounds=5)  # a fits one more round, b (2.0 spent) none
    assert guard.searches == 2


# --------------------------------------------------------------------------- the legacy graph-ledger format
def legacy(agents, **extra):
    return {"format": "cvxdp-gamma-ledger/1", "target_delta": DELTA, "agents": agents, **extra}


def test_a_legacy_graph_ledger_is_converted_step_by_step(fresh_warnings, recwarn):
    d = legacy({"a": [[1, 0.5], [2, 0.0], [3, 0.5]], "b": [[1, 1.0], [2, 1.0]], "c": []},
               notes=[{"reason": "legacy note", "voids": True}])
    ledger = ledger_from_dict(d)
    assert ledger.agent_names == ["a", "b", "c"] and ledger.target_delta == DELTA
    assert (ledger.steps("a"), ledger.free_steps("a")) == (2, 1)
    assert ledger.entries("a") == [(PureEpsilonDpEvent(0.5), (0.5, 0.0), 2), (dp_accounting.NoOpDpEvent(), (0.0, 0.0), 1)]
    assert ledger.spent("a", "basic") == (1.0, 0.0) and ledger.spent("a", "pld", delta=0.0) == (1.0, 0.0)
    assert (ledger.steps("b"), ledger.free_steps("b")) == (2, 0) and ledger.spent("b", "basic") == (2.0, 0.0)
    assert ledger.spent("c", "basic") == (0.0, 0.0)
    assert ledger.notes == [{"reason": "legacy note", "voids": True}] and not ledger.guarantee
    assert not [w for w in recwarn if w.category is PrivacyWarning]
    # the current format goes to from_dict
    assert ledger_from_dict(ledger.to_dict()) == ledger


@pytest.mark.parametrize("d", [
    {"format": "cvxdp-gamma-ledger/1", "agents": {"a": [[1, 0.5]]}},  # no target_delta
    legacy({"a": [5]}),  # a step that is not a pair
    legacy({"a": [[1, "half"]]}),  # an epsilon that is not a number
    legacy({"a": [[1, -0.5]]}),  # a negative epsilon
])
def test_a_malformed_legacy_graph_ledger_is_refused_by_name(d):
    with pytest.raises(InvalidParameterError, match="ledger_from_dict: malformed graph ledger dict"):
        ledger_from_dict(d)


@pytest.mark.parametrize("count,limit", [(1, 0), (0, 5)])
def test_repeats_within_checks_its_arguments_even_when_nothing_is_searched(count, limit):
    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    with pytest.raises(InvalidParameterError, match="'agent' parameter of PrivacyLedger"):
        ledger.repeats_within("nobody", dp_accounting.LaplaceDpEvent(1.0), count, (2.0, 0.0), "basic", limit=limit)
    with pytest.raises(InvalidParameterError, match=r"'budget' parameter of PrivacyLedger.repeats_within"):
        ledger.repeats_within("a", dp_accounting.LaplaceDpEvent(1.0), count, "garbage", "basic", limit=limit)
    with pytest.raises(InvalidParameterError, match="'accountant' parameter of PrivacyLedger.repeats_within"):
        ledger.repeats_within("a", dp_accounting.LaplaceDpEvent(1.0), count, (2.0, 0.0), "moments", limit=limit)
    with pytest.raises(InvalidParameterError, match="'event' parameter of PrivacyLedger.record"):
        ledger.repeats_within("a", "not an event", count, (2.0, 0.0), "basic", limit=limit)


def test_the_budget_guard_checks_its_budget_accountant_and_rounds():
    with pytest.raises(InvalidParameterError, match=r"'budget' parameter of BudgetGuard must be a pair"):
        BudgetGuard("x", "basic")
    with pytest.raises(InvalidParameterError, match="'accountant' parameter of BudgetGuard"):
        BudgetGuard((1.0, 0.0), "moments")
    guard, ledger = BudgetGuard((1.0, 0.0), "basic"), PrivacyLedger(["a"], target_delta=1e-5)
    for round in (0, 6):
        with pytest.raises(InvalidParameterError, match=r"'round' parameter of BudgetGuard.exceeds must be an int "
                                                        r"in \[1, 5\]"):
            guard.exceeds(ledger, [], round=round, rounds=5)


def test_the_budget_guards_round_and_rounds_are_keyword_only():
    # two ints that are easy to swap: exceeds(ledger, charges, round=..., rounds=...)
    with pytest.raises(TypeError):
        BudgetGuard((1.0, 0.0), "basic").exceeds(PrivacyLedger(["a"], target_delta=1e-5), [], 1, 5)


def test_a_one_round_run_is_checked_and_zero_rounds_are_refused_by_name():
    guard, ledger = BudgetGuard((1.0, 0.0), "basic"), PrivacyLedger(["a"], target_delta=1e-5)
    assert guard.exceeds(ledger, [], round=1, rounds=1) is False
    with pytest.raises(InvalidParameterError, match=r"'rounds' parameter of BudgetGuard.exceeds must be an int in "
                                                    r"\[1, inf\]"):
        guard.exceeds(ledger, [], round=1, rounds=0)
