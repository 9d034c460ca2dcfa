"""The coordinator of a federation (cvxdp/federation/coordinator.py), in one process: the channel's interface, the
in-process channel, the backend's round bookkeeping and its checks of what the parties answer, the declarations'
check against the run's agents and what the run's outputs say about the parties. Each party is a long-lived
:class:`~cvxdp.federation.party.Party` built from its own folder (tests/federation/test_protocol.py runs the
protocol's honest runs, faults and resumes; tests/federation/test_malicious.py the attacks on a party)."""

from __future__ import annotations

import inspect
import pickle
import warnings

import numpy as np
import pytest

import cvxdp
from cvxdp.config.build import make_algorithm
from cvxdp.errors import BackendError, CvxdpError
from cvxdp.families import family_class, own_algorithm_table
from cvxdp.federation.coordinator import (
    Channel,
    FederationBackend,
    LocalChannel,
    declarations,
    run_federation,
)
from cvxdp.federation.parties import party_folders
from cvxdp.federation.party import FEASIBILITY_NOTE, Party
from cvxdp.model import Node
from cvxdp.run import Backend
from cvxdp.run.storage import LOCK_FILE

LADMM = {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 2}
OBJG = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}
NONE = {"mechanism": "none"}


def _agents(n: int = 2):
    from cvxdp_models.toy import make_agents

    return make_agents(agents=n, dim=3, samples=10, seed=1)


def _setup(tmp_path, *, n=2, privacy=OBJG, algorithm=LADMM, seed=3, run=None, **folders):
    """``n`` toy agents as ``n`` parties with ``privacy`` as their policy, and the plan of a run of ``algorithm``."""
    agents = _agents(n)
    files = party_folders(agents, tmp_path / "parties", seed=seed, privacy=privacy, **folders)
    plan = {"name": "toy", "algorithm": dict(algorithm), "privacy": dict(privacy),
            "run": {"seed": seed} if run is None else run, "agents": [a.name for a in agents], "checkpoint": None}
    return agents, files, plan


def _run(plan, channel, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_federation(plan, channel, **kwargs)


# ---------------------------------------------------------------- the channel's interface
def test_a_channel_must_say_how_it_sends():
    with pytest.raises(TypeError, match="send"):
        Channel()

    class Silent(Channel):
        pass

    with pytest.raises(TypeError, match="send"):
        Silent()
    assert Channel.parties(LocalChannel([])) == []  # the base reaches nobody until told


@pytest.mark.parametrize("function", [Channel.send, LocalChannel.send, FederationBackend.call, run_federation],
                         ids=["Channel.send", "LocalChannel.send", "FederationBackend.call", "run_federation"])
def test_the_options_are_keyword_only(function):
    """A round, a timeout or the progress bar are never passed by position (as in Backend.call)."""
    params = inspect.signature(function).parameters
    options = {"send": ("round", "timeout"), "call": ("round",), "run_federation": ("progress",)}[function.__name__]
    assert all(params[o].kind is inspect.Parameter.KEYWORD_ONLY for o in options)
    positional = [p for p in params.values() if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in positional)
    if function is FederationBackend.call:
        assert inspect.signature(function) == inspect.signature(Backend.call)


def test_the_local_channel_refuses_a_round_by_position():
    channel = LocalChannel([])
    assert channel.send({}, round=3, timeout=1.0) == {}
    with pytest.raises(TypeError):
        channel.send({}, 3)


# ---------------------------------------------------------------- the in-process channel
def test_the_in_process_channel_opens_each_party_without_its_lock(tmp_path):
    """Party objects in one process (tests, benchmarks): the state folder stays free for another one."""
    _, files, _ = _setup(tmp_path)
    channel = LocalChannel(files)
    assert channel.parties() == ["agent0", "agent1"]
    party = channel.party("agent0")
    assert party.lock is None and not (party.state / LOCK_FILE).exists()
    assert channel.party("agent0") is party  # long-lived
    channel.restart("agent0")
    assert channel.party("agent0") is not party
    other = Party(files[0], lock=False)  # another object on the same folder
    assert other.name == "agent0"


def test_a_party_that_cannot_start_is_a_backend_error_naming_it(tmp_path):
    _, files, plan = _setup(tmp_path)
    (files[1].parent / "agents.pkl").unlink()
    channel = LocalChannel(files)
    with pytest.raises(BackendError, match=r"^Party 'agent1' cannot start: .*agents file .* does not exist") as err:
        channel.party("agent1")
    assert err.value.agents == ("agent1",)
    with pytest.raises(BackendError, match=r"^Party 'agent1' cannot start: ") as err:
        _run(plan, LocalChannel(files))
    assert err.value.agents == ("agent1",)


# ---------------------------------------------------------------- the backend
def _backend(tmp_path, n=2):
    """A FederationBackend over ``n`` non-private parties (ADMM), as run_federation builds it, and its family."""
    _, files, _ = _setup(tmp_path, n=n, privacy=NONE, algorithm={"name": "admm", "rho": 1.0, "rounds": 3})
    channel = LocalChannel(files)
    decls, owners, _ = declarations(channel.send({p: ("hello", {}) for p in channel.parties()}), None)
    table = {"name": "admm", "rho": 1.0, "rounds": 3}
    algorithm = make_algorithm(table)
    family = family_class(algorithm)(algorithm, decls, privacy=None, accountant="pld", budget=None,
                                     solvers=("CLARABEL", "ECOS", "OSQP"), target_delta=None)
    backend = FederationBackend(channel, owners, "0123456789abcdef", {
        "algorithm": own_algorithm_table(table), "privacy": dict(NONE), "accountant": family.accountant,
        "solvers": list(family.solvers), "target_delta": float(family.target_delta)})
    return backend, family


def test_a_federation_never_takes_the_coordinators_agents_or_entropy(tmp_path):
    backend = FederationBackend(LocalChannel([]), {}, "0123456789abcdef", {})
    for agents, seeds in (([object()], None), (None, [np.random.SeedSequence(0)]), ([object()], [object()])):
        with pytest.raises(BackendError, match="own agents and entropy"):
            backend.start([], agents, seeds)


def test_the_backends_round_bookkeeping(tmp_path):
    """Started: round 0 (nothing released yet); each step's round is the checkpoint's; a restore sets it back."""
    backend, family = _backend(tmp_path)
    backend.start(family.nodes(), None, None)
    assert backend.call(Node.state) == [{"round": 0}, {"round": 0}]
    declared = backend.call(Node.declare)
    assert [d["name"] for d in declared] == ["agent0", "agent1"]
    state = family.start(declared)
    plan = family.plan(1, state)
    releases = backend.call(Node.step, [(m,) for m in plan.messages], round=1)
    assert [(r.agent, r.round) for r in releases] == [("agent0", 1), ("agent1", 1)]
    assert backend.call(Node.state) == [{"round": 1}, {"round": 1}]
    assert backend.call(Node.restore, [({"round": 0},), ({"round": 0},)]) == [None, None]
    assert backend.call(Node.state) == [{"round": 0}, {"round": 0}]
    with pytest.raises(BackendError, match="does not hand over 'local'"):
        backend.call(Node.local)


def test_a_start_is_round_0_in_a_failing_partys_line(tmp_path, monkeypatch):
    _, files, plan = _setup(tmp_path)

    def broken(self, body):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Party, "_start", broken)
    with pytest.raises(BackendError, match=r"^Party 'agent0' failed in round 0: RuntimeError: disk on fire$") as err:
        _run(plan, LocalChannel(files))
    assert err.value.round == 0


class Tampered(LocalChannel):
    """A channel whose round-2 reply of party agent1 is changed by ``change`` (e.g. a broken or hostile party)."""

    def __init__(self, files, change):
        super().__init__(files)
        self.change = change
        self.released: list[str] = []  # the parties a failed coordinator gave its run back to

    def send(self, requests, *, round=None, timeout=None):
        replies = super().send(requests, round=round, timeout=timeout)
        if all(kind == "release" for kind, _ in requests.values()):
            self.released = sorted(requests)
        if round == 2 and all(kind == "step" for kind, _ in requests.values()):
            replies["agent1"] = self.change(replies["agent1"])
        return replies


@pytest.mark.parametrize(("change", "why"), [
    (lambda r: {}, "field 'agent1': missing from the party's reply"),
    (lambda r: None, "field 'agent1': missing from the party's reply"),
    (lambda r: {"agent0": r["agent1"]}, "field 'agent1': missing from the party's reply"),
    (lambda r: {"agent1": {**r["agent1"], "round": 3}}, "field 'agent1.round'"),
    (lambda r: {"agent1": {"round": 2, "arrays": {"ez": np.zeros(7)}}}, "field 'agent1.arrays.ez'"),
    (lambda r: {"agent1": "garbage"}, "field 'agent1': expected a release"),
], ids=["empty", "none", "another-agent", "wrong-round", "wrong-shape", "not-a-release"])
def test_a_missing_or_malformed_release_stops_the_run_naming_the_party_and_the_round(tmp_path, change, why):
    _, files, plan = _setup(tmp_path)
    channel = Tampered(files, change)
    with pytest.raises(BackendError) as err:
        _run(plan, channel)
    message = str(err.value)
    assert message.startswith("Party 'agent1' answered round 2 with an invalid release: ")
    assert why in message
    assert err.value.agents == ("agent1",) and err.value.round == 2
    assert channel.released == ["agent0", "agent1"]  # and the coordinator gave its run up at every party


# ---------------------------------------------------------------- the declarations
def _hello(tmp_path, n=3):
    _, files, _ = _setup(tmp_path, n=n)
    channel = LocalChannel(files)
    return channel.send({p: ("hello", {}) for p in channel.parties()})


def test_the_declarations_follow_the_runs_order(tmp_path):
    hello = _hello(tmp_path)
    decls, owners, budgets = declarations(hello, ["agent2", "agent0", "agent1"])
    assert [d.name for d in decls] == ["agent2", "agent0", "agent1"]
    assert owners == {"agent0": "agent0", "agent1": "agent1", "agent2": "agent2"}
    assert budgets == {"agent0": None, "agent1": None, "agent2": None}
    for order in (None, []):  # no order: the parties' own
        decls, owners, _ = declarations(hello, order)
        assert [d.name for d in decls] == ["agent0", "agent1", "agent2"]
        assert owners == {"agent0": "agent0", "agent1": "agent1", "agent2": "agent2"}


@pytest.mark.parametrize(("order", "message"), [
    (["agent0", "agent1", "agent2", "agent9"], "missing 'agent9'"),
    (["agent0", "agent8", "agent1", "agent2", "agent9"], "missing 'agent8', 'agent9'"),
    (["agent0", "agent1"], "unknown 'agent2'"),
    (["agent0"], "unknown 'agent1', 'agent2'"),
    (["agent0", "agent9", "agent2"], "missing 'agent9'; unknown 'agent1'"),
], ids=["missing", "two-missing", "unknown", "two-unknown", "both"])
def test_the_declarations_must_be_the_runs_agents_in_one_line(tmp_path, order, message):
    hello = _hello(tmp_path)
    with pytest.raises(CvxdpError) as err:
        declarations(hello, order)
    assert str(err.value) == f"The parties' agents are not the run's: {message}."


def test_a_node_that_introduces_itself_as_another_party_is_refused(tmp_path):
    hello = _hello(tmp_path, n=2)
    hello = {"agent0": hello["agent0"], "agent1": {**hello["agent1"], "party": "agent0"}}
    with pytest.raises(BackendError, match="registered as 'agent1' introduced itself as 'agent0'"):
        declarations(hello, None)


# ---------------------------------------------------------------- a run's outputs
def test_a_runs_outputs_name_the_parties_their_agents_and_the_runs_own_table(tmp_path, capfd):
    agents, files, plan = _setup(tmp_path, privacy=NONE, run={"seed": 3, "budget_epsilon": 50.0})
    fed = _run(plan, LocalChannel(files))
    assert fed.config["parties"] == {"agent0": ["agent0"], "agent1": ["agent1"]}
    assert fed.config["party_budgets"] == {"agent0": None, "agent1": None}
    assert fed.config["seed"] == 3  # the plan's [run] table is read
    assert fed.config["budget"] == [50.0, 0.0]  # without budget_delta: a pure epsilon budget
    assert fed.config["backend"] == "FederationBackend" and fed.config["case"] == {"name": "toy"}
    assert set(fed.config["party_reports"]) == {"agent0", "agent1"}
    assert len(fed.history) == 2
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # no progress bar unless asked
    bare = _run({k: v for k, v in plan.items() if k != "run"} | {"checkpoint": str(tmp_path / "cp")},
                LocalChannel(files))  # no [run] table: no seed, no budget
    assert bare.config["seed"] is None and bare.config["budget"] is None


def test_a_run_with_a_budget_delta_keeps_it(tmp_path):
    _, files, plan = _setup(tmp_path, privacy=NONE, run={"seed": 3, "budget_epsilon": 50.0, "budget_delta": 1e-5})
    assert _run(plan, LocalChannel(files)).config["budget"] == [50.0, 1e-5]


def test_several_agents_at_one_party_are_listed_under_it(tmp_path):
    agents = _agents(3)
    files = party_folders(agents[:2], tmp_path / "a", seed=3, privacy=NONE)
    (files[0].parent / "agents.pkl").write_bytes(pickle.dumps(agents[:2]))  # agent0 holds two agents
    tail = party_folders(agents[2:], tmp_path / "b", seed=3, privacy=NONE)
    plan = {"name": "toy", "algorithm": dict(LADMM), "privacy": dict(NONE), "run": {"seed": 3},
            "agents": ["agent0", "agent1", "agent2"], "checkpoint": None}
    fed = _run(plan, LocalChannel([files[0], *tail]))
    assert fed.config["parties"] == {"agent0": ["agent0", "agent1"], "agent2": ["agent2"]}
    assert fed.config["agents"] == ["agent0", "agent1", "agent2"]


def test_the_polish_bit_of_exact_admm_crosses_the_wire(tmp_path):
    """Exact ADMM's parties release one polish bit with their copies (shape (1,)): the federation's polished point
    and its history's polished column are the simulation's."""
    algorithm = {"name": "admm", "rho": 1.0, "rounds": 7}
    agents, files, plan = _setup(tmp_path, privacy=NONE, algorithm=algorithm)
    fed = _run(plan, LocalChannel(files))
    sim = cvxdp.solve(agents, algorithm=make_algorithm(algorithm), seed=3)
    assert fed.history["polished"].tolist()[-1] == 1.0
    np.testing.assert_array_equal(fed.history["polished"].to_numpy(), sim.history["polished"].to_numpy())
    assert fed.polished["round"] == sim.polished["round"] == 7
    np.testing.assert_array_equal(fed.polished["solution"]["x"], sim.polished["solution"]["x"])


def test_feasibility_bits_void_the_guarantee_with_one_note_per_party(tmp_path):
    _, files, plan = _setup(tmp_path, report_feasibility=True)
    fed = _run(plan, LocalChannel(files))
    assert {p: set(r["feasible"]) for p, r in fed.config["party_reports"].items()} == {
        "agent0": {"agent0"}, "agent1": {"agent1"}}
    notes = [n for n in fed.privacy["notes"] if "released whether" in n["reason"]]
    assert notes == [{"reason": FEASIBILITY_NOTE.format(party=p), "voids": True} for p in ("agent0", "agent1")]
    assert fed.privacy["guarantee"] is False


def test_a_one_party_federation_resumes_from_the_coordinators_checkpoint(tmp_path, monkeypatch):
    """The checkpoint holds the round every party had released; a rerun restores it and asks the rounds after it."""
    _, files, plan = _setup(tmp_path / "a", n=1, algorithm={**LADMM, "rounds": 3})
    full = _run(plan, LocalChannel(files))
    _, files, plan = _setup(tmp_path / "b", n=1, algorithm={**LADMM, "rounds": 3})
    plan["checkpoint"] = str(tmp_path / "b" / "checkpoint")
    step = Party._step

    def crash(self, body):
        if body["round"] == 3:
            raise RuntimeError("power cut")
        return step(self, body)

    with monkeypatch.context() as m:
        m.setattr(Party, "_step", crash)
        with pytest.raises(BackendError, match="in round 3"):
            _run(plan, LocalChannel(files))
    resumed = _run(plan, LocalChannel(files))
    assert resumed.history["round"].tolist() == [1, 2, 3]
    np.testing.assert_array_equal(resumed.solution["x"], full.solution["x"])
    again = _run(plan, LocalChannel(files))  # a finished run asked again: restored, nothing left to ask
    np.testing.assert_array_equal(again.solution["x"], full.solution["x"])


def test_a_runs_identity_does_not_depend_on_the_order_of_a_mapping_in_its_configuration(tmp_path):
    """The same run with the gamma mechanism's per-node alpha listed in another order is the same run at every
    party: answered again from its records (one run folder per party), with the same released numbers."""
    from cvxdp_models.erm import make_erm

    agents = make_erm({"nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 60, "data_seed": 0}).agents
    names = [a.name for a in agents]
    files = party_folders(agents, tmp_path / "parties", seed=11, privacy={"mechanism": "gamma", "alpha": 3.0})
    for file in files:  # each party's policy: alpha per node
        file.write_text(file.read_text().replace(
            "alpha = 3.0", "alpha = {" + ", ".join(f"{n} = 3.0" for n in names) + "}"))
    alpha = {n: 3.0 for n in names}
    plan = {"name": "erm", "algorithm": {"name": "madmm", "graph": "complete", "rounds": 2},
            "privacy": {"mechanism": "gamma", "alpha": alpha}, "run": {"seed": 11}, "agents": names,
            "checkpoint": None}
    first = _run(plan, LocalChannel(files))
    second = _run({**plan, "privacy": {"mechanism": "gamma", "alpha": dict(reversed(alpha.items()))}},
                  LocalChannel(files))
    for file in files:
        assert len(list((file.parent / "state").glob("run-*"))) == 1
    np.testing.assert_array_equal(first.history["round"].to_numpy(), second.history["round"].to_numpy())
    for key in first.solution:
        np.testing.assert_array_equal(first.solution[key], second.solution[key])
