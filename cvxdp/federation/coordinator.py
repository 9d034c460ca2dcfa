"""The coordinator of a federation: the same round loop as serial and Ray, over parties it reaches by messages.

The coordinator holds the run's public configuration, the parties' public declarations and what they release.
:func:`run_federation` asks every party to introduce itself (``hello``: its name, its agents' declarations, its own
policy and budget), builds the algorithm family from the declarations alone, and runs :func:`cvxdp.run.run_loop` with a
:class:`FederationBackend`: a backend that sends each round's messages to the parties through a :class:`Channel`
(Flower's Deployment Runtime in production, :class:`LocalChannel` in tests) and returns their releases. It never asks
a party for a value computed on private data (no evaluation, no local solution): the :class:`~cvxdp.Result` it writes
holds released values and their post-processing only.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config.build import make_algorithm, make_privacy
from ..errors import BackendError, CvxdpError
from ..families import ERMConstants, family_class, own_algorithm_table
from ..model import Declaration
from ..run import Backend, NodeSpec, Result, method_name, run_loop
from . import messages
from .party import FEASIBILITY_NOTE, Party, PartyFile  # Party, PartyFile: only for the in-process channel
from .wire import SchemaError


class Channel(abc.ABC):
    """How the coordinator reaches the parties: one request per party, one reply per party."""

    @abc.abstractmethod
    def send(self, requests: Mapping[str, tuple[str, dict[str, Any]]], *, round: int | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        """Send ``{party: (kind, body)}``; return ``{party: value}``. A party's refusal raises
        :class:`~cvxdp.errors.PartyRefusedError`; a party that drops, does not answer within ``timeout`` seconds
        (default: the channel's) or answers garbage raises :class:`~cvxdp.errors.BackendError` naming it and the
        round."""

    def parties(self) -> list[str]:
        """The parties this channel reaches (after their ``hello``)."""
        return []


class LocalChannel(Channel):
    """Parties in this process, each a long-lived :class:`~cvxdp.federation.party.Party` (as ``cvxdp party`` runs
    one), reached through the same bytes as a real wire (for tests and benchmarks). :meth:`restart` drops a party's
    object, as a killed and restarted party process would lose it."""

    def __init__(self, party_files: Sequence[str | Path]) -> None:
        self._files = {PartyFile(f).name: Path(f) for f in party_files}
        self._parties: dict[str, Party] = {}

    def parties(self) -> list[str]:
        return list(self._files)

    def party(self, name: str) -> Party:
        """Party ``name``'s object (built on first use, from its own folder; a party that cannot start is a
        :class:`~cvxdp.errors.BackendError` naming it, as a party process that fails its checks is)."""
        if name not in self._parties:
            try:
                self._parties[name] = Party(self._files[name], lock=False)
            except CvxdpError as exc:
                raise BackendError(f"Party {name!r} cannot start: {exc}", agents=(name,)) from None
        return self._parties[name]

    def restart(self, name: str) -> None:
        """Forget party ``name``'s object: its next request finds only what it left on its disk."""
        self._parties.pop(name, None)

    def raw(self, party: str, data: bytes) -> bytes:
        """The reply bytes of party ``party`` to the request bytes ``data`` (what crosses a real wire)."""
        return self.party(party).answer(data)

    def send(self, requests: Mapping[str, tuple[str, dict[str, Any]]], *, round: int | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        return {party: messages.read_reply(party, self.raw(party, messages.request(kind, body)), round)
                for party, (kind, body) in requests.items()}


#: how long a failed coordinator waits for the parties to take back their runs (a party it cannot reach frees the
#: run after its own lock timeout)
GIVE_UP_SECONDS = 10.0
#: the arrays each family's node releases, by the node's class name: name -> shape from its declaration
RELEASED = {"ConsensusNode": lambda d: {"ez": np.shape(d["shared"]), "polished": (1,)},
            "GraphNode": lambda d: {"f": np.shape(d["initial"])},
            "SharingNode": lambda d: {"q": (int(d["samples"]),)}}


class FederationBackend(Backend):
    """A backend whose nodes live at the parties: it groups each call's per-agent arguments by party.

    Parameters
    ----------
    channel : Channel
    owners : mapping
        Agent -> the party that holds it.
    token : str
        The run's identity (a digest of its public configuration and declarations).
    run : mapping
        What every party's ``start`` carries besides the nodes: the algorithm's table, the coordinator's [privacy]
        table and accountant, the solvers and the target delta (:data:`cvxdp.federation.messages.REQUESTS`).
    """

    def __init__(self, channel: Channel, owners: Mapping[str, str], token: str, run: Mapping[str, Any]) -> None:
        self.channel, self.owners, self.token, self.run = channel, dict(owners), token, dict(run)
        self.names: list[str] = []
        self.round = 0
        self.holds: dict[str, str] = {}  # party -> the owner nonce its start handed out

    def _by_party(self, names: Sequence[str]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for name in names:
            grouped.setdefault(self.owners[name], []).append(name)
        return grouped

    def start(self, specs: Sequence[NodeSpec], agents: Sequence[Any] | None, seeds: Sequence[Any] | None) -> None:
        if agents is not None or seeds is not None:
            raise BackendError("A federation's parties build their nodes from their own agents and entropy.")
        self.names = [s.name for s in specs]
        index = {s.name: i for i, s in enumerate(specs)}
        by_name = {s.name: s for s in specs}
        requests = {party: ("start", {**self.run, "token": self.token, "names": self.names,
                                      "agents": {n: {"index": index[n], **by_name[n].public} for n in names}})
                    for party, names in self._by_party(self.names).items()}
        replies = self.channel.send(requests, round=0)  # each party answers with its nodes' declarations
        self.holds = {p: r["owner"] for p, r in replies.items()}
        self.declared = {n: messages.declaration_from_wire(replies[p]["declare"][n])
                         for p, names in self._by_party(self.names).items() for n in names}
        self.shapes = {n: RELEASED[by_name[n].build.__name__](self.declared[n]) for n in self.names}

    def call(self, method: Callable[..., Any], args: Sequence[tuple] | None = None, *,
             round: int | None = None) -> list[Any]:
        name = method_name(method)
        if name == "declare":
            return [self.declared[n] for n in self.names]
        if name == "step":
            self.round = round
            msgs = dict(zip(self.names, (a[0] for a in args)))
            replies = self.channel.send({p: ("step", {"token": self.token, "owner": self.holds[p], "round": round,
                                                      "messages": {n: messages.to_wire(msgs[n]) for n in names}})
                                         for p, names in self._by_party(self.names).items()}, round=round)
            return [self._release(replies, n, round) for n in self.names]
        if name == "state":  # a checkpoint of round t: each party keeps its own rounds on its own disk
            return [{"round": self.round} for _ in self.names]
        if name == "restore":  # the parties answer the rounds after it again from their records
            self.round = args[0][0]["round"]
            return [None] * len(self.names)
        raise BackendError(f"A federation does not hand over {name!r}: its parties keep what they compute on their "
                           "private data.", method=name, round=round)

    def _release(self, replies: Mapping[str, Any], agent: str, round: int) -> Any:
        party = self.owners[agent]
        value = replies[party]
        try:
            if not isinstance(value, dict) or agent not in value:
                raise SchemaError(agent, "missing from the party's reply")
            return messages.release_from_wire(agent, value[agent], round, self.shapes[agent])
        except CvxdpError as exc:
            raise BackendError(f"Party {party!r} answered round {round} with an invalid release: {exc}.",
                               agents=(party,), round=round) from None

    def give_up(self) -> None:
        """Tell every party this coordinator gives the run up (after a failure), so that the next one may hold it;
        a party that cannot be reached lets it lapse after its lock timeout."""
        with contextlib.suppress(CvxdpError, OSError):
            self.channel.send({p: ("release", {"token": self.token, "owner": o}) for p, o in self.holds.items()},
                              timeout=GIVE_UP_SECONDS)


def declarations(hello: Mapping[str, Mapping[str, Any]], order: Sequence[str] | None
                 ) -> tuple[list[Declaration], dict[str, str], dict[str, Any]]:
    """The agents' declarations in the run's order, which party owns each, and each party's declared budget."""
    decls, owners = [], {}
    for party, reply in hello.items():
        if reply["party"] != party:
            raise BackendError(f"A node registered as {party!r} introduced itself as {reply['party']!r}.",
                               agents=(party,))
        for d in reply["declarations"]:
            decl = Declaration.from_dict(d, {"ERMConstants": lambda x: ERMConstants(**x)})
            if decl.name in owners:
                raise CvxdpError(f"Agent {decl.name!r} is declared by two parties ({owners[decl.name]!r} and "
                                 f"{party!r}).")
            owners[decl.name] = party
            decls.append(decl)
    if order:
        missing = [n for n in order if n not in owners]
        unknown = [n for n in owners if n not in order]
        if missing or unknown:
            raise CvxdpError("The parties' agents are not the run's: " + "; ".join(
                ([f"missing {', '.join(map(repr, missing))}"] if missing else [])
                + ([f"unknown {', '.join(map(repr, unknown))}"] if unknown else [])) + ".")
        position = {n: i for i, n in enumerate(order)}
        decls.sort(key=lambda d: position[d.name])
    return decls, owners, {p: r.get("budget") for p, r in hello.items()}


def run_federation(plan: Mapping[str, Any], channel: Channel, *, progress: bool = False) -> Result:
    """Run the case of ``plan`` over the parties of ``channel`` and return the coordinator's public Result.

    ``plan``: ``{"algorithm": table, "privacy": table, "run": table, "agents": [names in the run's order] or None,
    "checkpoint": directory or None, "name": the case's name}`` (what :func:`cvxdp.federation.parties.write_plan` writes).
    """
    parties = channel.parties()
    hello = channel.send({p: ("hello", {}) for p in parties})
    decls, owners, budgets = declarations(hello, plan.get("agents"))
    run = dict(plan.get("run") or {})
    algorithm, privacy = make_algorithm(plan["algorithm"]), make_privacy(plan["privacy"])
    algorithm.validate()
    budget = None
    if run.get("budget_epsilon") is not None:
        budget = (run["budget_epsilon"], run.get("budget_delta", 0.0))
    cls = family_class(algorithm)
    family = cls(algorithm, decls, privacy=privacy, accountant=run.get("accountant", "pld"), budget=budget,
                 solvers=tuple(plan.get("solvers") or ("CLARABEL", "ECOS", "OSQP")),
                 target_delta=run.get("target_delta"))
    base = {"algorithm": algorithm.describe(), "privacy": privacy.describe() if privacy is not None else None,
            "accountant": run.get("accountant", "pld"), "budget": list(budget) if budget else None,
            "backend": "FederationBackend", "solvers": list(family.solvers), "agents": family.names,
            "parties": {p: sorted(n for n, o in owners.items() if o == p) for p in parties},
            "party_budgets": budgets}
    token = json.dumps({"algorithm": base["algorithm"], "privacy": base["privacy"], "run_id": plan.get("run_id", ""),
                        "declarations": [d.to_dict() for d in decls]}, sort_keys=True, default=str)
    backend = FederationBackend(channel, owners, hashlib.sha256(token.encode()).hexdigest()[:16], {
        "algorithm": own_algorithm_table(plan["algorithm"]), "privacy": dict(plan["privacy"] or {"mechanism": "none"}),
        "accountant": family.accountant, "solvers": list(family.solvers), "target_delta": float(family.target_delta)})
    try:
        result = run_loop(family, backend=backend, agents=None, root=np.random.SeedSequence(0), seed=run.get("seed"),
                          base_config=base, evaluate=False, progress=progress, checkpoint=plan.get("checkpoint"),
                          checkpoint_every=1)
        result.config["case"] = {"name": plan.get("name")}
        finals = channel.send({p: ("finish", {"token": backend.token, "owner": backend.holds[p],
                                              "solution": result.solution}) for p in parties})
    except BaseException:
        backend.give_up()
        raise
    result.config["party_reports"] = {p: {k: v for k, v in r.items() if k != "party"} for p, r in finals.items()}
    reporters = [p for p, r in finals.items() if "feasible" in r]
    if reporters and result.privacy:  # bits computed on private data: stated, and the guarantee no longer covers all
        result.privacy.setdefault("notes", []).extend(
            {"reason": FEASIBILITY_NOTE.format(party=p), "voids": True} for p in reporters)
        result.privacy["guarantee"] = False
    return result
