"""cvxdp's ClientApp, as its Flower app (FAB) declares it: it answers nothing.

A cvxdp party runs ``cvxdp party PARTY.toml``: its SuperNode runs with ``--isolation process`` and the party's own
executor (:mod:`cvxdp.federation.executor`) answers every message with the installed cvxdp party. Flower starts
this ClientApp only on a SuperNode that runs apps itself (``flower-supernode`` without ``--isolation process``),
which is not a cvxdp party: it then answers with a failure saying so, and reads nothing of the node's.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from .messages import failure

app = ClientApp()
NOT_A_PARTY = ("this SuperNode runs Flower's ClientApps itself; a cvxdp party answers through its own executor: "
               "start it with `cvxdp party PARTY.toml --superlink HOST:PORT` (docs/federation.md)")


@app.query("cvxdp")
def handle(msg: Message, context: Context) -> Message:
    """A failure naming the right way to run a party."""
    return Message(RecordDict({"reply": ConfigRecord({"payload": failure(NOT_A_PARTY)})}), reply_to=msg)
