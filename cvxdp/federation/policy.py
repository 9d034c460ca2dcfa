"""A party's own privacy policy: what it releases, what it spends, and the public values it accepts.

A party file declares it in three tables, and nothing a coordinator sends can change it::

    [privacy]                  # what this party releases (the same keys as a case file's [privacy])
    mechanism = "ObjG"         # ObjL | ObjG | OutL | OutG | gamma | none (OutG also runs ADMM sharing)
    epsilon = 1.0
    delta = 1e-6
    # calibrate = "total"      # epsilon/delta per local update ("step") or over each run ("total")
    accountant = "pld"         # composes its ledger, and spreads a "total" over a run's steps
    # algorithms = ["ladmm"]   # the algorithms it takes part in (default: every one that runs the mechanism)

    [budget]                   # optional: its lifetime budget on this data set, across every run and token
    epsilon = 4.0
    delta = 1e-5

    [limits]                   # optional: bounds on what a coordinator may ask
    rounds = 10000             # rounds (epochs) of one run
    eta = [1e-6, 1e6]          # LinearizedADMM's and the graph family's penalty eta of any round
    rho = [1e-6, 1e6]
    message_bytes = 268435456  # a larger request is refused before it is read
    lock_timeout = 300.0       # seconds after which a silent coordinator's hold on a run lapses

The party computes its noise from its own declared sensitivity and this policy (each node calibrates its own plan,
:mod:`cvxdp.families`); a coordinator's start is accepted only if it names an algorithm the policy allows, with
parameters inside their declared constraints and these limits, and if its [privacy] table and accountant are the
policy's (:meth:`PartyPolicy.accept`). Any other request is refused with one line naming the party and the field.

What the party spends is recorded in its lifetime ledger, :class:`LifetimeLedger`: every release it ever made on its
data set, across every run and token, in one file per party, ``<state>/ledger.jsonl``, one JSON record per line,
only ever appended (and synced before the release it records leaves the party). Nothing a coordinator sends rolls
it back: a new run, a new token, a restart or a replayed round adds to it or finds its record there. Records:

* ``budget`` — the budget and accountant the party file set, whenever they change (the owner's history);
* ``charge`` — one release of one agent in one round of one run: its DP event, its per-call claim, its calls and
  the digest of the request it answered;
* ``stream`` — a node built from the party's research seed (seed, index): a second run asking for the same stream
  would draw the same noise again, so it is refused;
* ``note`` — a release the ledger cannot account for (the feasibility bits), which voids the guarantee.

:meth:`LifetimeLedger.would_exceed` composes an agent's charges on the current data set (its ``dataset`` name)
with a new one under the party's accountant and compares the total with its budget.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, CvxdpError, PartyRefusedError, check_choice, check_float, check_int
from ..families.catalog import ALGORITHMS, MECHANISMS, algorithm_from_table, mechanism_from_table
from ..privacy import ACCOUNTANTS, PrivacyLedger, event_from_dict, event_to_dict

if TYPE_CHECKING:
    from ..params import Algorithm

POLICY_KEYS = {"accountant", "algorithms"}
BUDGET_KEYS = {"epsilon", "delta"}
LIMIT_KEYS = {"rounds", "eta", "rho", "message_bytes", "lock_timeout"}


@dataclass(frozen=True)
class Limits:
    """Bounds on the public values a coordinator may send (see the module docstring)."""

    rounds: int = 100_000
    eta: tuple[float, float] = (0.0, math.inf)
    rho: tuple[float, float] = (0.0, math.inf)
    message_bytes: int = 1 << 28
    lock_timeout: float = 300.0

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> Limits:
        unknown = sorted(set(table) - LIMIT_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} in [limits]. Allowed: "
                              f"{', '.join(sorted(LIMIT_KEYS))}.")
        owner = f"[limits] of {where}"
        kw: dict[str, Any] = {}
        if "rounds" in table:
            kw["rounds"] = check_int(table["rounds"], "rounds", owner, 1)
        for key in ("eta", "rho"):
            if key in table:
                pair = table[key]
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ConfigError(f"{owner}: {key} must be [low, high]. Got {pair!r} instead.")
                lo = check_float(pair[0], f"{key}[0]", owner, 0.0, math.inf, closed="left")
                hi = check_float(pair[1], f"{key}[1]", owner, lo, math.inf, closed="right")
                kw[key] = (lo, hi)
        if "message_bytes" in table:
            kw["message_bytes"] = check_int(table["message_bytes"], "message_bytes", owner, 1024)
        if "lock_timeout" in table:
            kw["lock_timeout"] = check_float(table["lock_timeout"], "lock_timeout", owner, 0.0, math.inf)
        return cls(**kw)

    def check_rounds(self, rounds: int, *, party: str) -> None:
        """Refuse a run of more rounds than the party's limit."""
        if rounds > self.rounds:
            raise PartyRefusedError(f"Party {party!r} refuses the run: the coordinator asks for {rounds} rounds; its "
                                    f"limit is {self.rounds}.", party=party, round=0, reason="limits",
                                    field="algorithm.rounds")

    def check_weight(self, name: str, value: float, *, party: str, round: int, field: str) -> None:
        """Refuse a round whose eta or rho lies outside the party's bounds."""
        lo, hi = getattr(self, name)
        if not lo < value <= hi:
            raise PartyRefusedError(f"Party {party!r} refuses round {round}: {name} = {value:g} lies outside its "
                                    f"limits ({lo:g}, {hi:g}] (field {field!r}).", party=party, round=round,
                                    reason="limits", field=field)


class PartyPolicy:
    """A party's own policy (see the module docstring), validated from its party file's tables.

    Attributes
    ----------
    privacy : dict
        The [privacy] table's mechanism keys (``mechanism`` and that mechanism's own parameters).
    accountant : str
    algorithms : tuple of str or None
    budget : (float, float) or None
        The lifetime budget on this party's data set.
    limits : Limits
    """

    def __init__(self, privacy: Mapping[str, Any] | None, budget: Mapping[str, Any] | None,
                 limits: Mapping[str, Any] | None, where: str) -> None:
        if privacy is None:
            raise ConfigError(f"{where}: no [privacy] table. A party declares its own privacy policy: the mechanism it "
                              "runs and its parameters (mechanism = \"ObjG\", epsilon = 1.0, delta = 1e-6, ...), or "
                              "mechanism = \"none\" to take part in non-private runs only (docs/federation.md).")
        table = dict(privacy)
        if "mechanism" not in table:
            raise ConfigError(f"{where}: [privacy] needs a 'mechanism' (one of 'none', "
                              + ", ".join(map(repr, MECHANISMS)) + ").")
        owner = f"[privacy] of {where}"
        self.accountant = check_choice(table.pop("accountant", "pld"), "accountant", owner, ACCOUNTANTS)
        algorithms = table.pop("algorithms", None)
        if algorithms is not None:
            if not isinstance(algorithms, list) or not algorithms:
                raise ConfigError(f"{owner}: algorithms must be a list of algorithm names. Got {algorithms!r}.")
            for name in algorithms:
                check_choice(name, "algorithms", owner, ALGORITHMS)
        self.algorithms = None if algorithms is None else tuple(algorithms)
        self.privacy = table
        try:
            self._mechanism = self._build(table, where)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if budget is not None:
            unknown = sorted(set(budget) - BUDGET_KEYS)
            if unknown or "epsilon" not in budget:
                raise ConfigError(f"{where}: [budget] holds epsilon (required) and delta. Got "
                                  f"{', '.join(map(repr, sorted(budget)))}.")
            eps = check_float(budget["epsilon"], "epsilon", f"[budget] of {where}", 0.0, math.inf)
            delta = check_float(budget.get("delta", 0.0), "delta", f"[budget] of {where}", 0.0, 1.0, closed="left")
            self.budget: tuple[float, float] | None = (eps, delta)
        else:
            self.budget = None
        self.limits = Limits.from_table(limits or {}, where)

    @staticmethod
    def _build(table: Mapping[str, Any], where: str) -> Any:
        """The policy's mechanism; a graph policy's ``alpha`` may be one value or a table by agent name."""
        if table.get("mechanism") == "gamma" and isinstance(table.get("alpha"), dict):
            alphas = table["alpha"]
            return {name: mechanism_from_table({**table, "alpha": value}, "[privacy]")
                    for name, value in alphas.items()}
        return mechanism_from_table(table, "[privacy]")

    @property
    def mechanism_name(self) -> str:
        return str(self.privacy["mechanism"])

    @property
    def private(self) -> bool:
        return self.mechanism_name != "none"

    def mechanism_for(self, agent: str, *, party: str) -> Any:
        """The mechanism of agent ``agent`` (None: non-private): a graph policy's alpha may differ per agent."""
        mech = self._mechanism
        if isinstance(mech, dict):
            if agent not in mech:
                raise ConfigError(f"Party {party!r}: its [privacy] alpha table has no entry for agent {agent!r}.")
            return mech[agent]
        return mech

    def describe(self) -> dict[str, Any]:
        """The policy's public part (what the party tells a coordinator in its hello)."""
        return {"privacy": dict(self.privacy), "accountant": self.accountant,
                "algorithms": None if self.algorithms is None else list(self.algorithms)}

    # ---------------------------------------------------------------- a coordinator's start
    def accept(self, algorithm: Mapping[str, Any], privacy: Mapping[str, Any], accountant: str, *,
               party: str) -> Algorithm:
        """The coordinator's algorithm, if this policy runs it: refused (one line naming the party and the field)
        when it is not an algorithm the policy allows, its parameters break their declared constraints or the
        limits, or the coordinator's [privacy] table or accountant is not the policy's."""
        def refuse(message: str, field: str, reason: str = "policy") -> PartyRefusedError:
            return PartyRefusedError(f"Party {party!r} refuses the run: {message}", party=party, round=0,
                                     reason=reason, field=field)

        try:
            alg = algorithm_from_table(algorithm, "the coordinator's [algorithm]")
        except CvxdpError as exc:
            raise refuse(str(exc), "algorithm") from None
        name = alg.name
        if self.algorithms is not None and name not in self.algorithms:
            raise refuse(f"its policy takes part in {', '.join(self.algorithms)} only; the coordinator asks for "
                         f"{name!r}.", "algorithm.name")
        if self.mechanism_name not in type(alg).mechanisms:
            raise refuse(f"its policy runs {self.mechanism_name!r}; {name!r} runs "
                         f"{', '.join(type(alg).mechanisms)}.", "algorithm.name")
        self.limits.check_rounds(int(getattr(alg, "rounds", None) or getattr(alg, "epochs", 0)), party=party)
        theirs = dict(privacy)
        if theirs.get("mechanism", "none") != self.mechanism_name:
            raise refuse(f"the coordinator's [privacy] mechanism is {theirs.get('mechanism', 'none')!r}; its own "
                         f"policy's is {self.mechanism_name!r}.", "privacy.mechanism")
        try:
            mine = self._describe(self.privacy)
            given = self._describe(theirs)
        except CvxdpError as exc:
            raise refuse(f"the coordinator's [privacy] table: {exc}", "privacy") from None
        for key in sorted(set(mine) | set(given)):
            if mine.get(key) != given.get(key):
                raise refuse(f"the coordinator's [privacy] {key} is {given.get(key)!r}; its own policy's is "
                             f"{mine.get(key)!r}.", f"privacy.{key}")
        if accountant != self.accountant:
            raise refuse(f"the coordinator's accountant is {accountant!r}; its own policy's is {self.accountant!r}.",
                         "accountant")
        return alg

    @staticmethod
    def _describe(table: Mapping[str, Any]) -> dict[str, Any]:
        """A [privacy] table with every default filled in (two tables that describe one mechanism compare equal). A
        graph mechanism's ``alpha`` is left out: it is per node, and each node compares the coordinator's rate of every
        iteration with its own (:meth:`cvxdp.families.graph.node.GraphNode.check_message`)."""
        table = dict(table)
        if table.get("mechanism") == "gamma":
            table["alpha"] = 1.0
            described = mechanism_from_table(table, "[privacy]").describe()
            described.pop("alpha", None)
            return described
        mech = mechanism_from_table(table, "[privacy]")
        return {} if mech is None else mech.describe()


# ---------------------------------------------------------------- the lifetime ledger
LEDGER_FILE = "ledger.jsonl"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def append_synced(path: Path, lines: Iterable[str]) -> None:
    """Append ``lines`` to ``path`` and wait until they are on disk (the file, and its folder on creation)."""
    new = not path.exists()
    with open(path, "a", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    if new:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class LifetimeLedger:
    """The lifetime ledger in ``folder`` for data set ``dataset`` (see the module docstring).

    Parameters
    ----------
    folder : path
        The party's state folder.
    dataset : str
        The data set the budget counts against (the party file's ``dataset``, default its name).
    agents : list of str
        The party's agents.
    budget : (float, float) or None
    accountant : {"pld", "rdp", "basic"}
    """

    def __init__(self, folder: Path, dataset: str, agents: Sequence[str], budget: tuple[float, float] | None,
                 accountant: str) -> None:
        self.path = Path(folder) / LEDGER_FILE
        self.dataset, self.agents = dataset, list(agents)
        self.budget, self.accountant = budget, accountant
        self.records: list[dict[str, Any]] = []
        if self.path.exists():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):  # a torn last record: it was never synced, so nothing it recorded left
                data = data[:data.rfind(b"\n") + 1]
                with open(self.path, "r+b") as fh:
                    fh.truncate(len(data))
            for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
                try:
                    self.records.append(json.loads(line))
                except ValueError:
                    raise ConfigError(f"The lifetime ledger {self.path} is corrupt at line {n}; it is the party's own "
                                      "record: restore it from a backup.") from None
        delta = budget[1] if budget is not None and budget[1] > 0 else 1e-6
        self.ledger = PrivacyLedger(self.agents, target_delta=delta)
        self._charged: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        for rec in self.records:
            self._index(rec)
        last = self.last_budget()
        if last is None or last.get("budget") != (None if budget is None else list(budget)) \
                or last.get("accountant") != accountant:
            self._append([{"kind": "budget", "time": _now(), "dataset": dataset,
                           "budget": None if budget is None else list(budget), "accountant": accountant}])

    def _index(self, rec: Mapping[str, Any]) -> None:
        if rec.get("kind") != "charge":
            if rec.get("kind") == "note" and rec.get("dataset") == self.dataset:
                self.ledger.note(rec["reason"], voids=bool(rec.get("voids", True)), warn=False)
            return
        self._charged.setdefault((rec["run"], int(rec["round"]), rec["agent"]), []).append(dict(rec))
        if rec["dataset"] == self.dataset and rec["agent"] in self.agents:
            self.ledger.record(rec["agent"], event_from_dict(rec["event"]), int(rec["count"]),
                               claim=tuple(rec["claim"]))

    def _append(self, records: list[dict[str, Any]]) -> None:
        append_synced(self.path, (json.dumps(r, sort_keys=True, default=float) for r in records))
        for rec in records:
            self.records.append(rec)
            self._index(rec)

    def last_budget(self) -> dict[str, Any] | None:
        """The last budget record of this data set."""
        for rec in reversed(self.records):
            if rec.get("kind") == "budget" and rec.get("dataset") == self.dataset:
                return rec
        return None

    # ---------------------------------------------------------------- charges
    def charged(self, run: str, round: int, agent: str) -> list[dict[str, Any]]:
        """The charge records of one agent's release in one round of one run (empty: never released)."""
        return self._charged.get((run, int(round), agent), [])

    def would_exceed(self, agent: str, charge: tuple[Any, tuple[float, float], int]) -> bool:
        """Whether recording ``charge`` (event, claim, calls) would take ``agent`` past the budget."""
        if self.budget is None or charge[1][0] <= 0:
            return False
        event, claim, count = charge
        return self.ledger.would_exceed(agent, event, count, self.budget, self.accountant, claim=claim)

    def exhausted(self, agent: str) -> bool:
        """Whether ``agent`` has already spent its whole budget (a new run is refused before it starts): its total
        composed at the budget's delta, as :meth:`would_exceed` composes it."""
        if self.budget is None:
            return False
        spent = self.ledger.spent(agent, self.accountant, delta=self.budget[1])
        return spent[0] >= self.budget[0] or spent[1] > self.budget[1]

    def charge(self, run: str, round: int, charges: Mapping[str, tuple[Any, tuple[float, float], int]],
               requests: Mapping[str, str]) -> None:
        """Record one round's releases (``charges``: agent -> (event, claim, calls); ``requests``: agent -> the
        digest of the request it answers), on disk before the release leaves. A charge already recorded for the same
        request (a release computed again after a crash, which never left) is not recorded twice."""
        new = []
        for agent, (event, claim, count) in charges.items():
            if any(r["request"] == requests[agent] for r in self.charged(run, round, agent)):
                continue
            new.append({"kind": "charge", "time": _now(), "dataset": self.dataset, "run": run, "round": int(round),
                        "agent": agent, "event": event_to_dict(event), "claim": [float(claim[0]), float(claim[1])],
                        "count": int(count), "request": requests[agent]})
        if new:
            self._append(new)

    # ---------------------------------------------------------------- seeds and notes
    def stream_owner(self, seed: int, index: int) -> str | None:
        """The run that used the research seed's stream ``(seed, index)``, if any."""
        for rec in self.records:
            if rec.get("kind") == "stream" and rec["seed"] == seed and rec["index"] == index:
                return rec["run"]
        return None

    def use_stream(self, run: str, agent: str, seed: int, index: int) -> None:
        self._append([{"kind": "stream", "time": _now(), "dataset": self.dataset, "run": run, "agent": agent,
                       "seed": int(seed), "index": int(index)}])

    def note(self, run: str, reason: str, *, voids: bool = True) -> None:
        """Record a release the ledger cannot account for (it voids the guarantee of this data set)."""
        self._append([{"kind": "note", "time": _now(), "dataset": self.dataset, "run": run, "reason": reason,
                       "voids": voids}])

    # ---------------------------------------------------------------- reading it
    def run_ledger(self, run: str, agents: Sequence[str], target_delta: float) -> PrivacyLedger:
        """The ledger of one run's releases (its agents, at the run's target delta)."""
        ledger = PrivacyLedger(list(agents), target_delta=target_delta)
        for rec in self.records:
            if rec.get("kind") == "charge" and rec["run"] == run:
                ledger.record(rec["agent"], event_from_dict(rec["event"]), int(rec["count"]), claim=tuple(rec["claim"]))
        return ledger

    def summary(self) -> dict[str, Any]:
        """Per agent of this data set: releases, runs and spent (basic, RDP, PLD at the budget's delta), the budget
        and its history."""
        out: dict[str, Any] = {"dataset": self.dataset, "budget": None if self.budget is None else list(self.budget),
                               "accountant": self.accountant, "agents": {},
                               "budget_history": [{k: r[k] for k in ("time", "budget", "accountant")}
                                                  for r in self.records if r.get("kind") == "budget"
                                                  and r.get("dataset") == self.dataset],
                               "notes": self.ledger.notes}
        for agent in self.agents:
            charges = [r for r in self.records if r.get("kind") == "charge" and r["dataset"] == self.dataset
                       and r["agent"] == agent]
            spent = {acc: list(self.ledger.spent(agent, acc)) for acc in ("basic", "rdp", "pld")}
            out["agents"][agent] = {"releases": len(charges), "calls": sum(int(r["count"]) for r in charges),
                                    "runs": sorted({r["run"] for r in charges}), "spent": spent}
        return out


__all__ = ["LEDGER_FILE", "LifetimeLedger", "Limits", "PartyPolicy", "append_synced"]
