"""A curious or malicious coordinator, played through the bytes a party receives: every attack is refused at the party
with one line naming the party, the round and the field, the party's lifetime ledger is unchanged and nothing is
released. Each test also runs its broken twin: the party-side check that refuses the attack is removed, and the
attack then gets through (so each test can fail). tests/federation/test_flower.py runs the foreign-app attack on
real SuperLink and SuperNode processes.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import BackendError, PartyRefusedError
from cvxdp.families.consensus import node as consensus_node
from cvxdp.families.consensus.node import ConsensusNode, RoundMessage
from cvxdp.families.graph import node as graph_node
from cvxdp.families.sharing import node as sharing_node
from cvxdp.families.sharing.node import SharingMessage
from cvxdp.federation import messages, wire
from cvxdp.federation.coordinator import LocalChannel, run_federation
from cvxdp.federation.parties import party_folders
from cvxdp.federation.party import Party
from cvxdp.federation.policy import LEDGER_FILE, LifetimeLedger, Limits, PartyPolicy
from cvxdp.federation.wire import Str
from cvxdp.privacy import gaussian_sigma_analytic

TOKEN = "0123456789abcdef"
POLICY = {"mechanism": "ObjG", "epsilon": 0.3, "delta": 1e-6}
ALGORITHM = {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 6}


@dataclass
class Outcome:
    value: Any = None
    refused: PartyRefusedError | None = None
    failed: str | None = None  # the party failed (not a refusal: what a broken check lets through may crash it)


class Coordinator:
    """Speaks to one party through its request bytes; honest unless a test changes what it sends."""

    def __init__(self, file: Path, agent: str = "agent0") -> None:
        self.file, self.agent = file, agent
        self.channel = LocalChannel([file])
        self.name = self.channel.parties()[0]
        self.owner: str | None = None
        self.token = TOKEN
        self.channel.party(self.name)  # the party's process is up (its lifetime ledger opened)

    @property
    def party(self) -> Party:
        return self.channel.party(self.name)

    def send(self, kind: str, body: dict, data: bytes | None = None) -> Outcome:
        raw = self.channel.raw(self.name, data if data is not None else messages.request(kind, body))
        try:
            return Outcome(value=messages.read_reply(self.name, raw, body.get("round")))
        except PartyRefusedError as exc:
            return Outcome(refused=exc)
        except BackendError as exc:
            return Outcome(failed=str(exc))

    def start_body(self, **changes: Any) -> dict:
        body = {"token": self.token, "algorithm": dict(ALGORITHM), "privacy": dict(POLICY), "accountant": "pld",
                "solvers": ["CLARABEL", "ECOS", "OSQP"], "target_delta": 1e-5, "names": [self.agent],
                "agents": {self.agent: {"index": 0}}}
        body.update(changes)
        return body

    def start(self, **changes: Any) -> Outcome:
        out = self.send("start", self.start_body(**changes))
        if out.value is not None:
            self.owner = out.value["owner"]
        return out

    def node(self) -> Any:
        return self.party.runs[self.token].nodes[self.agent]

    def message(self, t: int, **changes: Any) -> dict:
        """The honest wire message of round ``t`` (the party's own plan as the coordinator's copy), changed."""
        node = self.node()
        msg = RoundMessage(round=t, bw=np.zeros(int(node.sidx.size)), rho=1.0, eta=4.0)
        wire = messages.to_wire(replace(msg, plan=node.plan(msg)))
        wire.update(changes)
        return wire

    def step(self, t: int, message: dict | None = None, **body: Any) -> Outcome:
        request = {"token": self.token, "owner": self.owner, "round": t,
                   "messages": {self.agent: message if message is not None else self.message(t)}, **body}
        return self.send("step", request)


def _party(tmp_path: Path, *, privacy: dict = POLICY, budget=None, limits=None, agents=None) -> Path:
    from cvxdp_models.toy import make_agents

    agents = agents if agents is not None else make_agents(agents=1, seed=1)
    return party_folders(agents, tmp_path / "parties", privacy=privacy, budget=budget, limits=limits)[0]


def _ledger(file: Path) -> bytes:
    return (file.parent / "state" / LEDGER_FILE).read_bytes()


def _charges(file: Path) -> list[dict]:
    return [r for r in map(json.loads, _ledger(file).splitlines()) if r["kind"] == "charge"]


def assert_refused(out: Outcome, *, round: int | None, field: str | None, reason: str | None = None) -> None:
    """Refused, in one line naming the party and the round, at ``field``; nothing released."""
    assert out.refused is not None, f"not refused: {out.value!r}"
    exc = out.refused
    assert out.value is None and "\n" not in str(exc)
    assert exc.party in ("agent0", "p0", "node0") and f"'{exc.party}'" in str(exc)
    assert exc.round == round and (round is None or round == 0 or f"round {round}" in str(exc))
    assert exc.field == field, (exc.field, str(exc))
    if reason is not None:
        assert exc.reason == reason, (exc.reason, str(exc))


TWIN = pytest.mark.parametrize("twin", [False, True], ids=["check", "broken twin"])


# ---------------------------------------------------------------- noise: the party's own, whatever the coordinator says
@TWIN
def test_a_round_without_a_noise_plan_is_refused(tmp_path, monkeypatch, twin):
    coordinator = Coordinator(_party(tmp_path))
    assert coordinator.start().value is not None
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(consensus_node, "check_plan_matches", lambda *a, **k: None)
    out = coordinator.step(1, coordinator.message(1, plan=None))
    if twin:
        assert out.refused is None and len(_charges(coordinator.file)) == 1
        return
    assert_refused(out, round=1, field="plan", reason="plan")
    assert "non-private step" in str(out.refused) and _ledger(coordinator.file) == before


@TWIN
@pytest.mark.parametrize(("field", "factor"), [("scale", 0.5), ("epsilon", 0.5), ("sensitivity", 0.1)])
def test_a_plan_with_less_noise_or_another_claim_is_refused(tmp_path, monkeypatch, twin, field, factor):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    before = _ledger(coordinator.file)
    message = coordinator.message(1)
    message["plan"] = {**message["plan"], field: message["plan"][field] * factor}
    if twin:
        monkeypatch.setattr(consensus_node, "check_plan_matches", lambda *a, **k: None)
    out = coordinator.step(1, message)
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=1, field=f"plan.{field}", reason="plan")
    assert _ledger(coordinator.file) == before


def test_a_nodes_noise_is_its_own_whatever_the_message_says():
    """Defence in depth: with the cross-check gone, a plan-less message still gets the node's own noise (a release
    spread at the node's own scale), where a non-private node's release is the exact update."""
    from cvxdp_models.toy import make_agents

    (agent,) = make_agents(agents=1, seed=1)
    algorithm = cvxdp.LinearizedADMM(rho=1.0, eta=4.0, local_updates=1, rounds=1)
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=0.3, delta=1e-6)
    releases = {True: [], False: []}
    for k, seed in enumerate(np.random.SeedSequence(7).spawn(60)):
        for private in (True, False):
            node = ConsensusNode(agent, seed, algorithm, mechanism=mech if private else None)
            msg = RoundMessage(round=1, bw=np.zeros(int(node.sidx.size)), rho=1.0, eta=4.0, plan=None)
            releases[private].append(node.step(msg)["ez"])
            if k == 0 and private:
                own = node.plan(msg)
    exact = np.array(releases[False])
    assert np.ptp(exact, axis=0).max() == 0.0  # the exact update, the same every time
    spread = np.std(np.array(releases[True]) - exact, axis=0)
    expected = own.scale / (4.0 + 1.0)  # the noisy gradient's step 1 / c, the box not binding near 0
    assert np.all(spread > 0.5 * expected) and np.all(spread < 2.0 * expected)


# ---------------------------------------------------------------- replays, reorders, restarts: nothing resets
@TWIN
def test_a_released_round_asked_again_with_other_inputs_is_refused(tmp_path, monkeypatch, twin):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    assert coordinator.step(1).value is not None
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(Party, "_order", lambda *a: None)
    other = coordinator.message(1, eta=5.0)
    other["plan"] = messages.plan_to_wire(coordinator.node().plan(RoundMessage(1, np.zeros(5), 1.0, 5.0)))
    out = coordinator.step(1, other)
    if twin:
        assert out.refused is None and _ledger(coordinator.file) != before  # the same noise state, drawn again
        return
    assert_refused(out, round=1, field="round", reason="replay")
    assert _ledger(coordinator.file) == before


@TWIN
def test_the_same_request_again_gets_the_recorded_release_and_costs_nothing(tmp_path, monkeypatch, twin):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    first = coordinator.step(1)
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(Party, "_order", lambda *a: None)
    again = coordinator.step(1, coordinator.message(1))
    if twin:  # computed again: a second release of round 1, with other noise
        assert not np.array_equal(again.value["agent0"]["arrays"]["ez"], first.value["agent0"]["arrays"]["ez"])
        return
    assert again.refused is None and _ledger(coordinator.file) == before
    np.testing.assert_array_equal(again.value["agent0"]["arrays"]["ez"], first.value["agent0"]["arrays"]["ez"])


def test_a_step_asking_the_party_to_roll_back_is_refused(tmp_path):
    """The old protocol's ``restore`` (a coordinator rolling a party's generator and ledger back to a round) is no
    field of a round any more: refused, and nothing rolls back."""
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    before = _ledger(coordinator.file)
    assert_refused(coordinator.step(2, restore=0), round=2, field="restore", reason="message")
    assert _ledger(coordinator.file) == before and coordinator.party.runs[TOKEN].latest == 1


@TWIN
def test_a_round_out_of_order_is_refused(tmp_path, monkeypatch, twin):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(Party, "_order", lambda *a: None)
    out = coordinator.step(3)
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=3, field="round", reason="order")
    assert _ledger(coordinator.file) == before


@TWIN
def test_no_restart_new_token_or_rerun_resets_the_lifetime_budget(tmp_path, monkeypatch, twin):
    """Budget (1, 1e-5) at 2 Gaussian calls of epsilon 0.3 a round: the party stops releasing when its lifetime total
    would pass 1, whatever the coordinator does next: start the run again, start new runs with new tokens, restart
    the party's process, or rerun the run without its checkpoint."""
    file = _party(tmp_path, budget=(1.0, 1e-5))
    if twin:
        monkeypatch.setattr(LifetimeLedger, "would_exceed", lambda *a, **k: False)
    released = 0
    for attempt, token in enumerate(["0" * 16, "1" * 16, "2" * 16, "0" * 16, "3" * 16]):
        coordinator = Coordinator(file)
        if attempt == 3:
            coordinator.channel.restart(coordinator.name)  # the party's process started again
        coordinator.token = token
        if coordinator.start().refused is not None:
            continue
        latest = coordinator.party.runs[token].latest
        for t in range(latest + 1, ALGORITHM["rounds"] + 1):
            out = coordinator.step(t)
            if out.refused is not None:
                assert_refused(out, round=t, field=None, reason="budget")
                break
            released += 1
    spent = Party(file, lock=False).ledger_report()["agents"]["agent0"]["spent"]["pld"][0]
    if twin:
        assert spent > 1.0  # without the lifetime check the party spends past its budget
        return
    assert spent <= 1.0 * (1 + 1e-9) and released == len(_charges(file)) >= 1
    event = dp_accounting.GaussianDpEvent(gaussian_sigma_analytic(1.0, 0.3, 1e-6))
    one_more = dp_accounting.pld.PLDAccountant()
    one_more.compose(event, 2 * (released + 1))
    assert one_more.get_epsilon(1e-5) > 1.0  # it stopped at the last round that fitted


# ---------------------------------------------------------------- the start: the party's policy decides
@TWIN
@pytest.mark.parametrize(("changes", "field"), [
    ({"privacy": {"mechanism": "OutG", "epsilon": 0.3, "delta": 1e-6}}, "privacy.mechanism"),
    ({"privacy": {"mechanism": "ObjG", "epsilon": 3.0, "delta": 1e-6}}, "privacy.epsilon"),
    ({"privacy": {"mechanism": "ObjG", "epsilon": 0.3, "delta": 1e-6, "calibrate": "total"}}, "privacy.calibrate"),
    ({"privacy": {"mechanism": "none"}}, "privacy.mechanism"),
    ({"accountant": "basic"}, "accountant"),
    ({"algorithm": {"name": "admm", "rho": 1.0, "rounds": 3}}, "algorithm.name"),
    ({"algorithm": {**ALGORITHM, "local_updates": -1}}, "algorithm"),
    ({"algorithm": {**ALGORITHM, "build": "os.system"}}, "algorithm"),
])
def test_a_start_outside_the_partys_policy_is_refused(tmp_path, monkeypatch, twin, changes, field):
    coordinator = Coordinator(_party(tmp_path))
    before = _ledger(coordinator.file)
    if twin:
        from cvxdp.families.catalog import ALGORITHMS

        monkeypatch.setattr(PartyPolicy, "accept", lambda self, algorithm, *a, **k:
                            ALGORITHMS[algorithm["name"]](**{k: v for k, v in algorithm.items()
                                                             if k in ("rho", "rounds", "eta", "local_updates")}))
    out = coordinator.start(**changes)
    if twin:
        assert out.refused is None or out.refused.field != field
        return
    assert_refused(out, round=0, field=field, reason="policy")
    assert _ledger(coordinator.file) == before and not list((coordinator.file.parent / "state").glob("run-*"))


@TWIN
@pytest.mark.parametrize(("agents", "field"), [
    ({"agent0": {"index": 0, "build": "cvxdp.federation.launch"}}, "agents.agent0.build"),
    ({"agent0": {"index": 0, "curvature": True, "private": False}}, "agents.agent0.curvature"),
    ({"agent0": {"index": -1}}, "agents.agent0.index"),
])
def test_a_start_naming_a_callable_or_a_non_private_curvature_estimate_is_refused(tmp_path, monkeypatch, twin,
                                                                                 agents, field):
    coordinator = Coordinator(_party(tmp_path))
    if twin:
        monkeypatch.setitem(messages.REQUESTS, "start", wire.Table())
    out = coordinator.start(agents=agents)
    if twin:
        assert out.refused is None or out.refused.field != field
        return
    assert_refused(out, round=None, field=field, reason="message")


def test_a_private_party_declares_its_curvature_bound_and_estimates_nothing(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    out = coordinator.start(algorithm={**ALGORITHM, "eta": "auto"})
    curvature = out.value["declare"]["agent0"]["curvature"]
    assert curvature is None or curvature["source"] == "declared"


@TWIN
def test_more_rounds_than_the_partys_limits_are_refused(tmp_path, monkeypatch, twin):
    coordinator = Coordinator(_party(tmp_path, limits={"rounds": 5}))
    if twin:
        monkeypatch.setattr(Limits, "check_rounds", lambda *a, **k: None)
    out = coordinator.start()  # 6 rounds
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=0, field="algorithm.rounds", reason="limits")


@TWIN
@pytest.mark.parametrize("eta", [1e9, 1e-9])
def test_step_weights_outside_the_partys_limits_are_refused(tmp_path, monkeypatch, twin, eta):
    coordinator = Coordinator(_party(tmp_path, limits={"eta": [1e-3, 1e3]}))
    coordinator.start()
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(Limits, "check_weight", lambda *a, **k: None)
    msg = RoundMessage(round=1, bw=np.zeros(5), rho=1.0, eta=eta)
    out = coordinator.step(1, messages.to_wire(replace(msg, plan=coordinator.node().plan(msg))))
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=1, field="messages.agent0.eta", reason="limits")
    assert _ledger(coordinator.file) == before


@TWIN
@pytest.mark.parametrize(("change", "field"), [
    ({"bw": np.array([0.0, np.nan, 0.0, 0.0, 0.0])}, "messages.agent0.bw"),
    ({"bw": np.zeros(50_000)}, "messages.agent0.bw"),
    ({"bw": np.zeros(5, dtype=np.float32)}, "messages.agent0.bw"),
    ({"eta": float("inf")}, "messages.agent0.eta"),
    ({"placement": "output"}, "messages.agent0.placement"),
])
def test_nan_oversized_and_unknown_message_fields_are_refused(tmp_path, monkeypatch, twin, change, field):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(messages, "message_schema", lambda node: wire.Table())
    out = coordinator.step(1, coordinator.message(1, **change))
    if twin:
        assert out.refused is None or out.refused.field != field
        return
    assert_refused(out, round=1, field=field, reason="message")
    assert _ledger(coordinator.file) == before


def test_a_request_larger_than_the_partys_limit_is_refused_unread(tmp_path):
    coordinator = Coordinator(_party(tmp_path, limits={"message_bytes": 4096}))
    coordinator.start()
    out = coordinator.step(1, coordinator.message(1, bw=np.zeros(10_000)))
    assert out.refused is not None and "larger than the 4096 allowed" in str(out.refused)


@TWIN
def test_a_token_that_climbs_out_of_the_state_folder_is_refused(tmp_path, monkeypatch, twin):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.token = "../../../../../escaped"
    if twin:
        monkeypatch.setitem(messages.REQUESTS["start"].fields, "token", Str(pattern=".*"))
    out = coordinator.start()
    state = coordinator.file.parent / "state"
    escaped = [p for p in tmp_path.rglob("escaped") if state not in p.parents]
    if twin:
        assert escaped
        return
    assert_refused(out, round=None, field="token", reason="message")
    assert not escaped


@TWIN
def test_a_second_coordinator_on_the_same_run_is_refused(tmp_path, monkeypatch, twin):
    file = _party(tmp_path)
    first, second = Coordinator(file), Coordinator(file)
    second.channel = first.channel  # the same party process
    first.start()
    first.step(1)
    if twin:
        monkeypatch.setattr(Party, "_take", lambda self, run, owner: setattr(run, "owner", "f" * 32))
    out = second.start()
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=0, field="token", reason="owner")
    second.owner = "0" * 32  # a guess
    assert_refused(second.step(2), round=2, field="owner", reason="owner")
    assert first.step(2).refused is None  # the first one goes on


def test_two_coordinators_at_once_leave_the_first_run_intact(tmp_path):
    """The second coordinator of a run (the same plan, started while the first one runs) is refused at its start;
    the first finishes with the numbers of a run alone."""
    from cvxdp_models.toy import make_agents

    agents = make_agents(agents=2, seed=1)
    plan = {"name": "toy", "algorithm": dict(ALGORITHM, rounds=3), "privacy": dict(POLICY), "run": {"seed": 4},
            "agents": [a.name for a in agents]}
    alone = run_federation(plan, LocalChannel(party_folders(agents, tmp_path / "alone", seed=4, privacy=POLICY)))
    channel = LocalChannel(party_folders(agents, tmp_path / "both", seed=4, privacy=POLICY))
    errors: list[BaseException] = []
    step = Party._step

    def intruding(self, body):
        if body["round"] == 2 and not errors:
            thread = threading.Thread(target=lambda: errors.append(_run_second(plan, channel)))
            thread.start()
            thread.join()
        return step(self, body)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Party, "_step", intruding)
        first = run_federation(plan, channel)
    assert isinstance(errors[0], PartyRefusedError) and errors[0].reason == "owner"
    np.testing.assert_array_equal(first.solution["x"], alone.solution["x"])
    assert first.history["consensus_residual"].tolist() == alone.history["consensus_residual"].tolist()


def _run_second(plan: dict, channel: LocalChannel) -> BaseException | None:
    try:
        run_federation(plan, channel)
    except BaseException as exc:  # noqa: BLE001 - the test reads it
        return exc
    return None


# ---------------------------------------------------------------- the other families
def _graph_party(tmp_path: Path) -> tuple[Coordinator, list]:
    """One M-ADMM node (Gamma-norm noise at alpha 3, degree 2) started by a coordinator."""
    from cvxdp_models.erm import make_erm

    agents = make_erm({"nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 60, "data_seed": 0}).agents[:1]
    policy = {"mechanism": "gamma", "alpha": 3.0}
    coordinator = Coordinator(_party(tmp_path, privacy=policy, agents=agents), agent=agents[0].name)
    out = coordinator.start(algorithm={"name": "madmm", "graph": "complete", "rounds": 3}, privacy=policy,
                            agents={agents[0].name: {"index": 0, "degree": 2}})
    assert out.refused is None, out.refused
    return coordinator, agents


def _sharing_party(tmp_path: Path) -> Coordinator:
    """The label holder of ADMM sharing (OutG at epsilon 0.3 per epoch) started by a coordinator."""
    from cvxdp_models.vertical import synthetic_parties

    parties, labels = synthetic_parties(12, 2, 2, seed=0)
    parties[0].labels = labels
    policy = {"mechanism": "OutG", "epsilon": 0.3, "delta": 1e-5}
    coordinator = Coordinator(_party(tmp_path, privacy=policy, agents=parties[:1]), agent="p0")
    out = coordinator.start(algorithm={"name": "sharing", "rho": 1.0, "lam": 0.1, "epochs": 3}, privacy=policy,
                            agents={"p0": {"index": 0, "b1": 1.0, "parties": 2}}, names=["p0", "p1"])
    assert out.refused is None, out.refused
    return coordinator


@TWIN
@pytest.mark.parametrize(("change", "field"), [({"alpha": None}, "alpha"), ({"alpha": 30.0}, "alpha"),
                                               ({"exact": False}, "exact")])
def test_a_graph_node_refuses_no_noise_less_noise_or_a_skipped_exact_iteration(tmp_path, monkeypatch, twin, change,
                                                                               field):
    coordinator, agents = _graph_party(tmp_path)
    node = coordinator.node()
    honest = {"round": 1, "neighbours": np.zeros((2, node.d)), "dual_step": None, "eta": float(node.V),
              "exact": True, "alpha": node.alpha(1)}
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(graph_node.GraphNode, "check_message", lambda self, msg: None)
    out = coordinator.step(1, {**honest, **change})
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=1, field=field, reason="plan")
    assert _ledger(coordinator.file) == before
    assert coordinator.step(1, honest).refused is None


@TWIN
def test_a_sharing_party_refuses_a_tiny_noise_scale_claiming_its_epsilon(tmp_path, monkeypatch, twin):
    coordinator = _sharing_party(tmp_path)
    node = coordinator.node()
    honest = messages.to_wire(SharingMessage(1, np.zeros(12), np.zeros(12), node.plan))
    tiny = dict(honest, plan={**honest["plan"], "scale": honest["plan"]["scale"] * 1e-3})
    before = _ledger(coordinator.file)
    if twin:
        monkeypatch.setattr(sharing_node, "check_plan_matches", lambda *a, **k: None)
    out = coordinator.step(1, tiny)
    if twin:
        assert out.refused is None
        return
    assert_refused(out, round=1, field="plan.scale", reason="plan")
    assert _ledger(coordinator.file) == before
    assert coordinator.step(1, honest).refused is None  # its own noise, its own charge
    (charge,) = _charges(coordinator.file)
    assert charge["count"] == 1 and charge["claim"][0] == pytest.approx(0.3)


# ---------------------------------------------------------------- each family's party ledger, computed independently
def test_a_graph_partys_charge_is_the_papers_summand_with_its_own_degree(tmp_path):
    """Bound (26)'s summand C (1.4 c1 + alpha) / (eta V B), computed here from the node's ERM constants and its
    degree V = 2 (a node charged with another degree would record another epsilon)."""
    coordinator, agents = _graph_party(tmp_path)
    node = coordinator.node()
    eta = 1.7
    for t in (1, 2):
        out = coordinator.step(t, {"round": t, "neighbours": np.zeros((2, node.d)), "dual_step": None, "eta": eta,
                                   "exact": True, "alpha": node.alpha(t)})
        assert out.refused is None
    erm = agents[0].erm
    expected = erm.C * (1.4 * erm.c1 + 3.0) / (eta * 2 * erm.B)
    assert [c["claim"][0] for c in _charges(coordinator.file)] == pytest.approx([expected, expected], rel=1e-12)


def test_a_sharing_partys_charges_are_one_gaussian_release_per_epoch(tmp_path):
    """sigma from the worst-case sensitivity 2 sqrt(N) b and the analytic Gaussian at (0.3, 1e-5), one call an epoch."""
    coordinator = _sharing_party(tmp_path)
    node = coordinator.node()
    for t in (1, 2, 3):
        assert coordinator.step(t, messages.to_wire(SharingMessage(t, np.zeros(12), np.zeros(12),
                                                                   node.plan))).refused is None
    charges = _charges(coordinator.file)
    sigma = gaussian_sigma_analytic(2.0 * math.sqrt(12) * 1.0, 0.3, 1e-5)
    assert [c["count"] for c in charges] == [1, 1, 1]
    assert all(c["event"]["noise_multiplier"] == pytest.approx(sigma / (2.0 * math.sqrt(12)), rel=1e-9)
               for c in charges)
