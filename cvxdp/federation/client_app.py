"""The party's Flower ClientApp: every request of the coordinator, answered by the party's own node.

A party runs ``flower-supernode ... --node-config "party-file='/path/to/party.toml'"`` (or ``cvxdp party
PARTY.toml --superlink HOST:PORT``, which does exactly that). Flower runs each message in a fresh process; the party's
state lives in its own state directory (:mod:`cvxdp.federation.party`).
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from .party import Party
from .wire import answer

app = ClientApp()


@app.query("cvxdp")
def handle(msg: Message, context: Context) -> Message:
    """Answer one request of the coordinator (``payload``: the request's bytes; the reply's bytes back)."""
    path = str(context.node_config["party-file"])
    data = bytes(msg.content.config_records["request"]["payload"])
    reply = answer(lambda kind, payload: Party(path).handle(kind, payload), data)
    return Message(RecordDict({"reply": ConfigRecord({"payload": reply})}), reply_to=msg)
