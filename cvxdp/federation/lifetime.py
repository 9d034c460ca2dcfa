"""A party's lifetime ledger: every release it ever made on its data set, across every run and token.

One file per party, ``<state>/ledger.jsonl``, one JSON record per line, only ever appended (and fsynced before the
release it records leaves the party). Nothing a coordinator sends rolls it back: a new run, a new token, a restart
or a replayed round adds to it or finds its record there. Records:

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
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..privacy import PrivacyLedger, event_from_dict, event_to_dict

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
        """Whether ``agent`` has already spent its whole budget (a new run is refused before it starts)."""
        if self.budget is None:
            return False
        spent = self.ledger.spent(agent, self.accountant)
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


__all__ = ["LEDGER_FILE", "LifetimeLedger", "append_synced"]
