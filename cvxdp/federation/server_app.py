"""The coordinator's Flower ServerApp: the one round loop, its messages carried by Flower's Grid.

``cvxdp federate`` writes the run's plan (the case's algorithm, privacy and run tables, the agents' order, the output
and checkpoint directories) and starts this app with ``flwr run``; it reaches the parties' ClientApps through a
:class:`FlowerChannel` and writes the public result to the plan's output directory, with a status file that says
whether the run finished and, if not, why (one line naming the party and the round).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from ..errors import BackendError, CvxdpError
from .coordinator import Channel, run_federation
from .launch import STATUS_FILE
from .wire import dumps, unpack

app = ServerApp()



class FlowerChannel(Channel):
    """The parties behind a Flower Grid: SuperNodes are matched to parties by the name each party's ClientApp gives
    (and, with SuperNode authentication, the name its key was registered under); unknown parties are refused."""

    def __init__(self, grid: Grid, expected: Sequence[str], *, wait: float = 120.0, timeout: float = 600.0,
                 poll: float = 0.1) -> None:
        self.grid, self.expected, self.timeout, self.poll = grid, list(expected), timeout, poll
        self.nodes: dict[str, int] = {}
        self._hello: dict[str, Any] = {}
        self._connect(wait)

    def _connect(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        while True:
            ids = sorted(self.grid.get_node_ids())
            if len(ids) >= len(self.expected) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if len(ids) < len(self.expected):
            raise BackendError(f"Only {len(ids)} of the {len(self.expected)} parties ({', '.join(self.expected)}) "
                               f"connected within {wait:g} s.")
        registered = {n.node_id: n.name for n in self.grid.get_nodes()} if hasattr(self.grid, "get_nodes") else {}
        replies = self._exchange({node: ("hello", {}) for node in ids}, 0, {node: f"node {node}" for node in ids})
        for node, data in replies.items():
            reply = unpack(f"node {node}", data, 0)
            party = reply["party"]
            if party not in self.expected:
                raise BackendError(f"An unknown party {party!r} (SuperNode {node}) joined; the run expects "
                                   f"{', '.join(map(repr, self.expected))}.", agents=(party,))
            if registered.get(node) and registered[node] != party:
                raise BackendError(f"SuperNode {node} is registered as {registered[node]!r} but introduced itself as "
                                   f"{party!r}.", agents=(party,))
            if party in self.nodes:
                raise BackendError(f"Two SuperNodes introduced themselves as {party!r}.", agents=(party,))
            self.nodes[party], self._hello[party] = node, reply

    def parties(self) -> list[str]:
        return [p for p in self.expected if p in self.nodes]

    def _exchange(self, requests: Mapping[int, tuple[str, dict]], round: int | None,
                  names: Mapping[int, str]) -> dict[int, bytes]:
        msgs = [Message(RecordDict({"request": ConfigRecord({"payload": dumps(request)})}), dst_node_id=node,
                        message_type="query.cvxdp", ttl=self.timeout) for node, request in requests.items()]
        ids = list(self.grid.push_messages(msgs))
        node_of = {mid: msg.metadata.dst_node_id for mid, msg in zip(ids, msgs)}
        replies: dict[int, bytes] = {}
        deadline = time.monotonic() + self.timeout + 5.0
        while len(replies) < len(ids) and time.monotonic() < deadline:
            for reply in self.grid.pull_messages([m for m in ids if node_of[m] not in replies]):
                node = node_of.get(reply.metadata.reply_to_message_id)
                if node is None:
                    continue
                if reply.has_error():
                    raise BackendError(f"Party {names[node]!r} failed in round {round}: {reply.error.reason} "
                                       f"(Flower error {reply.error.code}).", agents=(names[node],), round=round)
                replies[node] = bytes(reply.content.config_records["reply"]["payload"])
            if len(replies) < len(ids):
                time.sleep(self.poll)
        missing = [names[node_of[m]] for m in ids if node_of[m] not in replies]
        if missing:
            raise BackendError(f"Party {missing[0]!r} did not answer within {self.timeout:g} s in round {round}.",
                               agents=tuple(missing), round=round)
        return replies

    def send(self, requests: Mapping[str, tuple[str, dict[str, Any]]], *, round: int | None = None
             ) -> dict[str, Any]:
        if all(kind == "hello" for kind, _ in requests.values()):
            return {p: self._hello[p] for p in requests}
        unknown = [p for p in requests if p not in self.nodes]
        if unknown:
            raise BackendError(f"Party {unknown[0]!r} is not connected.", agents=tuple(unknown), round=round)
        names = {self.nodes[p]: p for p in requests}
        replies = self._exchange({self.nodes[p]: r for p, r in requests.items()}, round, names)
        return {names[node]: unpack(names[node], data, round) for node, data in replies.items()}


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the plan named by the run config's ``plan`` and write the public result and the status file."""
    plan = json.loads(Path(str(context.run_config["plan"])).read_text())
    out = Path(plan["out"])
    status: dict[str, Any] = {"status": "failed"}
    try:
        channel = FlowerChannel(grid, plan["parties"], wait=float(plan.get("wait", 120.0)),
                                timeout=float(plan.get("timeout", 600.0)))
        result = run_federation(plan, channel)
        result.save(out / "result", overwrite=True, public=True)
        status = {"status": "done", "stop_reason": result.stop_reason, "rounds": int(len(result.history))}
    except CvxdpError as exc:
        status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - reported in the status file; the trace for the operator
        status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    finally:
        (out / STATUS_FILE).write_text(json.dumps(status, indent=2))
