"""What runs at a party (cvxdp/federation/party.py, run_folder.py), pinned at each edge: the party file's and the agents
file's errors with the key they name, the state folder's lock and permissions, what a start, a step, a finish and a
release check, answer and write, the refusal of a request that does not fit the protocol, and the run folder read back
after a restart (a torn release log, an evaluation file without rows). test_malicious.py plays a coordinator as an
attacker and test_protocol.py runs whole federations; these drive one long-lived :class:`Party` in-process through the
bytes of its requests (docs/federation.md).
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import sys
import textwrap
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cvxdp.errors import ConfigError, InvalidParameterError, PartyRefusedError
from cvxdp.families.consensus.node import RoundMessage
from cvxdp.federation import messages
from cvxdp.federation import party as party_module
from cvxdp.federation.coordinator import LocalChannel
from cvxdp.federation.parties import party_folders
from cvxdp.federation.party import Party, PartyFile
from cvxdp.federation.run_folder import RunFolder
from cvxdp.federation.wire import encode
from cvxdp.privacy import pure_epsilon_event
from cvxdp.run.storage import LOCK_FILE

TOKEN = "0123456789abcdef"
POLICY = {"mechanism": "ObjG", "epsilon": 0.3, "delta": 1e-6}
ALGORITHM = {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 1, "rounds": 3}


@pytest.fixture(autouse=True)
def _open_umask():
    """Every test starts under a permissive umask (the party must set its own) and leaves the process's as it was."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _toy(n: int = 1):
    from cvxdp_models.toy import make_agents

    return make_agents(agents=n, seed=1)


def _party(tmp_path: Path, *, privacy=POLICY, budget=None, limits=None, agents=None, seed=None,
           report_feasibility=False) -> Path:
    agents = agents if agents is not None else _toy()
    return party_folders(agents, tmp_path / "parties", privacy=privacy, budget=budget, limits=limits, seed=seed,
                         report_feasibility=report_feasibility)[0]


class Coordinator:
    """Speaks to one party (one long-lived object) through its request bytes."""

    def __init__(self, file: Path, agent: str = "agent0", channel: LocalChannel | None = None) -> None:
        self.file, self.agent = file, agent
        self.channel = channel or LocalChannel([file])
        self.name = self.channel.parties()[0]
        self.owner: str | None = None
        self.token = TOKEN

    @property
    def party(self) -> Party:
        return self.channel.party(self.name)

    def send(self, kind: str, body: dict) -> Any:
        """The reply's value; a refusal is raised as PartyRefusedError, a failure as BackendError."""
        return messages.read_reply(self.name, self.channel.raw(self.name, messages.request(kind, body)),
                                   body.get("round"))

    def refused(self, kind: str, body: dict) -> PartyRefusedError:
        with pytest.raises(PartyRefusedError) as info:
            self.send(kind, body)
        return info.value

    def start_body(self, **changes: Any) -> dict:
        body = {"token": self.token, "algorithm": dict(ALGORITHM), "privacy": dict(POLICY), "accountant": "pld",
                "solvers": ["CLARABEL", "ECOS", "OSQP"], "target_delta": 1e-5, "names": [self.agent],
                "agents": {self.agent: {"index": 0}}}
        body.update(changes)
        return body

    def start(self, **changes: Any) -> dict:
        value = self.send("start", self.start_body(**changes))
        self.owner = value["owner"]
        return value

    def message(self, t: int, **changes: Any) -> dict:
        node = self.party.runs[self.token].nodes[self.agent]
        msg = RoundMessage(round=t, bw=np.zeros(int(node.sidx.size)), rho=changes.pop("rho", 1.0),
                           eta=changes.pop("eta", 4.0))
        wire = messages.to_wire(replace(msg, plan=node.plan(msg)))
        wire.update(changes)
        return wire

    def step_body(self, t: int, message: dict | None = None) -> dict:
        return {"token": self.token, "owner": self.owner, "round": t,
                "messages": {self.agent: message if message is not None else self.message(t)}}

    def step(self, t: int, message: dict | None = None) -> dict:
        return self.send("step", self.step_body(t, message))

    def finish(self, solution: dict | None = None) -> dict:
        return self.send("finish", {"token": self.token, "owner": self.owner,
                                    "solution": solution if solution is not None else {"x": np.zeros(5)}})


def _run_folder(file: Path, token: str = TOKEN) -> Path:
    return file.parent / "state" / f"run-{token}"


def _check(exc: PartyRefusedError, *, round: int | None, reason: str, field: str | None) -> None:
    assert (exc.party, exc.round, exc.reason, exc.field) == ("agent0", round, reason, field), str(exc)
    assert "\n" not in str(exc)


# ---------------------------------------------------------------- the party file
def test_the_party_module_reads_toml_without_tomli_from_python_3_11():
    """tomli is a dependency below Python 3.11 only (pyproject.toml): from 3.11 on the standard library's tomllib
    reads the party file."""
    if sys.version_info < (3, 11):
        pytest.skip("tomli is the reader below Python 3.11")
    code = "import sys; sys.modules['tomli'] = None; import cvxdp.federation.party as p; print(p.tomllib.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tomllib"


def _toml(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "party.toml"
    text = textwrap.dedent(text)
    path.write_text(text if "[privacy]" in text else text + '\n[privacy]\nmechanism = "none"\n')
    return path


def test_a_missing_party_file_a_folder_and_bad_toml_are_one_line_each(tmp_path):
    with pytest.raises(ConfigError, match=r"Party file .*nowhere\.toml' does not exist\.$"):
        PartyFile(tmp_path / "nowhere.toml")
    with pytest.raises(ConfigError, match=r"is a folder; give its party\.toml\.$"):
        PartyFile(tmp_path)
    bad = _toml(tmp_path / "bad", "[party\nname = 'x'\n")
    with pytest.raises(ConfigError, match=r"party\.toml is not valid TOML: "):
        PartyFile(bad)


def test_an_unknown_table_is_named(tmp_path):
    path = _toml(tmp_path, """
        [party]
        name = "p"
        agents = "agents.pkl"
        [extra]
        x = 1
        """)
    with pytest.raises(ConfigError, match=r"unknown table\(s\) 'extra'\. Allowed: budget, limits, party, privacy\."):
        PartyFile(path)


def test_a_moved_key_names_the_first_one_and_where_it_went(tmp_path):
    path = _toml(tmp_path, """
        [party]
        name = "p"
        agents = "agents.pkl"
        budget_epsilon = 1.0
        accountant = "pld"
        """)
    with pytest.raises(ConfigError, match=r"\[party\] accountant moved to \[privacy\] accountant \("):
        PartyFile(path)


@pytest.mark.parametrize("name", [None, "", 5])
def test_a_party_without_a_name_string_is_refused(tmp_path, name):
    line = "" if name is None else f"name = {name!r}"
    path = _toml(tmp_path, f"[party]\n{line}\nagents = 'agents.pkl'\n")
    with pytest.raises(ConfigError, match=r"\[party\] needs a 'name'\.$"):
        PartyFile(path)


def test_the_party_files_defaults_and_its_budget(tmp_path):
    path = _toml(tmp_path, """
        [party]
        name = "zone1"
        agents = "agents.pkl"
        [privacy]
        mechanism = "ObjG"
        epsilon = 1.0
        delta = 1e-6
        [budget]
        epsilon = 2.0
        delta = 1e-5
        """)
    file = PartyFile(path)
    assert file.evaluate is True and file.report_feasibility is False
    assert file.dataset == "zone1" and file.seed is None and file.function == "agents"
    assert file.state == tmp_path.resolve() / "state" and file.agents_file == tmp_path.resolve() / "agents.pkl"
    assert file.budget == (2.0, 1e-5)


def test_a_research_seed_is_a_non_negative_int(tmp_path):
    base = "[party]\nname = 'p'\nagents = 'agents.pkl'\n"
    assert PartyFile(_toml(tmp_path / "a", base + "seed = 0\n")).seed == 0
    with pytest.raises(InvalidParameterError, match=r"'seed' parameter of party file party\.toml must be an int in "
                                                   r"\[0, inf\]\. Got -1"):
        PartyFile(_toml(tmp_path / "b", base + "seed = -1\n"))


@pytest.mark.parametrize("line", ['evaluate = "yes"', "report_feasibility = 1"])
def test_the_partys_switches_are_booleans(tmp_path, line):
    path = _toml(tmp_path, f"[party]\nname = 'p'\nagents = 'agents.pkl'\n{line}\n")
    key = line.split(" ")[0]
    with pytest.raises(ConfigError, match=rf"\[party\] {key} must be true or false\.$"):
        PartyFile(path)


# ---------------------------------------------------------------- the agents
def _agents_file(tmp_path: Path, data: bytes) -> PartyFile:
    path = _toml(tmp_path, "[party]\nname = 'p'\nagents = 'agents.pkl'\n")
    (tmp_path / "agents.pkl").write_bytes(data)
    return PartyFile(path)


def test_a_missing_agents_file_is_named(tmp_path):
    file = PartyFile(_toml(tmp_path, "[party]\nname = 'p'\nagents = 'agents.pkl'\n"))
    with pytest.raises(ConfigError, match=r"the agents file .*agents\.pkl' does not exist\.$"):
        file.load_agents()


@pytest.mark.parametrize(("data", "error"), [
    (b"", "EOFError"),
    (b"ccvxdp\nNoSuchAgentClass\n.", "AttributeError"),
    (b"cno_such_module_for_cvxdp_tests\nthing\n.", "ModuleNotFoundError"),
    (b"not a pickle at all", "UnpicklingError"),
])
def test_an_unreadable_agents_file_is_one_line_naming_it(tmp_path, data, error):
    file = _agents_file(tmp_path, data)
    with pytest.raises(ConfigError, match=rf"agents\.pkl' cannot be read \({error}: .*write it again with"):
        file.load_agents()


@pytest.mark.parametrize("module", ["gone.py", "gone.txt"])
def test_a_missing_module_is_named(tmp_path, module):
    file = PartyFile(_toml(tmp_path, f"[party]\nname = 'p'\nmodule = '{module}'\n"))
    with pytest.raises(ConfigError, match=rf"the module .*{module}' does not exist\.$"):
        file.load_agents()


def _module_party(tmp_path: Path, body: str) -> PartyFile:
    (tmp_path / "mine.py").write_text(textwrap.dedent(body))
    return PartyFile(_toml(tmp_path, "[party]\nname = 'p'\nmodule = 'mine.py'\n"))


def test_a_module_returning_other_objects_than_agents_is_refused(tmp_path):
    file = _module_party(tmp_path, "def agents():\n    return [1, 2]\n")
    with pytest.raises(ConfigError, match=r"must be cvxdp\.Agent \(or cvxdp\.VerticalParty\) objects; got int\.$"):
        file.load_agents()


def test_a_modules_agents_are_loaded_and_two_with_one_name_refused(tmp_path):
    agents = _toy(2)
    pickle.dump(agents, open(tmp_path / "two.pkl", "wb"))
    pickle.dump([agents[0], agents[0]], open(tmp_path / "twice.pkl", "wb"))
    file = _module_party(tmp_path, f"""
        import pickle
        def agents():
            return pickle.load(open({str(tmp_path / 'two.pkl')!r}, "rb"))
        def twice():
            return pickle.load(open({str(tmp_path / 'twice.pkl')!r}, "rb"))
        """)
    assert [a.name for a in file.load_agents()] == ["agent0", "agent1"]
    file.function = "twice"
    with pytest.raises(ConfigError, match="two of the party's agents share a name"):
        file.load_agents()


# ---------------------------------------------------------------- the owner's files only
def test_private_files_lists_what_others_can_reach(tmp_path):
    file = _party(tmp_path)
    folder, agents = file.parent, file.parent / "agents.pkl"
    assert PartyFile(file).private_files() == []  # as `cvxdp parties` writes them: 0700 and 0600
    for mode in (0o640, 0o604, 0o601):
        os.chmod(agents, mode)
        assert PartyFile(file).private_files() == [agents], oct(mode)
    os.chmod(agents, 0o600)
    for mode in (0o750, 0o705, 0o701):  # o+x alone lets others reach the files inside
        os.chmod(folder, mode)
        assert PartyFile(file).private_files() == [folder], oct(mode)
    os.chmod(folder, 0o700)


def test_private_files_checks_a_module_too(tmp_path):
    (tmp_path / "mine.py").write_text("def agents():\n    return []\n")
    os.chmod(tmp_path, 0o700)
    file = PartyFile(_toml(tmp_path, "[party]\nname = 'p'\nmodule = 'mine.py'\n"))
    os.chmod(tmp_path / "mine.py", 0o600)
    assert file.private_files() == []
    os.chmod(tmp_path / "mine.py", 0o644)
    assert file.private_files() == [tmp_path.resolve() / "mine.py"]


# ---------------------------------------------------------------- the party's state folder
def test_a_party_holds_its_state_folders_lock_until_closed(tmp_path):
    file = _party(tmp_path)
    lock = file.parent / "state" / LOCK_FILE
    party = Party(file)
    assert lock.exists()
    party.close()
    assert not lock.exists()
    Party(file, lock=False).close()
    assert not lock.exists()
    with pytest.raises(TypeError):
        Party(file, False)  # lock is keyword-only


def test_the_state_folder_is_created_with_its_parents_and_its_owners_only(tmp_path):
    file = _party(tmp_path)
    file.write_text(file.read_text().replace('state = "state"', 'state = "var/lib/state"'))
    Party(file, lock=False)
    state = file.parent / "var" / "lib" / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    os.chmod(state, 0o755)  # loosened by someone: the party closes it again
    Party(file, lock=False)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_everything_a_party_writes_is_its_owners_only(tmp_path):
    file = _party(tmp_path)
    coordinator = Coordinator(file)
    coordinator.start()
    coordinator.step(1)
    coordinator.finish()
    written = list((file.parent / "state").rglob("*"))
    names = {p.name for p in written}
    assert {"ledger.jsonl", f"run-{TOKEN}", "run.msg", "state.msg", "releases.log", "evaluation.csv", "ledger.json",
            "local.npz"} <= names
    for path in written:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path.name, oct(mode))


def test_each_request_is_one_log_line(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    lines: list[str] = []
    coordinator.party.log = lines.append
    coordinator.send("hello", {})
    coordinator.start()
    coordinator.step(1)
    coordinator.step(1)
    assert lines == ["party 'agent0': hello: answered", f"party 'agent0': start of run {TOKEN}: answered",
                     f"party 'agent0': step round 1 of run {TOKEN}: released (agent0)",
                     f"party 'agent0': step round 1 of run {TOKEN}: answered again from its record (nothing drawn, "
                     "nothing charged)"]


# ---------------------------------------------------------------- the start
def test_a_start_hands_out_round_0_and_an_owner(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    value = coordinator.start()
    assert value["party"] == "agent0" and value["round"] == 0 and set(value["declare"]) == {"agent0"}
    assert len(value["owner"]) == 32 and int(value["owner"], 16) >= 0


def test_a_run_started_again_with_other_parameters_is_refused(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    exc = coordinator.refused("start", coordinator.start_body(target_delta=1e-6))
    _check(exc, round=0, reason="replay", field="token")
    assert "started with other parameters" in str(exc) and "refuses the run" in str(exc)


def test_a_start_for_agents_the_party_does_not_hold_names_the_first(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    agents = {"agent0": {"index": 0}, "zed": {"index": 2}, "ghost": {"index": 1}}
    exc = coordinator.refused("start", coordinator.start_body(agents=agents, names=["agent0", "ghost", "zed"]))
    _check(exc, round=0, reason="policy", field="agents")
    assert "it holds no agent 'ghost'." in str(exc)


def test_a_start_for_an_agent_whose_budget_is_spent_is_refused(tmp_path):
    coordinator = Coordinator(_party(tmp_path, budget=(1.0, 1e-5)))
    coordinator.party.ledger.charge("f" * 16, 1, {"agent0": (pure_epsilon_event(2.0), (2.0, 0.0), 1)},
                                    {"agent0": "q"})
    exc = coordinator.refused("start", coordinator.start_body())
    _check(exc, round=0, reason="budget", field=None)
    assert "agent 'agent0' has spent its whole lifetime budget" in str(exc)
    assert not _run_folder(coordinator.file).exists()


def test_a_research_seeds_stream_serves_one_run_only(tmp_path):
    file = _party(tmp_path, seed=5)
    coordinator = Coordinator(file)
    coordinator.start()
    coordinator.step(1)
    other = Coordinator(file, channel=coordinator.channel)
    other.token = "1" * 16
    exc = other.refused("start", other.start_body())
    _check(exc, round=0, reason="policy", field="agents.index")
    assert f"served run {TOKEN} already" in str(exc) and "seed 5, index 0" in str(exc)
    assert not _run_folder(file, "1" * 16).exists()
    coordinator.channel.restart(coordinator.name)  # the run that used the stream goes on after a restart
    coordinator.start()
    assert set(coordinator.step(2)) == {"agent0"}


def test_without_a_research_seed_runs_are_not_limited(tmp_path):
    file = _party(tmp_path)
    coordinator = Coordinator(file)
    coordinator.start()
    other = Coordinator(file, channel=coordinator.channel)
    other.token = "1" * 16
    assert other.start()["round"] == 0


def test_a_graph_start_without_a_degree_is_a_message_refusal_naming_it(tmp_path):
    file = _party(tmp_path, privacy={"mechanism": "none"})
    coordinator = Coordinator(file)
    body = coordinator.start_body(algorithm={"name": "madmm", "graph": "complete", "rounds": 2},
                                  privacy={"mechanism": "none"})
    exc = coordinator.refused("start", body)
    _check(exc, round=None, reason="message", field="agents.agent0.degree")


def test_an_agent_that_cannot_run_the_algorithm_is_a_policy_refusal(tmp_path):
    policy = {"mechanism": "gamma", "alpha": 3.0}
    coordinator = Coordinator(_party(tmp_path, privacy=policy))  # a toy agent: no ERM constants for M-ADMM's bound
    body = coordinator.start_body(algorithm={"name": "madmm", "graph": "complete", "rounds": 2}, privacy=policy,
                                  agents={"agent0": {"index": 0, "degree": 2}}, names=["agent0", "a1", "a2"])
    exc = coordinator.refused("start", body)
    _check(exc, round=0, reason="policy", field="agents.agent0")
    assert "agent 'agent0' cannot run the coordinator's" in str(exc)


# ---------------------------------------------------------------- one coordinator per run
@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(party_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_a_held_run_is_free_after_exactly_the_lock_timeout_of_silence(tmp_path, clock):
    file = _party(tmp_path)
    first = Coordinator(file)
    first.start()
    second = Coordinator(file, channel=first.channel)
    clock[0] = 1042.0
    exc = second.refused("start", second.start_body())
    _check(exc, round=0, reason="owner", field="token")
    assert "(last heard 42 s ago)" in str(exc) and "after 300 s of silence" in str(exc)
    clock[0] = 1000.0 + 299.5
    second.refused("start", second.start_body())
    clock[0] = 1000.0 + 300.0
    assert second.start()["round"] == 0
    exc = first.refused("step", first.step_body(1))
    _check(exc, round=1, reason="owner", field="owner")


def test_a_released_or_finished_run_is_free_at_once(tmp_path, clock):
    file = _party(tmp_path)
    first = Coordinator(file)
    first.start()
    first.step(1)
    assert first.send("release", {"token": TOKEN, "owner": first.owner}) == {"party": "agent0", "round": 1}
    second = Coordinator(file, channel=first.channel)
    assert second.start()["round"] == 1
    second.finish()
    third = Coordinator(file, channel=first.channel)
    assert third.start()["round"] == 1
    _check(second.refused("step", second.step_body(2)), round=2, reason="owner", field="owner")


# ---------------------------------------------------------------- rounds
def test_rounds_come_in_order_and_no_further_than_the_run(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    exc = coordinator.refused("step", coordinator.step_body(3))
    _check(exc, round=3, reason="order", field="round")
    assert f"the next round of run {TOKEN} is 2." in str(exc)
    coordinator.step(2)
    coordinator.step(3)
    exc = coordinator.refused("step", coordinator.step_body(4))
    _check(exc, round=4, reason="limits", field="round")
    assert f"run {TOKEN} has 3 rounds." in str(exc)


def test_a_released_round_asked_with_another_request_is_refused_and_says_why(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    exc = coordinator.refused("step", coordinator.step_body(1, coordinator.message(1, eta=5.0)))
    _check(exc, round=1, reason="replay", field="round")
    assert "released already, for another request;" in str(exc)


def test_a_released_round_whose_record_is_gone_is_refused(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    again = coordinator.step_body(1)
    (_run_folder(coordinator.file) / "releases.log").unlink()
    coordinator.channel.restart(coordinator.name)
    coordinator.start()
    again["owner"] = coordinator.owner
    exc = coordinator.refused("step", again)
    _check(exc, round=1, reason="replay", field="round")
    assert "released already, for a request it no longer holds;" in str(exc)


def test_a_consensus_rounds_weights_inside_the_partys_limits(tmp_path):
    coordinator = Coordinator(_party(tmp_path, limits={"eta": [1e-3, 1e3], "rho": [0.5, 2.0]}))
    coordinator.start()
    _check(coordinator.refused("step", coordinator.step_body(1, coordinator.message(1, eta=1e9))), round=1,
           reason="limits", field="messages.agent0.eta")
    _check(coordinator.refused("step", coordinator.step_body(1, coordinator.message(1, rho=5.0))), round=1,
           reason="limits", field="messages.agent0.rho")
    assert set(coordinator.step(1, coordinator.message(1, rho=2.0))) == {"agent0"}


def test_a_graph_rounds_eta_inside_the_partys_limits(tmp_path):
    from cvxdp_models.erm import make_erm

    agents = make_erm({"nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 60, "data_seed": 0}).agents[:1]
    name = agents[0].name
    policy = {"mechanism": "gamma", "alpha": 3.0}
    coordinator = Coordinator(_party(tmp_path, privacy=policy, agents=agents, limits={"eta": [0.1, 10.0]}), name)
    coordinator.start(algorithm={"name": "madmm", "graph": "complete", "rounds": 3}, privacy=policy,
                      agents={name: {"index": 0, "degree": 2}})
    node = coordinator.party.runs[TOKEN].nodes[name]
    msg = {"round": 1, "neighbours": np.zeros((2, node.d)), "dual_step": None, "eta": 50.0, "exact": True,
           "alpha": node.alpha(1)}
    exc = coordinator.refused("step", coordinator.step_body(1, msg))
    assert (exc.round, exc.reason, exc.field) == (1, "limits", f"messages.{name}.eta")
    assert set(coordinator.step(1, {**msg, "eta": 1.7})) == {name}


# ---------------------------------------------------------------- the end
def test_finish_writes_the_partys_outputs_and_gives_the_run_up(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    value = coordinator.finish()
    assert set(value) == {"party", "ledger"} and value["party"] == "agent0"  # no feasibility bits unless allowed
    folder = _run_folder(coordinator.file)
    text = (folder / "ledger.json").read_text()
    assert text.startswith('{\n  "run": {\n    "')  # indented by two
    saved = json.loads(text)
    assert set(saved) == {"run", "lifetime"} and saved["run"]["worst"] == value["ledger"]
    assert saved["lifetime"]["agents"]["agent0"]["releases"] == 1
    local = np.load(folder / "local.npz")
    assert set(local.files) == {"agent0"} and local["agent0"].ndim == 1
    _check(coordinator.refused("step", coordinator.step_body(2)), round=2, reason="owner", field="owner")


@pytest.fixture
def fresh_warnings(monkeypatch):
    from cvxdp.privacy import accounting

    monkeypatch.setattr(accounting, "_WARNED", set())


def test_feasibility_bits_are_released_when_allowed_noted_once_and_warn_nothing(tmp_path, fresh_warnings):
    coordinator = Coordinator(_party(tmp_path, report_feasibility=True))
    coordinator.start()
    coordinator.step(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert coordinator.finish({"x": np.zeros(5)})["feasible"] == {"agent0": True}
        coordinator.start()
        assert coordinator.finish({"x": np.full(5, 100.0)})["feasible"] == {"agent0": False}
    saved = json.loads((_run_folder(coordinator.file) / "ledger.json").read_text())
    assert saved["run"]["guarantee"] is False
    assert [n["voids"] for n in saved["run"]["notes"]] == [True]
    notes = [r for r in coordinator.party.ledger.records if r.get("kind") == "note"]
    assert len(notes) == 1 and notes[0]["run"] == TOKEN and notes[0]["voids"] is True
    other = Coordinator(coordinator.file, channel=coordinator.channel)
    other.token = "1" * 16
    other.start()
    other.finish()
    assert [r["run"] for r in coordinator.party.ledger.records if r.get("kind") == "note"] == [TOKEN, "1" * 16]


@pytest.mark.parametrize(("distance", "feasible"), [(0.0, True), (1e-6, True), (1.0000001e-6, False), (0.5, False)])
def test_a_feasibility_bit_allows_a_distance_of_1e_6(tmp_path, monkeypatch, distance, feasible):
    coordinator = Coordinator(_party(tmp_path, report_feasibility=True))
    coordinator.start()
    monkeypatch.setattr(party_module, "solution_violation",
                        lambda agents, solution, **kw: {"per_agent": {a.name: distance for a in agents}})
    assert coordinator.finish()["feasible"] == {"agent0": feasible}


# ---------------------------------------------------------------- requests that do not fit the protocol
def _raw_refusal(coordinator: Coordinator, data: bytes) -> PartyRefusedError:
    with pytest.raises(PartyRefusedError) as info:
        messages.read_reply("agent0", coordinator.channel.raw(coordinator.name, data), None)
    return info.value


def test_bytes_that_are_no_request_are_refused_not_raised(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    for value in ([1, 2], "text", {"protocol": 1}):
        exc = _raw_refusal(coordinator, encode(value))
        _check(exc, round=None, reason="message", field=None)


@pytest.mark.parametrize(("round", "named"), [(-1, None), (0, 0), (1, 1), (10 ** 9, 10 ** 9),
                                              (10 ** 9 + 1, None), (True, None)])
def test_a_misfit_requests_refusal_names_a_round_a_refusal_can_carry(tmp_path, round, named):
    coordinator = Coordinator(_party(tmp_path))
    body = {"token": TOKEN, "owner": "0" * 32, "round": round, "messages": {}, "bogus": 1}
    exc = _raw_refusal(coordinator, messages.request("step", body))
    assert exc.round == named and exc.reason == "message"


# ---------------------------------------------------------------- the run folder after a restart
def _log(file: Path) -> Path:
    return _run_folder(file) / "releases.log"


def _rounds(file: Path) -> list[int]:
    import csv

    with open(_run_folder(file) / "evaluation.csv", newline="") as fh:
        return [int(r["round"]) for r in csv.DictReader(fh)]


def test_a_run_started_again_after_a_crash_before_its_run_file_starts(tmp_path):
    file = _party(tmp_path)
    _run_folder(file).mkdir(parents=True)  # the party died between the folder and its run.msg
    coordinator = Coordinator(file)
    assert coordinator.start()["round"] == 0
    assert (_run_folder(file) / "run.msg").is_file()


def test_a_restart_before_any_round_evaluates_round_1(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.channel.restart(coordinator.name)
    coordinator.start()
    coordinator.step(1)
    assert _rounds(coordinator.file) == [1]


def test_an_evaluation_file_with_its_header_only_is_evaluated_from_round_1(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    path = _run_folder(coordinator.file) / "evaluation.csv"
    header = path.read_text().splitlines()[0]
    path.write_text(header + "\n")  # killed between the header and the rows of round 1 ...
    coordinator.channel.restart(coordinator.name)
    assert RunFolder.open(_run_folder(coordinator.file)) is not None
    coordinator.start()
    coordinator.step(2)
    assert _rounds(coordinator.file) == [2]


def test_a_round_is_evaluated_once(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    coordinator.step(2)
    before = (_run_folder(coordinator.file) / "evaluation.csv").read_bytes()
    run = coordinator.party.runs[TOKEN]
    run.evaluate(2)
    run.evaluate(1)
    assert (_run_folder(coordinator.file) / "evaluation.csv").read_bytes() == before
    coordinator.channel.restart(coordinator.name)
    coordinator.start()
    coordinator.party.runs[TOKEN].evaluate(2)
    coordinator.step(3)
    assert _rounds(coordinator.file) == [1, 2, 3]


@pytest.mark.parametrize("torn", ["header", "7 bytes", "1 byte short", "3 bytes short", "half"])
def test_a_torn_last_record_is_cut_off_and_the_run_goes_on(tmp_path, torn):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    first = coordinator.step(1)
    log = _log(coordinator.file)
    whole = log.read_bytes()
    tail = {"header": whole[:3], "7 bytes": whole[:7], "1 byte short": whole[:-1],  # a copy of round 1's record
            "3 bytes short": whole[:-3], "half": whole[:len(whole) // 2]}[torn]
    with open(log, "ab") as fh:
        fh.write(tail)
    coordinator.channel.restart(coordinator.name)
    coordinator.start()
    assert log.read_bytes() == whole  # cut back to the records the party answered
    np.testing.assert_array_equal(coordinator.step(1, _replay_message(coordinator, 1))["agent0"]["arrays"]["ez"],
                                  first["agent0"]["arrays"]["ez"])
    coordinator.step(2)
    assert len(log.read_bytes()) > len(whole)


def _replay_message(coordinator: Coordinator, t: int) -> dict:
    """The honest message of round ``t`` again (the request a resuming coordinator repeats)."""
    node = coordinator.party.runs[coordinator.token].nodes[coordinator.agent]
    msg = RoundMessage(round=t, bw=np.zeros(int(node.sidx.size)), rho=1.0, eta=4.0)
    return messages.to_wire(replace(msg, plan=node.plan(msg)))


def test_a_torn_first_record_leaves_an_empty_log(tmp_path):
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    log = _log(coordinator.file)
    log.write_bytes(b"\x00\x00\x00\x00\x00\x00\x01\x00abc")  # killed while writing round 1's record
    coordinator.channel.restart(coordinator.name)
    coordinator.start()
    assert log.read_bytes() == b""
    released = coordinator.step(1)
    coordinator.channel.restart(coordinator.name)
    coordinator.start()
    np.testing.assert_array_equal(coordinator.step(1, _replay_message(coordinator, 1))["agent0"]["arrays"]["ez"],
                                  released["agent0"]["arrays"]["ez"])


def test_a_record_written_past_the_saved_state_is_cut_off_and_the_round_computed_again(tmp_path):
    """The party died after appending round 2's record but before saving its state: round 2 never left, so it is
    cut off and computed again from the saved state (the same generator state: the same release)."""
    coordinator = Coordinator(_party(tmp_path))
    coordinator.start()
    coordinator.step(1)
    folder = _run_folder(coordinator.file)
    state1, log1 = (folder / "state.msg").read_bytes(), _log(coordinator.file).read_bytes()
    second = coordinator.step(2)
    (folder / "state.msg").write_bytes(state1)
    coordinator.channel.restart(coordinator.name)
    assert coordinator.start()["round"] == 1
    assert _log(coordinator.file).read_bytes() == log1
    np.testing.assert_array_equal(coordinator.step(2)["agent0"]["arrays"]["ez"], second["agent0"]["arrays"]["ez"])
