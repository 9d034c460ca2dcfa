"""The trivial ServerApp: wait for every SuperNode, then one message per node per round, waiting for all replies."""

import json
import time
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    out, parties = Path(str(context.run_config["out"])), int(context.run_config["parties"])
    nodes: list[int] = []
    while len(nodes) < parties:
        nodes = list(grid.get_node_ids())
        time.sleep(0.2)
    w = np.zeros(int(context.run_config["size"]))
    rounds = []
    for _ in range(int(context.run_config["rounds"])):
        start = time.time()
        msgs = [Message(RecordDict({"w": ArrayRecord({"w": Array(w)})}), dst_node_id=n, message_type="query")
                for n in nodes]
        replies = list(grid.send_and_receive(msgs))
        w = np.mean([r.content["x"]["x"].numpy() for r in replies], axis=0)
        rounds.append(time.time() - start)
    (out / "trivial.json").write_text(json.dumps({"rounds": rounds}))
