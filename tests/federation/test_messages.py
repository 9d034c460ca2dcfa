"""The federation's protocol (cvxdp/federation/messages.py) at its edges: each request schema's bounds, the refusal
and failure replies, the noise plan's ranges, a consensus node's message checks, the nodes a start builds, and the
declarations and releases the coordinator reads back (the mutation run's survivors of messages.py: each test kills
mutants that the round trips of test_wire.py, test_protocol.py and test_malicious.py let survive)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import cvxdp
from cvxdp.errors import BackendError, PartyRefusedError
from cvxdp.families.consensus.node import ConsensusNode, RoundMessage
from cvxdp.families.graph.node import GraphNode
from cvxdp.federation import messages
from cvxdp.federation.wire import SchemaError, decode, encode
from cvxdp.model import DEFAULT_SOLVERS, Curvature
from cvxdp.privacy import NoisePlan

TOKEN = "0123456789abcdef"
OWNER = "0123456789abcdef" * 2
LIMIT = 1 << 26  # max_bytes of a read request (a 10_001-entry finish is ~0.4 MB)
TINY = 1e-300


# ---------------------------------------------------------------- builders
def _read(kind: str, body: dict) -> dict:
    """The checked body of a request, through its bytes (as a party reads it)."""
    got, checked = messages.read_request(messages.request(kind, body), max_bytes=LIMIT)
    assert got == kind
    return checked


def _refused_field(kind: str, body: dict) -> str:
    with pytest.raises(SchemaError) as caught:
        _read(kind, body)
    return caught.value.field


def _start(agent: dict | None = None, **changes) -> dict:
    body = {"token": TOKEN, "algorithm": {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 4},
            "privacy": {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}, "accountant": "pld",
            "solvers": ["CLARABEL", "ECOS"], "target_delta": 1e-5, "names": ["agent0"],
            "agents": {"agent0": {"index": 0, **(agent or {})}}}
    body.update(changes)
    return body


def _step(round: int) -> dict:
    return {"token": TOKEN, "owner": OWNER, "round": round, "messages": {}}


def _refusal(**changes) -> bytes:
    fields = {"party": "zone2", "round": 4, "reason": "plan", "field": "plan.scale", **changes}
    return messages.refusal(PartyRefusedError("refused", **fields))


def _plan(**changes) -> dict:
    """A Laplace plan's wire form (delta 0, no subsampling), changed."""
    return {**messages.plan_to_wire(NoisePlan("laplace", scale=2.0, sensitivity=1.0, epsilon=0.5)), **changes}


@pytest.fixture(scope="module")
def consensus_node() -> ConsensusNode:
    from cvxdp_models.toy import make_agents

    (agent,) = make_agents(agents=1, seed=1)
    algorithm = cvxdp.LinearizedADMM(rho=1.0, eta=4.0, local_updates=1, rounds=2)
    return ConsensusNode(agent, np.random.SeedSequence(3), algorithm)


def _consensus(node: ConsensusNode, **changes) -> dict:
    n = int(node.sidx.size)
    return {"round": 1, "bw": np.zeros(n), "rho": 1.0, "eta": 4.0, "plan": None, "polish": None,
            "keep_polish": False, **changes}


@pytest.fixture(scope="module")
def erm_agents() -> list:
    """Three ERM nodes (C = 10, B_i = 16, rho/N = 1/30, c1 = 1/4): the papers' parameter condition
    ``2 c1 < B_i/C (rho/N + 2 w V_i)`` holds at degree 2 for a weight w above 0.0698, fails below."""
    from cvxdp_models.erm import make_erm

    agents = make_erm({"nodes": 3, "C": 10.0, "rho": 0.1, "max_samples": 60, "data_seed": 0}).agents
    c = agents[0].erm
    assert (c.C, c.B, c.c1) == (10.0, 16, 0.25) and c.reg == pytest.approx(0.1 / 3)
    return agents


GAMMA = cvxdp.PenaltyPerturbation(alpha=3.0)


def _graph(agents, algorithm, *, index=0, names=None, mechanism=GAMMA, solvers=()):
    names = [a.name for a in agents] if names is None else names
    return messages.build_node(algorithm, agents[0], {"index": index, "degree": 2},
                               {"solvers": list(solvers), "names": names}, np.random.SeedSequence(5), mechanism, "pld")


# ---------------------------------------------------------------- request schemas at their edges
def test_a_steps_round_runs_from_1_to_10_to_the_9():
    for round in (1, 10 ** 9):
        assert _read("step", _step(round))["round"] == round
    for round in (0, 10 ** 9 + 1):
        assert _refused_field("step", _step(round)) == "round"


def test_a_starts_agent_index_runs_from_0_to_10_to_the_7():
    for index in (0, 10 ** 7):
        assert _read("start", _start({"index": index}))["agents"]["agent0"]["index"] == index
    for index in (-1, 10 ** 7 + 1):
        assert _refused_field("start", _start({"index": index})) == "agents.agent0.index"


@pytest.mark.parametrize("key", ["degree", "parties"])
def test_a_starts_degree_and_number_of_parties_run_from_1_to_10_to_the_7(key):
    for value in (1, 10 ** 7):
        assert _read("start", _start({key: value}))["agents"]["agent0"][key] == value
    for value in (0, -1, 10 ** 7 + 1):
        assert _refused_field("start", _start({key: value})) == f"agents.agent0.{key}"


def test_a_starts_b1_is_positive():
    for b1 in (TINY, 1.0, 1e300):
        assert _read("start", _start({"b1": b1}))["agents"]["agent0"]["b1"] == b1
    for b1 in (0.0, -0.0, -TINY, -0.5, -1.0, math.inf):
        assert _refused_field("start", _start({"b1": b1})) == "agents.agent0.b1"


def test_a_starts_target_delta_is_in_0_exclusive_to_half():
    for delta in (TINY, 1e-5, 0.5):
        assert _read("start", _start(target_delta=delta))["target_delta"] == delta
    for delta in (0.0, -0.1, -1.0, 0.5 + 1e-12, 0.6, 1.0):
        assert _refused_field("start", _start(target_delta=delta)) == "target_delta"


def test_a_finishs_solution_holds_at_most_10_000_arrays():
    def finish(n: int) -> dict:
        return {"token": TOKEN, "owner": OWNER, "solution": {f"x{i}": np.full(1, float(i)) for i in range(n)}}

    assert len(_read("finish", finish(10_000))["solution"]) == 10_000
    assert _refused_field("finish", finish(10_001)) == "solution"


def test_a_request_is_a_table_of_exactly_protocol_kind_and_body():
    names = ["protocol", "kind", "body"]
    good = {"protocol": messages.PROTOCOL, "kind": "hello", "body": {}}
    assert messages.read_request(encode(good), max_bytes=LIMIT) == ("hello", {})
    for message in (names, [messages.PROTOCOL, "hello", {}], "protocol", None, {**good, "extra": 1},
                    {k: v for k, v in good.items() if k != "body"}):
        with pytest.raises(SchemaError, match="not a cvxdp request") as caught:
            messages.read_request(encode(message), max_bytes=LIMIT)
        assert caught.value.field == ""


# ---------------------------------------------------------------- replies
def test_a_refusals_party_and_field_hold_256_characters_and_no_more():
    for key in ("party", "field"):
        with pytest.raises(PartyRefusedError) as caught:
            messages.read_reply("zone2", _refusal(**{key: "p" * 256}), 4)
        assert getattr(caught.value, key) == "p" * 256
        with pytest.raises(BackendError, match=rf"^Party 'zone2' answered garbage in round 4: field 'refused\.{key}'"):
            messages.read_reply("zone2", _refusal(**{key: "p" * 257}), 4)


def test_a_refusals_round_runs_from_0_to_10_to_the_9_or_is_none():
    for round in (0, 1, 10 ** 9, None):
        with pytest.raises(PartyRefusedError) as caught:
            messages.read_reply("zone2", _refusal(round=round), 4)
        assert caught.value.round == round
    for round in (-1, 10 ** 9 + 1):
        with pytest.raises(BackendError, match=r"answered garbage in round 4: field 'refused\.round'"):
            messages.read_reply("zone2", _refusal(round=round), 4)


def test_a_refusal_without_a_party_is_raised_as_the_asking_partys():
    with pytest.raises(PartyRefusedError) as caught:
        messages.read_reply("zone2", _refusal(party=None), 4)
    assert caught.value.party == "zone2" and caught.value.field == "plan.scale"
    with pytest.raises(PartyRefusedError) as caught:
        messages.read_reply("zone2", _refusal(party="zone2-host"), 4)
    assert caught.value.party == "zone2-host"  # the refusing party names itself


def test_a_failure_carries_its_first_2000_characters():
    text = "".join(chr(ord("a") + i % 26) for i in range(2500))
    assert decode(messages.failure(text))["error"] == text[:2000]
    assert decode(messages.failure(text[:2000]))["error"] == text[:2000]
    with pytest.raises(BackendError) as caught:
        messages.read_reply("zone2", messages.failure(text), 4)
    assert str(caught.value) == f"Party 'zone2' failed in round 4: {text[:2000]}"


@pytest.mark.parametrize("message", [
    {"protocol": "cvxdp-federation/0", "ok": True, "value": 1},
    {"protocol": None, "ok": True, "value": 1},
    {"ok": True, "value": 1},
    {"protocol": messages.PROTOCOL, "ok": "yes", "value": 1},
    {"protocol": messages.PROTOCOL, "ok": 1, "value": 1},
    {"protocol": messages.PROTOCOL, "value": 1},
    [messages.PROTOCOL, True, 1],
])
def test_a_reply_of_another_protocol_or_without_a_boolean_ok_is_garbage(message):
    with pytest.raises(BackendError, match=r"^Party 'zone2' answered garbage in round 3: not a cvxdp reply\.$"):
        messages.read_reply("zone2", encode(message), 3)
    assert messages.read_reply("zone2", encode({"protocol": messages.PROTOCOL, "ok": True, "value": 1}), 3) == 1


# ---------------------------------------------------------------- noise plans
def test_a_plans_numbers_round_trip():
    plan = NoisePlan("gaussian", scale=2.0, sensitivity=1.0, epsilon=0.5, delta=1e-6, sampling_rate=0.25,
                     clip_norm=3.0, relation="replace-one")
    assert messages.plan_from_wire(messages.plan_to_wire(plan), "plan") == plan
    assert messages.plan_from_wire(None, "plan") is None


@pytest.mark.parametrize("key", ["scale", "sensitivity", "epsilon"])
def test_a_plans_positive_numbers_refuse_zero_and_negatives_by_name(key):
    assert getattr(messages.plan_from_wire(_plan(**{key: TINY}), "m.a.plan"), key) == TINY
    for value in (0.0, -TINY, -0.5, -1.0):
        with pytest.raises(SchemaError) as caught:
            messages.plan_from_wire(_plan(**{key: value}), "m.a.plan")
        assert caught.value.field == f"m.a.plan.{key}"


def test_a_plans_delta_is_in_0_1_and_named_when_outside():
    assert messages.plan_from_wire(_plan(delta=0.0), "plan").delta == 0.0
    assert messages.plan_from_wire(_plan(noise="gaussian", delta=1e-6), "plan").delta == 1e-6
    for delta in (-TINY, -0.5, 1.0 + 1e-9, 1.5):
        with pytest.raises(SchemaError) as caught:
            messages.plan_from_wire(_plan(delta=delta), "plan")
        assert caught.value.field == "plan.delta"


def test_a_plans_sampling_rate_is_in_0_exclusive_1_and_named_when_outside():
    for rate in (TINY, 0.5):
        assert messages.plan_from_wire(_plan(sampling_rate=rate, clip_norm=1.0), "plan").sampling_rate == rate
    assert messages.plan_from_wire(_plan(sampling_rate=1.0), "plan").sampling_rate == 1.0
    for rate in (0.0, -TINY, -0.5, 1.0 + 1e-9, 1.5):
        with pytest.raises(SchemaError) as caught:
            messages.plan_from_wire(_plan(sampling_rate=rate, clip_norm=1.0), "plan")
        assert caught.value.field == "plan.sampling_rate"


@pytest.mark.parametrize(("changes", "what"), [
    ({"noise": "gaussian", "delta": 0.0}, "delta"),  # Gaussian noise needs a delta > 0
    ({"delta": 1.0}, "delta"),  # the schema's [0, 1], the plan's [0, 1)
    ({"sampling_rate": 0.5, "clip_norm": None}, "clip_norm"),  # subsampling needs a clip
    ({"clip_norm": 1.0}, "clip_norm"),  # no subsampling, no clip
])
def test_a_plan_that_fits_the_schema_but_not_its_own_rules_is_a_schema_error_at_its_path(changes, what):
    with pytest.raises(SchemaError, match=what) as caught:
        messages.plan_from_wire(_plan(**changes), "messages.agent0.plan")
    assert caught.value.field == "messages.agent0.plan"


# ---------------------------------------------------------------- a consensus node's round message
def test_a_consensus_message_round_trips(consensus_node):
    msg = messages.from_wire(consensus_node, _consensus(consensus_node, plan=_plan()), "messages.agent0")
    assert isinstance(msg, RoundMessage) and (msg.round, msg.rho, msg.eta) == (1, 1.0, 4.0)
    assert msg.plan == NoisePlan("laplace", scale=2.0, sensitivity=1.0, epsilon=0.5)


def test_a_consensus_messages_eta_is_not_negative(consensus_node):
    assert messages.from_wire(consensus_node, _consensus(consensus_node, eta=TINY), "m").eta == TINY
    for eta in (-TINY, -0.5, -1.0):
        with pytest.raises(SchemaError) as caught:
            messages.from_wire(consensus_node, _consensus(consensus_node, eta=eta), "messages.agent0")
        assert caught.value.field == "messages.agent0.eta"


def test_a_consensus_messages_rho_is_positive_as_a_float(consensus_node):
    assert messages.from_wire(consensus_node, _consensus(consensus_node, rho=TINY), "m").rho == TINY
    for rho in (0.0, -0.5):
        with pytest.raises(SchemaError) as caught:
            messages.from_wire(consensus_node, _consensus(consensus_node, rho=rho), "messages.agent0")
        assert caught.value.field == "messages.agent0.rho"


def test_a_consensus_messages_rho_is_positive_as_an_array(consensus_node):
    n = int(consensus_node.sidx.size)
    for rho in (np.full(n, 0.5), np.linspace(TINY, 3.0, n), np.linspace(0.25, 4.0, n), np.full(n, 7.0)):
        msg = messages.from_wire(consensus_node, _consensus(consensus_node, rho=decode(encode(rho))), "m")
        np.testing.assert_array_equal(msg.rho, rho)
        assert msg.rho.flags.writeable  # a copy of the wire's read-only array
    for bad in (0.0, -TINY, -0.5, -1.0, -2.0):
        for at in (0, n - 1):
            rho = np.linspace(0.5, 2.0, n)
            rho[at] = bad
            with pytest.raises(SchemaError, match="positive") as caught:
                messages.from_wire(consensus_node, _consensus(consensus_node, rho=rho), "messages.agent0")
            assert caught.value.field == "messages.agent0.rho"


# ---------------------------------------------------------------- the nodes a start builds
@pytest.mark.parametrize(("given", "expected"), [(["SCS"], ("SCS",)), (["OSQP", "ECOS"], ("OSQP", "ECOS")),
                                                 ([], DEFAULT_SOLVERS)])
def test_a_node_gets_the_starts_solvers_or_the_default_ones(monkeypatch, given, expected):
    """Each family's node is built with the start's solvers, in its order, or DEFAULT_SOLVERS when it names none."""
    from cvxdp.families.sharing.params import ADMMSharing

    built = []

    def record(family):
        signature = inspect.signature(getattr(messages, family))  # the real constructor's parameters

        def build(*args, **kwargs):
            built.append((family, signature.bind(*args, **kwargs).arguments["solvers"]))
            return family

        return build

    for family in ("ConsensusNode", "GraphNode", "SharingNode"):
        monkeypatch.setattr(messages, family, record(family))
    agent = type("Agent", (), {"name": "a"})()
    start = {"solvers": list(given), "names": ["a", "b"]}
    seed = np.random.SeedSequence(0)
    messages.build_node(cvxdp.LinearizedADMM(rho=1.0, eta=4.0), agent, {"index": 0}, start, seed, None, "pld")
    messages.build_node(cvxdp.MADMM(graph="complete"), agent, {"index": 0, "degree": 1}, start, seed, None, "pld")
    messages.build_node(ADMMSharing(), agent, {"index": 0, "parties": 2}, start, seed, None, "pld")
    assert built == [("ConsensusNode", expected), ("GraphNode", expected), ("SharingNode", expected)]


def test_a_graph_nodes_solvers_reach_its_local_solver(erm_agents):
    node = _graph(erm_agents, cvxdp.MADMM(graph="complete", rounds=3), solvers=["SCS"])
    assert isinstance(node, GraphNode) and node.prox.solvers == ("SCS",) and node.V == 2


@pytest.mark.parametrize(("index", "names"), [
    (-1, ["node1", "node0"]),  # names[-1] is the agent, but -1 is no index
    (-2, ["node0", "node1"]),
    (2, ["node1", "node0"]),  # past the end
    (3, ["node0", "node1", "node2"]),
    (1, ["node0", "node1", "node2"]),  # in range, another agent's
    (0, ["node1", "node0"]),
])
def test_a_private_graph_node_refuses_an_index_that_does_not_name_it(erm_agents, index, names):
    with pytest.raises(SchemaError, match=rf"names\[{index}\] is not 'node0'") as caught:
        _graph(erm_agents, cvxdp.MADMM(graph="complete", rounds=3), index=index, names=names)
    assert caught.value.field == "agents.node0.index"


def test_a_private_graph_node_takes_its_own_index(erm_agents):
    assert isinstance(_graph(erm_agents, cvxdp.MADMM(graph="complete", rounds=3)), GraphNode)
    assert isinstance(_graph(erm_agents, cvxdp.MADMM(graph="complete", rounds=3), index=1,
                             names=["node1", "node0"]), GraphNode)


@pytest.mark.parametrize(("algorithm", "weight"), [
    (cvxdp.MADMM(graph="complete", rounds=3, theta=0.05), "theta"),
    (cvxdp.DVP(graph="complete", rounds=3, theta=0.05), "theta"),
    (cvxdp.RADMM(graph="complete", rounds=3, eta=0.05), "eta_i(1)"),
    (cvxdp.MRADMM(graph="complete", rounds=3, eta=0.025, q=2.0), "eta_i(1)"),
])
def test_the_papers_condition_refuses_a_small_weight_naming_it(erm_agents, algorithm, weight):
    name = type(algorithm).__name__
    with pytest.raises(cvxdp.errors.InvalidParameterError) as caught:
        _graph(erm_agents, algorithm)
    text = str(caught.value)
    assert text.startswith(f"{name}: the parameter condition 2 c1 < B_i/C (rho/N + 2 {weight} V_i)")
    assert "node 'node0'" in text and f"Raise {weight}," in text
    other = "theta" if weight == "eta_i(1)" else "eta_i(1)"
    assert other not in text


def test_mradmms_condition_reads_the_first_rounds_penalty(erm_agents):
    """MR-ADMM's eta_i(1) is eta_hat q (eta_i(2k-1) = eta_hat q^k): at eta_hat = 0.05 and q = 2 the condition holds
    (weight 0.1: B/C (rho/N + 4 * 0.1) = 0.693 > 2 c1 = 0.5), though it fails at eta_hat alone (0.373): the weight
    the simulation's server checks too (its eta_of(1))."""
    algorithm = cvxdp.MRADMM(graph="complete", rounds=3, eta=0.05, q=2.0)
    names = [a.name for a in erm_agents]
    from cvxdp.families.graph.mechanism import penalty_schedule

    assert penalty_schedule(algorithm, names)(1)[0] == pytest.approx(0.1)
    assert isinstance(_graph(erm_agents, algorithm), GraphNode)
    with pytest.raises(cvxdp.errors.InvalidParameterError, match=r"2 \* 0\.05 \* 2\) = 0\.373333"):
        _graph(erm_agents, cvxdp.MRADMM(graph="complete", rounds=3, eta=0.05, q=1.0))


def test_a_non_private_graph_node_checks_no_privacy_condition(erm_agents):
    node = _graph(erm_agents, cvxdp.MADMM(graph="complete", rounds=3, theta=0.05), mechanism=None)
    assert isinstance(node, GraphNode) and not node.private


# ---------------------------------------------------------------- declarations and releases
@pytest.mark.parametrize("value", [0.0, TINY, 0.5, 1.0, 4.0, None])
def test_a_declared_curvature_is_not_negative(value):
    curvature = Curvature(value, "declared", False)
    declared = messages.declaration_from_wire(messages.declaration_to_wire({"name": "a", "curvature": curvature}))
    assert declared == {"name": "a", "curvature": curvature}


@pytest.mark.parametrize("value", [-TINY, -0.5, -1.0, -2.0, math.inf])
def test_a_negative_curvature_is_refused(value):
    with pytest.raises(SchemaError) as caught:
        messages.declaration_from_wire({"name": "a", "curvature": {"value": value, "source": "declared",
                                                                   "quadratic": False}})
    assert caught.value.field == "curvature.value"


def test_a_release_round_trips():
    release = messages.release_from_wire("agent0", {"round": 2, "arrays": {"ez": np.arange(5.0)}}, 2, {"ez": (5,)})
    assert (release.agent, release.round) == ("agent0", 2)
    np.testing.assert_array_equal(release.arrays["ez"], np.arange(5.0))


@pytest.mark.parametrize("value", [
    ["round", "arrays"], ("round", "arrays"), "round", None, 2,
    {"round": 2, "arrays": []}, {"round": 2, "arrays": ["ez"]}, {"round": 2, "arrays": None},
    {"round": 2, "arrays": {"ez": np.zeros(5)}, "extra": 1}, {"round": 2},
    {"round": 2, "arrays": {"ez": np.zeros(5)}, "agent": "agent1"},
])
def test_a_release_is_a_table_of_its_round_and_a_table_of_arrays(value):
    with pytest.raises(SchemaError, match="expected a release") as caught:
        messages.release_from_wire("agent0", value, 2, {"ez": (5,)})
    assert caught.value.field == "agent0"


def test_a_release_names_its_first_unknown_array_in_sorted_order():
    arrays = {"ez": np.zeros(5), "zz": np.zeros(1), "ab": np.zeros(1), "mm": np.zeros(1)}
    with pytest.raises(SchemaError, match="not an array this family releases") as caught:
        messages.release_from_wire("agent0", {"round": 2, "arrays": arrays}, 2, {"ez": (5,)})
    assert caught.value.field == "agent0.arrays.ab"
    with pytest.raises(SchemaError) as caught:
        messages.release_from_wire("agent0", {"round": 2, "arrays": {"b": np.zeros(1), "a": np.zeros(1)}}, 2, {})
    assert caught.value.field == "agent0.arrays.a"


@pytest.mark.parametrize("info, match", [
    ({"index": 0}, "missing"),
    ({"index": 0, "parties": 1}, "1 parties, but the run names 2"),
    ({"index": 0, "parties": 3}, "3 parties, but the run names 2"),
])
def test_a_sharing_party_needs_the_runs_true_number_of_parties(monkeypatch, info, match):
    """M enters Lemma 1's sensitivity (the paper preset): a start that leaves it out, or says fewer parties than it
    names, would have the party draw less noise than the run needs (32 % less at M = 1 for 2 parties)."""
    from cvxdp.families.sharing.params import ADMMSharing

    monkeypatch.setattr(messages, "SharingNode", lambda *args: args[-1])
    agent = type("Agent", (), {"name": "a"})()
    start = {"solvers": [], "names": ["a", "b"]}
    seed = np.random.SeedSequence(0)
    assert messages.build_node(ADMMSharing(), agent, {"index": 0, "parties": 2}, start, seed, None, "pld") == 2
    with pytest.raises(SchemaError, match=f"agents.a.parties.*{match}"):
        messages.build_node(ADMMSharing(), agent, info, start, seed, None, "pld")
