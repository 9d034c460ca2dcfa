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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid, ServerApp

from ..errors import BackendError, CvxdpError
from . import messages
from .coordinator import Channel, run_federation
from .launch import PROGRESS_FILE, STATUS_FILE

app = ServerApp()
#: Flower's errors for a reply that will not come: the node left, did not report a heartbeat, or the message expired
GONE = (ErrorCode.MESSAGE_UNAVAILABLE, ErrorCode.REPLY_MESSAGE_UNAVAILABLE, ErrorCode.NODE_UNAVAILABLE)
#: seconds after which the coordinator says whom it is waiting for (and again every as many seconds)
WAIT_NOTICE = 5.0

class FlowerChannel(Channel):
    """The parties behind a Flower Grid: SuperNodes are matched to parties by the name each party's ClientApp gives
    (and, with SuperNode authentication, the name its key was registered under); unknown parties are refused."""

    def __init__(self, grid: Grid, expected: Sequence[str], *, wait: float = 120.0, timeout: float = 600.0,
                 poll: float = 0.1, say: Callable[[str], None] = lambda line: None) -> None:
        self.grid, self.expected, self.timeout, self.poll, self.say = grid, list(expected), timeout, poll, say
        self.nodes: dict[str, int] = {}
        self._hello: dict[str, Any] = {}
        self._connect(wait)

    def _connect(self, wait: float) -> None:
        """Ask every SuperNode that connects who it is until every expected party has answered (a node that left,
        e.g. one that dropped before a rerun and is still listed, is skipped; an unknown party is refused)."""
        start = time.monotonic()
        deadline, notice = start + wait, start + WAIT_NOTICE
        registered: dict[int, str] = {}
        asked: set[int] = set()
        pending: dict[str, int] = {}  # message id -> node, for the introductions not answered yet
        while set(self.expected) - set(self.nodes):
            if time.monotonic() > deadline:
                missing = sorted(set(self.expected) - set(self.nodes))
                raise BackendError(f"{len(missing)} of the {len(self.expected)} parties ({', '.join(missing)}) did "
                                   f"not connect within {wait:g} s.", agents=tuple(missing))
            new = [n for n in sorted(self.grid.get_node_ids()) if n not in asked]
            if new and hasattr(self.grid, "get_nodes"):
                registered = {n.node_id: n.name for n in self.grid.get_nodes()}
            asked.update(new)
            pending.update(self._push({node: ("hello", {}) for node in new}))
            for node, reply in self._pull(pending, 0, {n: f"node {n}" for n in asked}, skip_gone=True):
                if reply is not None:
                    party = self._introduce(node, messages.read_reply(f"node {node}", reply, 0), registered)
                    self.say(f"party {party} connected")
            if time.monotonic() >= notice and set(self.expected) - set(self.nodes):
                missing = sorted(set(self.expected) - set(self.nodes))
                self.say(f"waiting for {', '.join(missing)} to connect ({time.monotonic() - start:.0f} s of "
                         f"{wait:g} s)")
                notice += WAIT_NOTICE
            time.sleep(0.2)

    def _introduce(self, node: int, reply: dict[str, Any], registered: Mapping[int, str]) -> str:
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
        return party

    def parties(self) -> list[str]:
        return [p for p in self.expected if p in self.nodes]

    def _push(self, requests: Mapping[int, tuple[str, dict]]) -> dict[str, int]:
        """Send one request per node; the message ids and their nodes."""
        msgs = [Message(RecordDict({"request": ConfigRecord({"payload": messages.request(*request)})}),
                        dst_node_id=node, message_type="query.cvxdp", ttl=self.timeout)
                for node, request in requests.items()]
        ids = list(self.grid.push_messages(msgs)) if msgs else []
        return {mid: msg.metadata.dst_node_id for mid, msg in zip(ids, msgs)}

    def _pull(self, pending: dict[str, int], round: int | None, names: Mapping[int, str], *,
              skip_gone: bool = False) -> list[tuple[int, bytes | None]]:
        """The replies that arrived (removed from ``pending``); with ``skip_gone``, a node that left answers None."""
        out = []
        for reply in self.grid.pull_messages(list(pending)) if pending else []:
            node = pending.pop(reply.metadata.reply_to_message_id, None)
            if node is None:
                continue
            if reply.has_error():
                if skip_gone and reply.error.code in GONE:
                    out.append((node, None))
                    continue
                raise BackendError(_flower_error(names[node], round, reply.error.code, reply.error.reason),
                                   agents=(names[node],), round=round)
            out.append((node, bytes(reply.content.config_records["reply"]["payload"])))
        return out

    def _exchange(self, requests: Mapping[int, tuple[str, dict]], round: int | None,
                  names: Mapping[int, str], timeout: float) -> dict[int, bytes]:
        """Push the requests and pull the replies; say who is awaited after :data:`WAIT_NOTICE` seconds, and again
        every :data:`WAIT_NOTICE` seconds."""
        pending = self._push(requests)
        replies: dict[int, bytes] = {}
        start = time.monotonic()
        deadline, notice = start + timeout + 5.0, start + WAIT_NOTICE
        while pending and time.monotonic() < deadline:
            replies.update(self._pull(pending, round, names))
            if pending:
                if time.monotonic() >= notice:
                    waiting = sorted(names[node] for node in pending.values())
                    self.say(f"{_when(round)}: waiting for {', '.join(waiting)} ({time.monotonic() - start:.0f} s; "
                             f"a party gives up after {timeout:g} s)")
                    notice += WAIT_NOTICE
                time.sleep(self.poll)
        if pending:
            missing = sorted(names[node] for node in pending.values())
            raise BackendError(f"Party {missing[0]!r} did not answer within {timeout:g} s in round {round}.",
                               agents=tuple(missing), round=round)
        if round:
            self.say(f"round {round}: {time.monotonic() - start:.1f} s, answered by "
                     f"{', '.join(sorted(names.values()))}")
        return replies

    def send(self, requests: Mapping[str, tuple[str, dict[str, Any]]], *, round: int | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        if all(kind == "hello" for kind, _ in requests.values()):
            return {p: self._hello[p] for p in requests}
        unknown = [p for p in requests if p not in self.nodes]
        if unknown:
            raise BackendError(f"Party {unknown[0]!r} is not connected.", agents=tuple(unknown), round=round)
        names = {self.nodes[p]: p for p in requests}
        replies = self._exchange({self.nodes[p]: r for p, r in requests.items()}, round, names,
                                 self.timeout if timeout is None else timeout)
        return {names[node]: messages.read_reply(names[node], data, round) for node, data in replies.items()}


def _when(round: int | None) -> str:
    return "start" if round == 0 else "introduction" if round is None else f"round {round}"


def _flower_error(party: str, round: int | None, code: int, reason: str) -> str:
    """One line naming the party and the round for an error Flower returns instead of a party's reply."""
    if code in GONE:
        return (f"Party {party!r} did not answer in round {round}: its node left the federation or the message "
                f"expired (Flower error {code}: {reason.split(' - ')[0]}).")
    return f"Party {party!r} failed in round {round}: {reason} (Flower error {code})."


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the plan named by the run config's ``plan``; write the public result, the status file and one progress
    line per event to the plan's output folder (``cvxdp federate`` prints them as they come)."""
    plan = json.loads(Path(str(context.run_config["plan"])).read_text())
    out = Path(plan["out"])
    out.mkdir(parents=True, exist_ok=True)
    progress = out / PROGRESS_FILE

    def say(line: str) -> None:
        with open(progress, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    status: dict[str, Any] = {"status": "failed"}
    try:
        channel = FlowerChannel(grid, plan["parties"], wait=float(plan.get("wait", 120.0)),
                                timeout=float(plan.get("timeout", 600.0)), say=say)
        result = run_federation(plan, channel)
        result.save(out / "result", overwrite=True, public=True)
        status = {"status": "done", "stop_reason": result.stop_reason, "rounds": int(len(result.history))}
    except CvxdpError as exc:
        status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - reported in the status file; the trace for the operator
        status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    finally:
        (out / STATUS_FILE).write_text(json.dumps(status, indent=2))
