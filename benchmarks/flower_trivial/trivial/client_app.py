"""The trivial ClientApp: note when each message arrived, reply with an array of the same size."""

import time
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


@app.query()
def answer(msg: Message, context: Context) -> Message:
    arrived = time.time()
    with open(Path(str(context.run_config["out"])) / f"node-{context.node_id}.txt", "a") as fh:
        fh.write(f"{arrived!r}\n")
    w = msg.content["w"]["w"].numpy()
    return Message(RecordDict({"x": ArrayRecord({"x": Array(np.asarray(w) * 0.5 + 1.0)})}), reply_to=msg)
