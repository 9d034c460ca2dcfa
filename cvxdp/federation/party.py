"""What runs at a party in a federation: its party file, its agents, its own nodes, ledger, checkpoint and outputs.

A party declares itself alone, in a party file (TOML)::

    [party]
    name = "zone1"
    agents = "agents.pkl"         # this party's agents, and nobody else's (`cvxdp parties` writes it), or:
    # module = "my_party.py"      # a Python file next to this one whose function returns this party's agents
    # function = "agents"
    state = "state"               # its own directory: one folder per run (state/run-<token>) with that run's
                                  # checkpoints, ledger, evaluation and final outputs
    # seed = 0                    # research only: reproducible noise (default: fresh entropy from the OS)
    # budget_epsilon = 1.0        # its own privacy budget: it refuses a round that would take it past it
    # budget_delta = 1e-5
    # accountant = "pld"          # how it composes its own ledger against that budget
    evaluate = true               # write its own evaluation (objective on its data) to state/evaluation.csv
    report_feasibility = false    # at the end, release one bit per agent: is the public solution in its set?

:class:`Party` handles one message and returns the reply; it is built afresh for every message (a Flower ClientApp
runs each message in a new process), so everything it keeps lives in the run's folder of the party's state directory: the node specs
of the run, each round's node states (iterates, duals, generator states) and its ledger. Nothing the coordinator
receives is computed on private data except the releases its nodes make (and, only when the party file allows it,
the feasibility bits); its noise entropy never leaves it.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, CvxdpError, PartyRefusedError, check_choice, check_float, check_int
from ..model import Agent, Node, solution_violation
from ..privacy import ACCOUNTANTS, PrivacyLedger
from ..run.storage import atomic_write

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the note a party's feasibility bits add to its own ledger and to the coordinator's result
FEASIBILITY_NOTE = ("party {party!r} released whether the public solution lies in each of its agents' feasible sets "
                    "(report_feasibility = true): one bit per agent computed on its private data, not accounted")

PARTY_KEYS = {"name", "agents", "module", "function", "state", "seed", "budget_epsilon", "budget_delta", "accountant",
              "evaluate", "report_feasibility"}


class PartyFile:
    """A validated party file (see the module docstring); paths are relative to the file's folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        try:
            with open(self.path, "rb") as fh:
                raw = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"Party file {str(path)!r} does not exist.") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{self.path} is not valid TOML: {exc}.") from None
        table = raw.get("party")
        if not isinstance(table, dict) or set(raw) - {"party"}:
            raise ConfigError(f"{self.path}: a party file holds one [party] table.")
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
        self.seed = None if table.get("seed") is None else check_int(table["seed"], "seed", owner, 0)
        budget = table.get("budget_epsilon")
        self.budget = None if budget is None else (
            check_float(budget, "budget_epsilon", owner, 0.0, math.inf),
            check_float(table.get("budget_delta", 0.0), "budget_delta", owner, 0.0, 1.0, closed="left"))
        self.accountant = check_choice(table.get("accountant", "pld"), "accountant", owner, ACCOUNTANTS)
        for key in ("evaluate", "report_feasibility"):
            if not isinstance(table.get(key, key == "evaluate"), bool):
                raise ConfigError(f"{self.path}: [party] {key} must be true or false.")
        self.evaluate = table.get("evaluate", True)
        self.report_feasibility = table.get("report_feasibility", False)

    def load_agents(self) -> list[Agent]:
        """This party's agents, from its own file (each one checked)."""
        if self.agents_file is not None:
            try:
                with open(self.agents_file, "rb") as fh:  # the party's own file: trusted
                    agents = pickle.load(fh)
            except FileNotFoundError:
                raise ConfigError(f"{self.path}: the agents file {str(self.agents_file)!r} does not exist.") from None
        else:
            spec = importlib.util.spec_from_file_location(f"cvxdp_party_{self.name}", self.module)
            if spec is None or spec.loader is None or not self.module.is_file():
                raise ConfigError(f"{self.path}: the module {str(self.module)!r} does not exist.")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            agents = getattr(module, self.function)()
        agents = list(agents) if isinstance(agents, (list, tuple)) else [agents]
        for agent in agents:
            if not isinstance(agent, Agent):
                raise ConfigError(f"{self.path}: the party's agents must be cvxdp.Agent objects; got "
                                  f"{type(agent).__name__}.")
            agent.check()
        return agents


class Party:
    """One party for one message: :meth:`handle` answers the coordinator (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.file = PartyFile(path)
        self.agents = {a.name: a for a in self.file.load_agents()}
        self.state = self.file.state  # this run's folder inside it: set from each request's token

    def _enter(self, payload: dict[str, Any]) -> None:
        """Work in the folder of the request's run (``state/run-<token>``): a party keeps one folder per run, so
        it can take part in several runs and resume each."""
        token = payload.get("token")
        if not isinstance(token, str) or not re.fullmatch(r"[0-9a-f]{16}", token):
            raise CvxdpError(f"Party {self.file.name!r}: the request names no valid run (got token {token!r}).")
        self.state = self.file.state / f"run-{token}"
        self.state.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- the protocol
    def handle(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Answer one message: ``hello``, ``start``, ``step`` (which may first roll back to the round a resumed run
        restarts from) or ``finish``."""
        handler = {"hello": self._hello, "start": self._start, "step": self._step, "finish": self._finish}.get(kind)
        if handler is None:
            raise CvxdpError(f"Party {self.file.name!r}: unknown request {kind!r}.")
        if kind != "hello":
            self._enter(payload)
        return handler(payload)

    def _hello(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The party's public declaration: its name, its agents' declarations and its own budget."""
        return {"party": self.file.name, "declarations": [a.declaration().to_dict() for a in self.agents.values()],
                "budget": None if self.file.budget is None else list(self.file.budget)}

    def _start(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Build this party's nodes from the run's public specs, its own agents and its own entropy; a run that
        resumes keeps the state it has."""
        run = {"token": payload["token"], "specs": payload["specs"], "indices": payload["indices"]}
        missing = sorted(set(run["specs"]) - set(self.agents))
        if missing:
            raise CvxdpError(f"Party {self.file.name!r} holds no agent {missing[0]!r}.")
        saved = self._load("run.pkl")
        if payload.get("resume") and saved is not None and saved["token"] == run["token"]:
            return {"party": self.file.name, "round": self._latest(), "declare": self._declare({})}
        for old in self.state.glob("round_*.pkl"):
            old.unlink()
        self._save("run.pkl", run)
        nodes = {name: spec.make(self.agents[name], self._seed(run["indices"][name]))
                 for name, spec in run["specs"].items()}
        # its ledger reports at the run's (public) target delta; its own budget is checked at its own delta
        target = payload.get("target_delta") or (self.file.budget[1] if self.file.budget else 1e-6)
        ledger = PrivacyLedger(list(nodes), target_delta=target)
        self._save_round(0, nodes, ledger)
        return {"party": self.file.name, "round": 0, "declare": {n: node.declare() for n, node in nodes.items()}}

    def _declare(self, payload: dict[str, Any]) -> dict[str, Any]:
        nodes, _ = self._nodes()
        return {name: node.declare() for name, node in nodes.items()}

    def _step(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One round: check every charge against the party's own budget first, then step every node."""
        t, messages = payload["round"], payload["messages"]
        if payload.get("restore") is not None:  # the run resumes from the coordinator's checkpoint of that round
            self._restore({"round": payload["restore"]})
        if payload.get("committed") is not None:  # older rounds are no longer needed to resume
            self._prune(below=payload["committed"])
        nodes, ledger = self._nodes()
        charges = {name: nodes[name].charge(msg) for name, msg in messages.items()}
        budget = self.file.budget
        for name, charge in charges.items():
            if charge is not None and budget is not None and charge[1][0] > 0 and ledger.would_exceed(
                    name, charge[0], charge[2], budget, self.file.accountant, claim=charge[1]):
                raise PartyRefusedError(
                    f"Party {self.file.name!r} refuses round {t}: agent {name!r} would pass the party's own budget "
                    f"(epsilon {budget[0]:g}, delta {budget[1]:g}) under {self.file.accountant}.",
                    party=self.file.name, round=t, reason="budget")
        releases = {name: nodes[name].step(msg) for name, msg in messages.items()}
        for name, charge in charges.items():
            if charge is not None:
                ledger.record(name, charge[0], charge[2], claim=charge[1])
        self._save_round(t, nodes, ledger)
        if self.file.evaluate:
            self._evaluation(t, nodes)
        return releases

    def _prune(self, *, below: int) -> None:
        """The coordinator checkpointed round ``below``: states of older rounds are no longer needed."""
        for path in self.state.glob("round_*.pkl"):
            if int(path.stem.split("_")[1]) < below:
                path.unlink()

    def _restore(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Resume from round ``t`` (the coordinator's checkpoint): later rounds' states are dropped."""
        t = payload["round"]
        if not (self.state / f"round_{t}.pkl").is_file():
            raise CvxdpError(f"Party {self.file.name!r} has no checkpoint of round {t} in {str(self.state)!r}.")
        for path in self.state.glob("round_*.pkl"):
            if int(path.stem.split("_")[1]) > t:
                path.unlink()
        return {"round": t}

    def _finish(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Write the party's own final outputs (its local solutions, its ledger); release the feasibility bits
        only when its party file allows it."""
        if payload.get("restore") is not None:
            self._restore({"round": payload["restore"]})
        nodes, ledger = self._nodes()
        if self.file.report_feasibility:
            ledger.note(FEASIBILITY_NOTE.format(party=self.file.name), voids=True, warn=False)
        summary = ledger.summary()
        (self.state / "ledger.json").write_text(json.dumps(summary, indent=2, default=float))
        np.savez(self.state / "local.npz", **{name: node.local() for name, node in nodes.items()})
        out: dict[str, Any] = {"party": self.file.name, "ledger": summary["worst"]}
        if self.file.report_feasibility:
            distances = solution_violation(list(self.agents.values()), payload["solution"], warn=False)
            out["feasible"] = {n: bool(d <= 1e-6) for n, d in distances["per_agent"].items()}
        return out

    # ---------------------------------------------------------------- the party's own state
    def _seed(self, index: int) -> np.random.SeedSequence:
        """A research seed reproduces a simulation's stream of the same agent; otherwise fresh OS entropy."""
        if self.file.seed is None:
            return np.random.SeedSequence()
        return np.random.SeedSequence(self.file.seed, spawn_key=(int(index),))

    def _latest(self) -> int:
        rounds = [int(p.stem.split("_")[1]) for p in self.state.glob("round_*.pkl")]
        if not rounds:
            raise CvxdpError(f"Party {self.file.name!r} has no state in {str(self.state)!r}: was the run started?")
        return max(rounds)

    def _nodes(self) -> tuple[dict[str, Node], PrivacyLedger]:
        run = self._load("run.pkl")
        if run is None:
            raise CvxdpError(f"Party {self.file.name!r}: no run was started in {str(self.state)!r}.")
        saved = self._load(f"round_{self._latest()}.pkl")
        nodes = {}
        for name, spec in run["specs"].items():
            node = spec.make(self.agents[name], np.random.SeedSequence(0))  # the generator's state is restored
            node.restore(saved["nodes"][name])
            nodes[name] = node
        return nodes, PrivacyLedger.from_dict(saved["ledger"])

    def _save_round(self, t: int, nodes: dict[str, Node], ledger: PrivacyLedger) -> None:
        self._save(f"round_{t}.pkl", {"nodes": {n: node.state() for n, node in nodes.items()},
                                      "ledger": ledger.to_dict()})

    def _save(self, name: str, obj: Any) -> None:
        atomic_write(self.state / name, lambda fh: pickle.dump(obj, fh, protocol=5), "party state")

    def _load(self, name: str) -> Any:
        path = self.state / name
        if not path.is_file():
            return None
        with open(path, "rb") as fh:  # the party's own file
            return pickle.load(fh)

    def _evaluation(self, t: int, nodes: dict[str, Node]) -> None:
        """The party's own evaluation on its own data, written to its own directory (never sent)."""
        path = self.state / "evaluation.csv"
        rows = [{"round": t, "agent": name, **{k: v for k, v in node.evaluate(t).values.items()}}
                for name, node in nodes.items()]
        fields = sorted({k for r in rows for k in r} - {"round", "agent"})
        new = not path.exists()
        with open(path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["round", "agent", *fields], extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)


__all__ = ["PARTY_KEYS", "Party", "PartyFile"]
