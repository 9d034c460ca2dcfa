"""What runs at a party in a federation: its party file, agents, own policy, nodes, lifetime ledger and outputs.

A party declares itself alone, in a party file (TOML) in a folder only its owner can read::

    [party]
    name = "zone1"
    agents = "agents.pkl"         # this party's agents, and nobody else's (`cvxdp parties` writes it), or:
    # module = "my_party.py"      # a Python file next to this one whose function returns this party's agents
    # function = "agents"
    state = "state"               # its own folder: the lifetime ledger, one folder per run, its evaluation
    # dataset = "zone1-2026"      # the data set its lifetime budget counts against (default: its name)
    # seed = 0                    # research only: reproducible noise (default: fresh entropy from the OS)
    evaluate = true               # write its own evaluation (objective on its data) to its run folders
    report_feasibility = false    # at the end, release one bit per agent: is the public solution in its set?

    [privacy]                     # its own policy (cvxdp.federation.policy): what it releases
    mechanism = "ObjG"
    epsilon = 1.0
    delta = 1e-6

    # [budget] and [limits]: its lifetime budget and the bounds of what a coordinator may ask (optional)

:class:`Party` answers the coordinator's requests (``hello``, ``start``, ``step``, ``finish``, ``release``; see
:mod:`.messages`) and lives as long as the party's process (``cvxdp party``): agents, compiled nodes and state stay in
memory, and every round is also written to the party's own disk before its release leaves, so a party killed at
any moment resumes where it was. The rules it keeps, whatever a coordinator sends:

* its noise comes from its own policy and declarations (each node calibrates its own plan); a start that asks for
  another mechanism, accountant or algorithm than the policy's, or parameters outside their constraints or the
  party's limits, is refused; so is a round whose message does not fit its schema (shapes, dtypes, finite values);
* every release is charged to the lifetime ledger (:mod:`.lifetime`) and checked against the lifetime budget
  before it leaves; nothing rolls the ledger, the nodes or their generators back;
* a round is released once: the same request again (a coordinator resuming) gets the recorded release back, with
  no new draw and no new charge; another request for a released round, or a round out of order, is refused;
* one coordinator per run: ``start`` hands out an owner nonce that every later request of the run must carry;
  another coordinator is refused until the holder finishes, gives the run up or stays silent for the limits'
  ``lock_timeout``;
* a research seed's noise stream serves one run only.

Nothing the coordinator receives is computed on private data except the releases (and, only when the party file
allows it, the feasibility bits); its entropy and its evaluation stay in its own folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, CvxdpError, PartyRefusedError, check_int
from ..model import Agent, Node, solution_violation
from ..run.storage import OutputLock, atomic_write
from . import messages
from .policy import LifetimeLedger, PartyPolicy
from .run_folder import Run, RunFolder
from .wire import SchemaError, WireError, decode, digest, encode

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the note a party's feasibility bits add to its own ledger and to the coordinator's result
FEASIBILITY_NOTE = ("party {party!r} released whether the public solution lies in each of its agents' feasible sets "
                    "(report_feasibility = true): one bit per agent computed on its private data, not accounted")

PARTY_KEYS = {"name", "agents", "module", "function", "state", "dataset", "seed", "evaluate", "report_feasibility"}
SECTIONS = {"party", "privacy", "budget", "limits"}
#: keys that moved out of [party] (files written before the party's own policy)
MOVED = {"budget_epsilon": "[budget] epsilon", "budget_delta": "[budget] delta", "accountant": "[privacy] accountant"}


class PartyFile:
    """A validated party file (see the module docstring); paths are relative to the file's folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        try:
            with open(self.path, "rb") as fh:
                raw = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"Party file {str(path)!r} does not exist.") from None
        except IsADirectoryError:
            raise ConfigError(f"Party file {str(path)!r} is a folder; give its party.toml.") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{self.path} is not valid TOML: {exc}.") from None
        table = raw.get("party")
        if not isinstance(table, dict):
            raise ConfigError(f"{self.path}: a party file holds a [party] table (and [privacy], [budget], [limits]).")
        if set(raw) - SECTIONS:
            raise ConfigError(f"{self.path}: unknown table(s) {', '.join(map(repr, sorted(set(raw) - SECTIONS)))}. "
                              f"Allowed: {', '.join(sorted(SECTIONS))}.")
        moved = sorted(set(table) & set(MOVED))
        if moved:
            raise ConfigError(f"{self.path}: [party] {moved[0]} moved to {MOVED[moved[0]]} (a party's own policy is "
                              "in its [privacy] and [budget] tables; docs/federation.md).")
        unknown = sorted(set(table) - PARTY_KEYS)
        if unknown:
            raise ConfigError(f"{self.path}: unknown key(s) {', '.join(map(repr, unknown))} in [party]. "
                              f"Allowed: {', '.join(sorted(PARTY_KEYS))}.")
        owner = f"party file {self.path.name}"
        if not isinstance(table.get("name"), str) or not table["name"]:
            raise ConfigError(f"{self.path}: [party] needs a 'name'.")
        self.name = table["name"]
        if ("agents" in table) == ("module" in table):
            raise ConfigError(f"{self.path}: [party] needs exactly one of 'agents' (a file of this party's agents) "
                              "and 'module' (a Python file whose function returns them).")
        base = self.path.parent
        self.agents_file = base / table["agents"] if "agents" in table else None
        self.module = base / table["module"] if "module" in table else None
        self.function = str(table.get("function", "agents"))
        self.state = base / str(table.get("state", "state"))
        self.dataset = str(table.get("dataset", self.name))
        self.seed = None if table.get("seed") is None else check_int(table["seed"], "seed", owner, 0)
        for key in ("evaluate", "report_feasibility"):
            if not isinstance(table.get(key, key == "evaluate"), bool):
                raise ConfigError(f"{self.path}: [party] {key} must be true or false.")
        self.evaluate = table.get("evaluate", True)
        self.report_feasibility = table.get("report_feasibility", False)
        self.policy = PartyPolicy(raw.get("privacy"), raw.get("budget"), raw.get("limits"), str(self.path))

    @property
    def budget(self) -> tuple[float, float] | None:
        return self.policy.budget

    def load_agents(self) -> list[Agent]:
        """This party's agents, from its own file (each one checked)."""
        if self.agents_file is not None:
            try:
                with open(self.agents_file, "rb") as fh:  # the party's own file, never a peer's bytes
                    agents = pickle.load(fh)
            except FileNotFoundError:
                raise ConfigError(f"{self.path}: the agents file {str(self.agents_file)!r} does not exist.") from None
            except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
                raise ConfigError(f"{self.path}: the agents file {str(self.agents_file)!r} cannot be read "
                                  f"({type(exc).__name__}: {exc}); write it again with `cvxdp parties`.") from None
        else:
            spec = importlib.util.spec_from_file_location(f"cvxdp_party_{self.name}", self.module)
            if spec is None or spec.loader is None or not self.module.is_file():
                raise ConfigError(f"{self.path}: the module {str(self.module)!r} does not exist.")
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
                if not hasattr(module, self.function):
                    raise ConfigError(f"{self.path}: the module {str(self.module)!r} has no function "
                                      f"{self.function!r}.")
                agents = getattr(module, self.function)()
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - the party's own code: one line naming it
                raise ConfigError(f"{self.path}: {self.module.name}:{self.function}() failed: "
                                  f"{type(exc).__name__}: {exc}") from None
        agents = list(agents) if isinstance(agents, (list, tuple)) else [agents]
        for agent in agents:
            if not isinstance(agent, Agent) and not hasattr(agent, "n_features"):
                raise ConfigError(f"{self.path}: the party's agents must be cvxdp.Agent (or cvxdp.VerticalParty) "
                                  f"objects; got {type(agent).__name__}.")
            agent.check()
        if len({a.name for a in agents}) != len(agents):
            raise ConfigError(f"{self.path}: two of the party's agents share a name.")
        return agents

    def private_files(self) -> list[Path]:
        """The party's own files that others can read (its data and state should be its owner's only)."""
        out = []
        for path in (self.agents_file, self.module, self.path.parent):
            if path is not None and path.exists() and path.stat().st_mode & 0o077:
                out.append(path)
        return out


def _refuse(party: str, round: int | None, message: str, *, reason: str, field: str | None = None
            ) -> PartyRefusedError:
    when = "the run" if not round else f"round {round}"
    return PartyRefusedError(f"Party {party!r} refuses {when}: {message}", party=party, round=round, reason=reason,
                             field=field)


class Party:
    """A party (see the module docstring): :meth:`answer` takes a request's bytes and returns the reply's.

    Parameters
    ----------
    path : path
        The party file.
    lock : bool
        Hold the state folder's lock (one process per party); an in-process test may keep several objects.
    """

    def __init__(self, path: str | Path, *, lock: bool = True) -> None:
        self.file = PartyFile(path)
        self.name = self.file.name
        self.policy = self.file.policy
        self.agents = {a.name: a for a in self.file.load_agents()}
        os.umask(0o077)  # everything the party writes: its owner's only
        self.state = self.file.state
        self.state.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state, 0o700)
        self.lock = OutputLock(self.state, "party state folder").acquire() if lock else None
        self.ledger = LifetimeLedger(self.state, self.file.dataset, list(self.agents), self.policy.budget,
                                     self.policy.accountant)
        self.runs: dict[str, Run] = {}
        #: one line per request (``cvxdp party`` prints them); None: silent
        self.log: Callable[[str], None] | None = None
        self._done = "answered"  # what the request being answered did (the log line's end)

    def close(self) -> None:
        """Release the state folder's lock."""
        if self.lock is not None:
            self.lock.release()

    # ---------------------------------------------------------------- the protocol
    def answer(self, data: bytes) -> bytes:
        """The reply to one request's bytes: its value, a refusal (one line naming the party, the round and the
        field) or a failure. Never raises for what a peer sent."""
        round, kind = None, "request"
        try:
            kind, body = messages.read_request(data, max_bytes=self.policy.limits.message_bytes)
            round = body.get("round")
            self._done = "answered"
            value = self.handle(kind, body)
            what = f"{kind} round {round}" if round is not None else kind
            self._say(f"{what}{' of run ' + body['token'] if 'token' in body else ''}: {self._done}")
            return messages.reply(value)
        except PartyRefusedError as exc:
            refused = exc
        except SchemaError as exc:
            round = round if round is not None else _round_of(data)
            refused = _refuse(self.name, round, f"its request does not fit the protocol: {exc}.", reason="message",
                              field=exc.field or None)
        except WireError as exc:
            refused = _refuse(self.name, round, f"unreadable request: {exc}.", reason="message")
        except Exception as exc:  # noqa: BLE001 - reported to the coordinator, which names the party and the round
            self._say(f"{kind}: failed: {type(exc).__name__}: {exc}")
            return messages.failure(f"{type(exc).__name__}: {exc}")
        self._say(f"{kind}: refused: {refused}")
        return messages.refusal(refused)

    def _say(self, line: str) -> None:
        if self.log is not None:
            self.log(f"party {self.name!r}: {line}")

    def handle(self, kind: str, body: dict[str, Any]) -> Any:
        """The value answering one request (``body`` already checked against its schema)."""
        return {"hello": self._hello, "start": self._start, "step": self._step, "finish": self._finish,
                "release": self._release}[kind](body)

    def _hello(self, body: dict[str, Any]) -> dict[str, Any]:
        """The party's public introduction: its name, its agents' declarations, its policy and its budget."""
        return {"party": self.name, "protocol": messages.PROTOCOL,
                "declarations": [a.declaration().to_dict() for a in self.agents.values()],
                "policy": self.policy.describe(),
                "budget": None if self.policy.budget is None else list(self.policy.budget)}

    # ---------------------------------------------------------------- start
    def _start(self, body: dict[str, Any]) -> dict[str, Any]:
        token = body["token"]
        run = self.runs.get(token) or self._load(token)
        if run is not None:
            if digest(encode(run.start)) != digest(encode(body)):
                raise _refuse(self.name, 0, f"run {token} was started with other parameters; a run keeps its own.",
                              reason="replay", field="token")
            self._take(run, None)
            return {"party": self.name, "round": run.latest, "owner": run.owner, "declare": run.declared}
        missing = sorted(set(body["agents"]) - set(self.agents))
        if missing:
            raise _refuse(self.name, 0, f"it holds no agent {missing[0]!r}.", reason="policy", field="agents")
        for name in body["agents"]:
            if self.ledger.exhausted(name):
                raise _refuse(self.name, 0, f"agent {name!r} has spent its whole lifetime budget "
                              f"{self.policy.budget} on data set {self.file.dataset!r}.", reason="budget")
        algorithm = self.policy.accept(body["algorithm"], body["privacy"], body["accountant"], party=self.name)
        if self.file.seed is not None:
            for info in body["agents"].values():
                used = self.ledger.stream_owner(self.file.seed, info["index"])
                if used is not None and used != token:
                    raise _refuse(self.name, 0, f"its research seed's noise stream (seed {self.file.seed}, index "
                                  f"{info['index']}) served run {used} already; a second run would draw the same "
                                  "noise. Change the seed in the party file.", reason="policy", field="agents.index")
        folder = self.state / f"run-{token}"
        nodes = {name: self._node(algorithm, name, info, body, self._seed(info["index"]))
                 for name, info in body["agents"].items()}
        declared = {name: messages.declaration_to_wire(node.declare()) for name, node in nodes.items()}
        if self.file.seed is not None:
            for name, info in body["agents"].items():
                self.ledger.use_stream(token, name, self.file.seed, info["index"])
        run = Run(RunFolder.create(folder, body, declared), body, declared, nodes, algorithm, 0)
        run.save_state()
        self.runs[token] = run
        self._take(run, None)
        return {"party": self.name, "round": 0, "owner": run.owner, "declare": declared}

    def _take(self, run: Run, owner: str | None) -> None:
        """Hand run ``run`` to a new coordinator (``owner`` None: a start), unless another holds it."""
        now = time.monotonic()
        if run.owner is not None and now - run.seen < self.policy.limits.lock_timeout:
            raise _refuse(self.name, 0, f"run {run.token} is held by another coordinator (last heard "
                          f"{now - run.seen:.0f} s ago); it is free when that one finishes or gives it up, or after "
                          f"{self.policy.limits.lock_timeout:g} s of silence.", reason="owner", field="token")
        run.owner, run.seen = secrets.token_hex(16), now

    def _held(self, body: dict[str, Any]) -> Run:
        """The run of a request, if the request's owner holds it."""
        run = self.runs.get(body["token"]) or self._load(body["token"])
        if run is None:
            raise _refuse(self.name, body.get("round"), f"it has no run {body['token']} (start it first).",
                          reason="order", field="token")
        if run.owner is None or not secrets.compare_digest(run.owner, body["owner"]):
            raise _refuse(self.name, body.get("round"), f"run {run.token} is not held by this coordinator (start "
                          "it again to hold it).", reason="owner", field="owner")
        run.seen = time.monotonic()
        return run

    def _node(self, algorithm: Any, name: str, info: Mapping[str, Any], body: Mapping[str, Any],
              seed: np.random.SeedSequence) -> Node:
        """Agent ``name``'s node, built here from the checked algorithm, the party's own mechanism and accountant,
        and the run's public values (:func:`cvxdp.federation.messages.build_node`)."""
        try:
            return messages.build_node(algorithm, self.agents[name], info, body, seed,
                                       self.policy.mechanism_for(name, party=self.name), self.policy.accountant)
        except SchemaError:
            raise
        except CvxdpError as exc:
            raise _refuse(self.name, 0, f"agent {name!r} cannot run the coordinator's {algorithm.name}: {exc}",
                          reason="policy", field=f"agents.{name}") from None

    # ---------------------------------------------------------------- one round
    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        run, t = self._held(body), body["round"]
        raw = body["messages"]
        if set(raw) != set(run.nodes):
            raise _refuse(self.name, t, f"the round's messages are for {sorted(raw)}; its nodes in run {run.token} "
                          f"are {sorted(run.nodes)}.", reason="message", field="messages")
        requests = {name: digest(encode(value)) for name, value in raw.items()}
        recorded = self._order(run, t, requests)
        if recorded is not None:
            self._done = "answered again from its record (nothing drawn, nothing charged)"
            return recorded
        rounds = int(getattr(run.algorithm, "rounds", None) or getattr(run.algorithm, "epochs", 0))
        if t > rounds:
            raise _refuse(self.name, t, f"run {run.token} has {rounds} rounds.", reason="limits", field="round")
        msgs = {name: messages.from_wire(run.nodes[name], value, f"messages.{name}") for name, value in raw.items()}
        for name, msg in msgs.items():
            self._check_limits(name, msg, t, exact=bool(getattr(run.algorithm, "exact", False)))
        charges = {name: run.nodes[name].charge(msg) for name, msg in msgs.items()}
        for name, charge in charges.items():
            if charge is not None and self.ledger.would_exceed(name, charge):
                raise _refuse(self.name, t, f"agent {name!r} would pass its lifetime budget {self.policy.budget} on "
                              f"data set {self.file.dataset!r} under {self.policy.accountant}.", reason="budget")
        releases = {name: messages.release_to_wire(run.nodes[name].step(msg)) for name, msg in msgs.items()}
        self.ledger.charge(run.token, t, {n: c for n, c in charges.items() if c is not None}, requests)
        run.record(t, requests, releases)
        if self.file.evaluate:
            run.evaluate(t)
        self._done = f"released ({', '.join(releases)})"
        return releases

    def _order(self, run: Run, t: int, requests: Mapping[str, str]) -> dict[str, Any] | None:
        """None for the run's next round; for a released round asked again with the same request (a coordinator
        resuming), the recorded release (no new draw, no new charge). Anything else is refused: a released round asked
        with another request, a round that skips ahead."""
        if t <= run.latest:
            recorded = run.disk.recorded(t)
            if recorded is not None and recorded["requests"] == dict(requests):
                return recorded["releases"]
            raise _refuse(self.name, t, f"round {t} of run {run.token} was released already, for "
                          f"{'another request' if recorded is not None else 'a request it no longer holds'}; a "
                          "released round is never computed again.", reason="replay", field="round")
        if t != run.latest + 1:
            raise _refuse(self.name, t, f"the next round of run {run.token} is {run.latest + 1}.", reason="order",
                          field="round")
        return None

    def _check_limits(self, name: str, msg: Any, t: int, *, exact: bool) -> None:
        """The round's penalties inside the party's limits (exact ADMM has no eta: it sends 0)."""
        limits = self.policy.limits
        eta = getattr(msg, "eta", None)
        if eta is not None and not exact:
            limits.check_weight("eta", float(eta), party=self.name, round=t, field=f"messages.{name}.eta")
        rho = getattr(msg, "rho", None)
        if rho is not None:
            for value in (float(np.min(rho)), float(np.max(rho))):
                limits.check_weight("rho", value, party=self.name, round=t, field=f"messages.{name}.rho")

    # ---------------------------------------------------------------- the end
    def _finish(self, body: dict[str, Any]) -> dict[str, Any]:
        """Write the party's own final outputs (its local solutions, this run's ledger) and give the run up; release
        the feasibility bits only when its party file allows it."""
        run = self._held(body)
        mine = self.ledger.run_ledger(run.token, list(run.nodes), float(run.start["target_delta"]))
        out: dict[str, Any] = {"party": self.name}
        if self.file.report_feasibility:
            note = FEASIBILITY_NOTE.format(party=self.name)
            mine.note(note, voids=True, warn=False)
            if not any(r.get("kind") == "note" and r.get("run") == run.token for r in self.ledger.records):
                self.ledger.note(run.token, note)
            distances = solution_violation([self.agents[n] for n in run.nodes], body["solution"], warn=False)
            out["feasible"] = {n: bool(d <= 1e-6) for n, d in distances["per_agent"].items()}
        summary = mine.summary()
        atomic_write(run.disk.folder / "ledger.json",
                     lambda fh: fh.write(json.dumps({"run": summary, "lifetime": self.ledger.summary()}, indent=2,
                                                    default=float).encode()), "party ledger")
        np.savez(run.disk.folder / "local.npz", **{name: node.local() for name, node in run.nodes.items()})
        out["ledger"] = summary["worst"]
        run.owner = None
        return out

    def _release(self, body: dict[str, Any]) -> dict[str, Any]:
        """A coordinator gives its run up (it failed): the run is free for the next one."""
        run = self._held(body)
        run.owner = None
        return {"party": self.name, "round": run.latest}

    # ---------------------------------------------------------------- the party's own disk
    def _seed(self, index: int) -> np.random.SeedSequence:
        """A research seed reproduces a simulation's stream of the same agent; otherwise fresh OS entropy."""
        if self.file.seed is None:
            return np.random.SeedSequence()
        return np.random.SeedSequence(self.file.seed, spawn_key=(int(index),))

    def _load(self, token: str) -> Run | None:
        """Run ``token`` from the party's disk (a party started again), or None."""
        disk = RunFolder.open(self.state / f"run-{token}")
        if disk is None:
            return None
        saved, state = disk.saved()
        start = saved["start"]
        algorithm = self.policy.accept(start["algorithm"], start["privacy"], start["accountant"], party=self.name)
        nodes = {}
        for name, info in start["agents"].items():
            node = self._node(algorithm, name, info, start, np.random.SeedSequence(0))  # its generator is restored
            node.restore(state["nodes"][name])
            nodes[name] = node
        run = Run(disk, start, saved["declare"], nodes, algorithm, int(state["round"]))
        disk.reopen(run.latest)
        self.runs[token] = run
        return run

    def ledger_report(self) -> dict[str, Any]:
        """The lifetime ledger's summary (``cvxdp party PARTY.toml --ledger``)."""
        return self.ledger.summary()


def _round_of(data: bytes) -> int | None:
    """The round a request names, if it names one (for the refusal of a request that does not fit its schema)."""
    try:
        body = decode(data).get("body")
        value = body.get("round") if isinstance(body, dict) else None
    except (WireError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10 ** 9 else None


__all__ = ["FEASIBILITY_NOTE", "PARTY_KEYS", "Party", "PartyFile"]
