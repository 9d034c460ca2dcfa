"""A party's own policy and lifetime ledger, read against their documented values (docs/federation.md).

The attack suite (test_malicious.py) checks that a party refuses what its policy does not allow; these tests pin the
policy itself: the defaults a party file without [limits] gets, each bound at its edge, the party file's tables
refused with the key they break, and the lifetime ledger's file (a torn last record, a corrupt one, another data set's
records, the start-time refusal of a spent budget).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import warnings

import dp_accounting
import pytest

from cvxdp.errors import ConfigError, CvxdpError, PartyRefusedError
from cvxdp.federation.policy import LEDGER_FILE, LifetimeLedger, Limits, PartyPolicy, append_synced
from cvxdp.privacy import pure_epsilon_event

OBJG = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}


def policy(privacy=None, budget=None, limits=None) -> PartyPolicy:
    return PartyPolicy(dict(OBJG) if privacy is None else privacy, budget, limits, "party.toml")


def laplace(eps: float):
    """A Laplace release's charge: (event, per-call claim, calls)."""
    return pure_epsilon_event(eps), (eps, 0.0), 1


# ---------------------------------------------------------------- limits
def test_a_party_without_limits_gets_the_documented_defaults():
    limits = policy().limits
    assert limits == Limits()
    assert (limits.rounds, limits.message_bytes, limits.lock_timeout) == (100_000, 268_435_456, 300.0)
    assert limits.eta == limits.rho == (0.0, math.inf)
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.rounds = 10**9


def test_the_default_limits_take_any_positive_weight_and_refuse_zero_or_less():
    limits = Limits()
    for name in ("eta", "rho"):
        for value in (1e-12, 0.5, 1e12):
            limits.check_weight(name, value, party="p", round=1, field=name)
        for value in (0.0, -0.5):
            with pytest.raises(PartyRefusedError) as info:
                limits.check_weight(name, value, party="p", round=1, field=f"messages.a.{name}")
            assert info.value.field == f"messages.a.{name}"


def test_a_weight_bound_is_open_below_and_closed_above():
    limits = Limits.from_table({"eta": [0.1, 10.0]}, "party.toml")
    limits.check_weight("eta", 10.0, party="p", round=3, field="eta")
    for value in (0.1, 10.000001):
        with pytest.raises(PartyRefusedError, match=r"round 3: eta = .* lies outside its limits \(0.1, 10\]"):
            limits.check_weight("eta", value, party="p", round=3, field="eta")


def test_a_run_of_exactly_the_limit_runs_and_one_more_is_refused():
    Limits().check_rounds(100_000, party="p")
    with pytest.raises(PartyRefusedError, match="100001 rounds; its limit is 100000"):
        Limits().check_rounds(100_001, party="p")
    limits = Limits.from_table({"rounds": 1}, "party.toml")
    limits.check_rounds(1, party="p")
    with pytest.raises(PartyRefusedError) as info:
        limits.check_rounds(2, party="p")
    assert info.value.field == "algorithm.rounds"


@pytest.mark.parametrize("table, accepted", [
    ({"rounds": 1}, {"rounds": 1}),
    ({"message_bytes": 1024}, {"message_bytes": 1024}),
    ({"lock_timeout": 0.5}, {"lock_timeout": 0.5}),
    ({"eta": [0.0, 1.0]}, {"eta": (0.0, 1.0)}),
    ({"rho": [0.5, 0.75]}, {"rho": (0.5, 0.75)}),
])
def test_each_limit_is_read_at_its_edge(table, accepted):
    limits = Limits.from_table(table, "party.toml")
    assert {key: getattr(limits, key) for key in accepted} == accepted


@pytest.mark.parametrize("table, key", [
    ({"rounds": 0}, "rounds"),
    ({"message_bytes": 1023}, "message_bytes"),
    ({"lock_timeout": 0.0}, "lock_timeout"),
    ({"lock_timeout": -0.5}, "lock_timeout"),
    ({"eta": [-0.5, 1.0]}, "eta[0]"),
    ({"eta": [1.0, 0.5]}, "eta[1]"),
    ({"eta": 5}, "eta"),
    ({"eta": "ab"}, "eta"),
    ({"rho": [1e-3, 1.0, 5.0]}, "rho"),
    ({"rho": [1e-3]}, "rho"),
    ({"rounds": 5, "step": 1}, "step"),
])
def test_a_limit_outside_its_range_is_refused_naming_it(table, key):
    with pytest.raises(CvxdpError, match=re.escape(key)) as info:
        Limits.from_table(table, "party.toml")
    assert "party.toml" in str(info.value)


# ---------------------------------------------------------------- the [privacy] and [budget] tables
def test_a_privacy_table_without_a_mechanism_names_the_mechanisms():
    with pytest.raises(ConfigError, match=r"party.toml: \[privacy\] needs a 'mechanism' \(one of 'none', 'ObjL'"):
        policy({"epsilon": 1.0})


def test_a_bad_mechanism_parameter_is_reported_with_the_party_file():
    with pytest.raises(ConfigError, match=r"^party.toml: .*'epsilon' parameter of ObjectivePerturbation"):
        policy({"mechanism": "ObjG", "epsilon": -1.0, "delta": 1e-6})


@pytest.mark.parametrize("algorithms", ["ladmm", [], ["ladmm", "nope"], ("ladmm",)])
def test_the_algorithms_a_policy_takes_part_in_are_a_list_of_known_names(algorithms):
    with pytest.raises(CvxdpError, match="'algorithms'.*party.toml|party.toml.*algorithms"):
        policy({**OBJG, "algorithms": algorithms})


def test_a_policy_limited_to_some_algorithms_refuses_the_others():
    p = policy({**OBJG, "algorithms": ["madmm", "ladmm"]})
    assert p.algorithms == ("madmm", "ladmm")
    assert p.describe()["algorithms"] == ["madmm", "ladmm"]
    assert p.accept({"name": "ladmm", "rounds": 3}, OBJG, "pld", party="p").rounds == 3
    with pytest.raises(PartyRefusedError) as info:
        p.accept({"name": "admm", "rounds": 3}, OBJG, "pld", party="p")
    assert info.value.field == "algorithm.name"


def test_mechanism_names_and_privateness():
    assert policy().mechanism_name == "ObjG" and policy().private is True
    none = policy({"mechanism": "none"})
    assert none.mechanism_name == "none" and none.private is False
    assert none.mechanism_for("a", party="p") is None


def test_a_graph_policy_may_give_each_agent_its_own_rate():
    p = policy({"mechanism": "gamma", "alpha": {"a": 1.5, "b": 4.0}})
    assert p.mechanism_for("a", party="p").describe()["alpha"] == 1.5
    assert p.mechanism_for("b", party="p").describe()["alpha"] == 4.0
    with pytest.raises(ConfigError, match="Party 'p': its \\[privacy\\] alpha table has no entry for agent 'c'"):
        p.mechanism_for("c", party="p")
    one = policy({"mechanism": "gamma", "alpha": 3.0})
    assert one.mechanism_for("anyone", party="p").describe()["alpha"] == 3.0


def test_a_coordinators_privacy_table_that_does_not_validate_is_refused_as_such():
    with pytest.raises(PartyRefusedError) as info:
        policy().accept({"name": "ladmm", "rounds": 3}, {**OBJG, "epsilon": -1.0}, "pld", party="p")
    assert info.value.field == "privacy" and "ObjectivePerturbation" in str(info.value)


def test_a_budget_is_epsilon_and_an_optional_delta_in_their_ranges():
    assert policy(budget={"epsilon": 2.0}).budget == (2.0, 0.0)
    assert policy(budget={"epsilon": 2.0, "delta": 0.5}).budget == (2.0, 0.5)
    assert policy(budget={"epsilon": 2.0, "delta": 0.0}).budget == (2.0, 0.0)
    assert policy().budget is None


@pytest.mark.parametrize("budget, key", [
    ({"delta": 1e-5}, "epsilon"),
    ({"epsilon": 1.0, "spent": 0.0}, "spent"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": -0.5}, "epsilon"),
    ({"epsilon": 1.0, "delta": -0.5}, "delta"),
    ({"epsilon": 1.0, "delta": 1.0}, "delta"),
    ({"epsilon": 1.0, "delta": 1.5}, "delta"),
])
def test_a_bad_budget_is_refused_naming_the_key(budget, key):
    with pytest.raises(CvxdpError, match=re.escape(key)) as info:
        policy(budget=budget)
    assert "party.toml" in str(info.value)


# ---------------------------------------------------------------- the lifetime ledger's file
def lifetime(folder, budget=(1.0, 1e-5), accountant="basic", dataset="d", agents=("a", "b")) -> LifetimeLedger:
    return LifetimeLedger(folder, dataset, list(agents), budget, accountant)


def lines(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / LEDGER_FILE).read_text().splitlines()]


def test_its_folder_is_synced_when_the_file_is_created_and_not_on_every_append(tmp_path, monkeypatch):
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, flags, *a: opened.append(str(path)) or real_open(path, flags, *a))
    path = tmp_path / "file.jsonl"
    append_synced(path, ["one"])
    assert opened == [str(tmp_path)]
    append_synced(path, ["two", "three"])
    assert opened == [str(tmp_path)]
    assert path.read_text() == "one\ntwo\nthree\n"


def test_a_torn_last_record_was_never_synced_and_is_dropped(tmp_path):
    ledger = lifetime(tmp_path)
    ledger.charge("r1", 1, {"a": laplace(0.25)}, {"a": "q1"})
    whole = (tmp_path / LEDGER_FILE).read_bytes()
    (tmp_path / LEDGER_FILE).write_bytes(whole + b'{"kind": "charge", "dataset": "d", "ru')
    again = lifetime(tmp_path)
    assert (tmp_path / LEDGER_FILE).read_bytes() == whole
    assert [r["kind"] for r in again.records] == ["budget", "charge"]
    assert again.ledger.spent("a", "basic") == (0.25, 0.0)


def test_a_corrupt_record_names_its_line_and_is_never_overwritten(tmp_path):
    lifetime(tmp_path)
    path = tmp_path / LEDGER_FILE
    path.write_text(path.read_text() + "not json\n" + path.read_text())
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=f"{LEDGER_FILE} is corrupt at line 2; .* restore it from a backup"):
        lifetime(tmp_path)
    assert path.read_bytes() == before


def test_a_changed_budget_or_accountant_is_recorded_and_the_history_kept(tmp_path):
    lifetime(tmp_path)
    lifetime(tmp_path)
    assert [r["kind"] for r in lines(tmp_path)] == ["budget"]
    lifetime(tmp_path, accountant="pld")
    lifetime(tmp_path, budget=(2.0, 1e-5), accountant="pld")
    lifetime(tmp_path, budget=None, accountant="pld")
    history = lifetime(tmp_path, budget=None, accountant="pld").summary()["budget_history"]
    assert [(h["budget"], h["accountant"]) for h in history] == [
        ([1.0, 1e-5], "basic"), ([1.0, 1e-5], "pld"), ([2.0, 1e-5], "pld"), (None, "pld")]


@pytest.fixture
def folders(tmp_path):
    for name in ("x", "y", "z"):
        (tmp_path / name).mkdir()
    return tmp_path


def test_its_pld_and_rdp_totals_are_at_the_budgets_delta_or_one_in_a_million(folders):
    assert lifetime(folders / "x", budget=(1.0, 1e-5)).ledger.target_delta == 1e-5
    assert lifetime(folders / "y", budget=(1.0, 0.0)).ledger.target_delta == 1e-6
    assert lifetime(folders / "z", budget=None).ledger.target_delta == 1e-6


def test_only_this_data_sets_charges_of_its_own_agents_count(folders):
    first = lifetime(folders / "x", dataset="old", agents=["a", "c"])
    first.charge("r1", 1, {"a": laplace(0.3), "c": laplace(0.2)}, {"a": "q", "c": "q"})
    first.note("r1", "a release on the old data set")
    now = lifetime(folders / "x", dataset="new", agents=["a", "b"])
    now.charge("r2", 1, {"a": laplace(0.1), "b": laplace(0.05)}, {"a": "q", "b": "q"})
    again = lifetime(folders / "x", dataset="new", agents=["a", "b"])
    assert again.ledger.spent("a", "basic") == (0.1, 0.0)
    assert again.ledger.spent("b", "basic") == (0.05, 0.0)
    assert again.ledger.guarantee is True
    assert again.charged("r1", 1, "a")[0]["claim"] == [0.3, 0.0]  # a run's records stay readable by run


def test_a_note_voids_the_guarantee_unless_it_says_otherwise_and_reloads_silently(folders):
    """The lifetime ledger records a note without a warning and reads it back without one (the run's outputs and
    `cvxdp party --ledger` report it: a party's process has no one to warn)."""
    path = folders / "x" / LEDGER_FILE
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lifetime(folders / "x").note("r1", "a feasibility bit")
        records = lines(folders / "x")
        del records[-1]["voids"]
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        reloaded = lifetime(folders / "x")
    assert reloaded.ledger.guarantee is False
    assert reloaded.ledger.notes == [{"reason": "a feasibility bit", "voids": True}]
    lifetime(folders / "y").note("r1", "a condition", voids=False)
    assert lifetime(folders / "y").ledger.guarantee is True


def test_a_charge_records_its_claim_and_skips_only_the_agents_already_charged_for_the_request(folders):
    ledger = lifetime(folders / "x")
    gaussian = dp_accounting.GaussianDpEvent(2.0), (0.4, 1e-7), 3
    ledger.charge("r", 1, {"a": laplace(0.25)}, {"a": "q"})
    ledger.charge("r", 1, {"a": laplace(0.25), "b": gaussian}, {"a": "q", "b": "q"})
    charges = [r for r in lines(folders / "x") if r["kind"] == "charge"]
    assert [(r["agent"], r["claim"], r["count"]) for r in charges] == [("a", [0.25, 0.0], 1), ("b", [0.4, 1e-7], 3)]
    assert lifetime(folders / "x").ledger.spent("b", "basic") == pytest.approx((1.2, 3e-7))
    ledger.charge("r", 1, {"a": laplace(0.25)}, {"a": "other request"})
    assert len(ledger.charged("r", 1, "a")) == 2


def test_a_laplace_charge_past_the_budget_would_exceed_it(folders):
    ledger = lifetime(folders / "x", budget=(1.0, 1e-5))
    assert not ledger.would_exceed("a", laplace(1.0))
    assert ledger.would_exceed("a", laplace(1.01))
    ledger.charge("r", 1, {"a": laplace(0.75)}, {"a": "q"})
    assert ledger.would_exceed("a", laplace(0.3))
    assert not ledger.would_exceed("a", laplace(0.25))
    assert not lifetime(folders / "y", budget=None).would_exceed("a", laplace(100.0))


def test_a_budget_spent_to_its_epsilon_or_past_its_delta_is_exhausted(folders):
    ledger = lifetime(folders / "x", budget=(1.0, 1e-5))
    assert not ledger.exhausted("a")
    ledger.charge("r", 1, {"a": laplace(0.5)}, {"a": "q"})
    assert not ledger.exhausted("a")
    ledger.charge("r", 2, {"a": laplace(0.5)}, {"a": "q"})
    assert ledger.exhausted("a") and not ledger.exhausted("b")
    ledger.charge("r", 1, {"b": (dp_accounting.GaussianDpEvent(50.0), (0.01, 6e-6), 2)}, {"b": "q"})
    assert ledger.ledger.spent("b", "basic") == pytest.approx((0.02, 1.2e-5))
    assert ledger.exhausted("b")
    assert not lifetime(folders / "y", budget=None).exhausted("a")


def test_a_pure_epsilon_budget_is_spent_as_the_release_check_composes_it(folders):
    """A budget without delta under PLD: the start-time check composes at delta 0, as the per-release check does
    (it once read the ledger at delta 1e-6 > 0 and refused every run after the first release)."""
    ledger = lifetime(folders / "x", budget=(1.0, 0.0), accountant="pld")
    for round in range(1, 10):
        ledger.charge("r", round, {"a": laplace(0.1)}, {"a": "q"})
        assert not ledger.exhausted("a")
    assert ledger.would_exceed("a", laplace(0.11)) and not ledger.would_exceed("a", laplace(0.09))
    ledger.charge("r", 10, {"a": laplace(0.1)}, {"a": "q"})
    assert ledger.exhausted("a")
    assert ledger.ledger.spent("a", "pld", delta=0.0) == pytest.approx((1.0, 0.0), rel=1e-6)


def test_a_research_seeds_stream_belongs_to_the_run_that_used_it(folders):
    ledger = lifetime(folders / "x")
    ledger.use_stream("r1", "a", seed=7, index=0)
    ledger.use_stream("r2", "a", seed=7, index=1)
    assert ledger.stream_owner(7, 0) == "r1" and ledger.stream_owner(7, 1) == "r2"
    assert ledger.stream_owner(7, 2) is None and ledger.stream_owner(8, 0) is None


def test_a_runs_ledger_holds_that_runs_charges_only(folders):
    ledger = lifetime(folders / "x")
    ledger.charge("r1", 1, {"a": laplace(0.25), "b": laplace(0.5)}, {"a": "q", "b": "q"})
    ledger.charge("r2", 1, {"a": laplace(0.125)}, {"a": "q"})
    run = ledger.run_ledger("r2", ["a", "b"], 1e-5)
    assert run.spent("a", "basic") == (0.125, 0.0) and run.spent("b", "basic") == (0.0, 0.0)
    assert ledger.run_ledger("r1", ["a", "b"], 1e-5).spent("b", "basic") == (0.5, 0.0)
