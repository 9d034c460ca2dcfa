"""The federation on real Flower processes vs the serial backend: time per round, start-up, time to the rule.

    python benchmarks/bench_federation.py                              # case14 and case118, 3 zones each
    python benchmarks/bench_federation.py --only "case14 (3 zones)" --rounds 4

Each row builds the zone agents of a power case with the cost objective (``bench_power.py``'s acceptance data) and
runs exact ADMM with polishing (non-private, its defaults) twice with the same seed: once on the serial backend and
once as a federation on this machine (``LocalFederation``: a real SuperLink and one real SuperNode process per
zone on 127.0.0.1, cvxdp's ServerApp submitted with ``flwr run``, plain HTTP). The released histories must agree
bit for bit (checked). Columns:

- ``serial s/round``: the loop's ``wall_time`` per round (rounds 2..T); ``fed s/round``: the federation's run time
  with T rounds minus its run time with 2 rounds, over T - 2 (the public view carries no timings: they are measured
  from outside, and the federation runs twice); their ratio;
- ``launch s``: starting the SuperLink and the SuperNodes (until the SuperLink's port is open);
- ``fed fixed s``: the run's time outside its rounds (``flwr run`` submitting the app, the ServerApp process, the
  SuperNodes' introduction, the start and the finish round trips): the T-round run's time minus T rounds;
- ``rule round``: the first round whose polished point meets PowerModelsADA's rule (half the pairwise mismatch
  below 0.01 and the polished cost within 1 % of the centralized optimum; judged on the serial run, which holds the
  private evaluation, the federation's iterates being the same); ``serial s to rule`` and ``fed s to rule``: the
  time until then (serial: start-up + rounds; federation: launch + fixed + rounds);
- ``party compute s/round``: the zones' own solve time per round (serial ``solver_time``): what the federation
  spends outside it is Flower's floor (an idle SuperNode polls every 3 s; a new ClientApp process per message).

Timings depend on the machine's load: the script prints ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from bench_power import ACCEPTANCE_CASES, _first_hit, _table

import cvxdp
from cvxdp.federation.launch import LocalFederation
from cvxdp.federation.parties import party_folders, write_plan
from cvxdp.run import load_result
from cvxdp_models.power.template import build

ROWS = ("case14 (3 zones)", "case118 (3 zones)")


def row(label: str, rounds: int, work: Path, short: int = 2) -> dict:
    inst = build(dict(ACCEPTANCE_CASES[label], objective="cost"), base_dir=".")
    ref = inst.central(ac_check=False)["objective"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        serial = cvxdp.solve(inst.agents, algorithm=cvxdp.ADMM(rounds=rounds), seed=0)
        serial_total = time.perf_counter() - start
    hit = _first_hit(serial.history, ref, 0.01, 0.01, factor=0.5, polished=True)
    names = [a.name for a in inst.agents]
    files = party_folders(inst.agents, work / "parties", seed=0)
    timed = {}
    for n in (short, rounds):  # the public view carries no timings: per round = the difference of two runs
        case = SimpleNamespace(name=label, algorithm={"name": "admm", "rounds": n}, privacy={"mechanism": "none"},
                               run={"seed": 0})
        out = work / f"out{n}"
        out.mkdir(parents=True, exist_ok=True)
        plan = write_plan(case, work / f"plan{n}.json", parties=names, agents=names, out=out)
        start = time.perf_counter()
        with LocalFederation(files, work / f"flower{n}") as fed:
            launched = time.perf_counter()
            status = fed.run(plan)
            done = time.perf_counter()
        if status["status"] != "done":
            raise SystemExit(f"{label}: the federation failed: {status.get('error')}")
        timed[n] = (launched - start, done - launched, load_result(out / "result"))
    public = timed[rounds][2]
    released = list(public.history.columns)
    mine = serial.history[released].iloc[:len(public.history)]
    differ = [c for c in released  # values, bit for bit (a reloaded CSV column may be int where the run's is float)
              if not np.array_equal(public.history[c].to_numpy(float), mine[c].to_numpy(float), equal_nan=True)]
    same = not differ
    if differ:
        print(f"{label}: columns that differ from the serial run: {differ}", flush=True)
    per_serial = float(serial.history["wall_time"].iloc[1:].mean())
    per_fed = (timed[rounds][1] - timed[short][1]) / (rounds - short)
    fixed = timed[rounds][1] - rounds * per_fed
    launch = timed[rounds][0]
    serial_start = serial_total - float(serial.history["wall_time"].sum())
    return {"case": label, "zones": len(names), "rounds": rounds, "bit for bit": same,
            "serial s/round": per_serial, "fed s/round": per_fed, "fed/serial": per_fed / per_serial,
            "launch s": launch, "fed fixed s": fixed,
            "rule round": hit,
            "serial s to rule": serial_start + float(serial.history["wall_time"].iloc[:hit].sum()) if hit else None,
            "fed s to rule": launch + fixed + hit * per_fed if hit else None,
            "party compute s/round": float(serial.history["solver_time"].mean()) / len(names)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", nargs="+", choices=ROWS)
    args = parser.parse_args()
    print("load:", os.getloadavg())
    rows = []
    for label in args.only or ROWS:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(row(label, args.rounds, Path(tmp)))
        print(_table(rows[-1:]), flush=True)
    print(_table(rows))
    print(json.dumps(rows, default=str))


if __name__ == "__main__":
    main()
