"""A run at a party and its folder on the party's own disk (``state/run-<token>/``).

What the folder holds, all written by the party for itself and never sent:

* ``run.msg``: the run's start request and the party's declarations (wire-encoded);
* ``state.msg``: the round released last and every node's state (generators included), rewritten every round;
* ``releases.log``: each released round's request digests and releases, length-prefixed and fsynced, so a
  coordinator that asks a released round again gets the same bytes back (no new draw, no new charge);
* ``evaluation.csv``: the party's own evaluation on its own data, one row per agent and round;
* at the end, ``ledger.json`` and ``local.npz`` (written by :class:`cvxdp.federation.party.Party`).

A round is on disk (its record, then the nodes' state) before its release leaves; records past the last saved state
(written just before a crash, never answered) are cut off when the folder is opened again.
"""

from __future__ import annotations

import csv
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..model import Node
from ..run.storage import atomic_write
from .wire import decode, encode


class RunFolder:
    """The files of one run at a party (see the module docstring). Use :meth:`create` or :meth:`open`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index: dict[int, tuple[int, int]] = {}  # round -> (offset, length) in releases.log
        self.evaluated = 0  # the last round in evaluation.csv

    @classmethod
    def create(cls, folder: Path, start: dict[str, Any], declared: dict[str, Any]) -> RunFolder:
        """A new run's folder, with its start request and declarations written."""
        folder.mkdir(parents=True, exist_ok=True)
        disk = cls(folder)
        disk.write("run.msg", {"start": start, "declare": declared})
        return disk

    @classmethod
    def open(cls, folder: Path) -> RunFolder | None:
        """The folder of a run started before (a party started again), or None."""
        return cls(folder) if (folder / "run.msg").is_file() else None

    def write(self, name: str, value: Any) -> None:
        """Replace file ``name`` with ``value`` wire-encoded, atomically."""
        atomic_write(self.folder / name, lambda fh: fh.write(encode(value)), "party state")

    def saved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``run.msg`` and ``state.msg`` as written (the nodes' arrays writable, for restoring)."""
        saved = decode((self.folder / "run.msg").read_bytes())
        state = decode((self.folder / "state.msg").read_bytes())
        state["nodes"] = {name: {k: _writable(v) for k, v in node.items()} for name, node in state["nodes"].items()}
        return saved, state

    def reopen(self, latest: int) -> None:
        """Index the release log up to round ``latest`` (cutting later records off) and find the last evaluated
        round."""
        self.index = _index(self.folder / "releases.log", latest)
        self.evaluated = _last_evaluated(self.folder / "evaluation.csv")

    def append(self, t: int, requests: dict[str, str], releases: dict[str, Any]) -> None:
        """Append round ``t``'s record to the release log and wait until it is on disk."""
        log = self.folder / "releases.log"
        data = encode({"round": t, "requests": requests, "releases": releases})
        offset = log.stat().st_size if log.exists() else 0
        append_synced_bytes(log, struct.pack(">Q", len(data)) + data)
        self.index[t] = (offset + 8, len(data))

    def recorded(self, t: int) -> dict[str, Any] | None:
        """Round ``t``'s record (``{"round", "requests", "releases"}``), or None."""
        where = self.index.get(t)
        if where is None:
            return None
        with open(self.folder / "releases.log", "rb") as fh:
            fh.seek(where[0])
            return decode(fh.read(where[1]))

    def append_evaluation(self, t: int, rows: list[dict[str, Any]]) -> None:
        """Round ``t``'s evaluation rows (the caller writes each round once: :meth:`Run.evaluate`)."""
        path = self.folder / "evaluation.csv"
        fields = sorted({k for r in rows for k in r} - {"round", "agent"})
        new = not path.exists()
        with open(path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["round", "agent", *fields], extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)
        self.evaluated = t


class Run:
    """One run at a party: its folder, start request, declarations, nodes, algorithm, the round it released last and
    the coordinator that holds it."""

    def __init__(self, disk: RunFolder, start: dict[str, Any], declared: dict[str, Any], nodes: dict[str, Node],
                 algorithm: Any, latest: int) -> None:
        self.disk, self.start, self.declared, self.nodes = disk, start, declared, nodes
        self.algorithm, self.latest = algorithm, latest
        self.owner: str | None = None
        self.seen = 0.0

    @property
    def token(self) -> str:
        return self.start["token"]

    def save_state(self) -> None:
        """The round released last and every node's state, to ``state.msg``."""
        self.disk.write("state.msg", {"round": self.latest,
                                      "nodes": {n: node.state() for n, node in self.nodes.items()}})

    def record(self, t: int, requests: dict[str, str], releases: dict[str, Any]) -> None:
        """Round ``t`` on disk: its release (for a resumed coordinator), then the nodes' state; both before the
        release leaves."""
        self.disk.append(t, requests, releases)
        self.latest = t
        self.save_state()

    def evaluate(self, t: int) -> None:
        """The party's own evaluation of round ``t`` on its own data, to its own folder (never sent)."""
        if t > self.disk.evaluated:  # a round evaluated before a restart is not evaluated again
            self.disk.append_evaluation(t, [{"round": t, "agent": name, **dict(node.evaluate(t).values)}
                                            for name, node in self.nodes.items()])


def append_synced_bytes(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and wait until it is on disk."""
    with open(path, "ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _index(log: Path, latest: int) -> dict[int, tuple[int, int]]:
    """Where each round's record lies in a run's release log; records past ``latest`` (written just before a crash,
    never answered) are cut off."""
    index: dict[int, tuple[int, int]] = {}
    if not log.exists():
        return index
    data, pos, keep = log.read_bytes(), 0, 0
    while pos + 8 <= len(data):
        (size,) = struct.unpack_from(">Q", data, pos)
        if pos + 8 + size > len(data):
            break
        t = int(decode(data[pos + 8:pos + 8 + size])["round"])
        if t > latest:
            break
        index[t] = (pos + 8, size)
        pos = keep = pos + 8 + size
    if keep < len(data):
        with open(log, "r+b") as fh:
            fh.truncate(keep)
    return index


def _last_evaluated(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, newline="") as fh:
        rounds = [int(row["round"]) for row in csv.DictReader(fh)]
    return max(rounds, default=0)


def _writable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return np.array(value)
    if isinstance(value, list):
        return [_writable(v) for v in value]
    return value


__all__ = ["Run", "RunFolder", "append_synced_bytes"]
