"""Serial vs Ray backend: time per round, start-up time and Ray's overhead per round (one run of each).

    python benchmarks/bench_backends.py                     # case2869pegase/16, case1354pegase/8, case14/3
    python benchmarks/bench_backends.py --cases case14 --rounds 3 --cpus 2

Every row builds the power agents the way ``cvxdp run --network NAME --zones N`` does (automatic zones, balance
objective, non-private LinearizedADMM with rho = eta = 1, ``evaluate=False``: only released values, the same
work on both backends) and runs them once on the serial backend and once on
a ``RayBackend`` (``--cpus`` actors on a local Ray instance started before the runs, so its own start is
reported apart), then once more on Ray with the nodes in blocks of equal counts (the layout before the blocks were
balanced by each node's public work estimate, its number of variables): "balanced_vs_equal" is that run's time
per round over the balanced one's. Per round: the engine's ``wall_time`` of rounds 2..T (round 1 is the warm-up); start-up:
from calling ``solve`` to the start of round 1 (node construction: compilation, checks, initial point; for
Ray also the actors' processes and shipping the agents). Both runs use the same seed and must agree bit for
bit (checked). The ratio serial/Ray of the time per round is the speed-up. On case14 a third run puts all
nodes on one actor: its time per round minus the serial one is Ray's overhead per round (transport of
messages and releases, serialization, scheduling), with no parallelism to hide it. Timings depend on the
machine's load: the script prints ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import warnings

import numpy as np
import pandas as pd

import cvxdp
from cvxdp.run.ray import RayBackend

try:
    import ray
except ImportError:  # the script needs the ray extra
    ray = None
from cvxdp.config.build import build_instance, power_case

CASES = {"case2869pegase": 16, "case1354pegase": 8, "case14": 3}


def timed_solve(agents, backend, rounds: int) -> tuple[cvxdp.Result, float]:
    """Run once; return the result and the start-up time (solve called -> round 1 starts)."""
    marks: list[float] = []
    start = time.perf_counter()
    # evaluate=False on both: the same work (releases only; no private evaluation) on every backend
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=rounds), seed=0,
                         backend=backend, evaluate=False,
                         callback=lambda t, row: marks.append(time.perf_counter()))
    return result, marks[0] - float(result.history["wall_time"].iloc[0]) - start


def same_numbers(a: cvxdp.Result, b: cvxdp.Result) -> bool:
    cols = [c for c in a.history.columns if c not in ("wall_time", "solver_time")]
    return bool(a.history[cols].equals(b.history[cols])
                and all(np.array_equal(a.solution[k], b.solution[k]) for k in a.solution))


def bench(name: str, zones: int, rounds: int, one_actor: bool) -> dict:
    start = time.perf_counter()
    agents = build_instance(power_case(name, zones, objective="balance")).agents
    build_s = time.perf_counter() - start
    serial, serial_start = timed_solve(agents, "serial", rounds)
    remote, ray_start = timed_solve(agents, RayBackend(), rounds)  # one actor per CPU, blocks balanced by work
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    # the layout before work balancing: blocks of equal counts (as many actors)
    equal, _ = timed_solve(agents, RayBackend(nodes_per_actor=-(-len(agents) // cpus)), rounds)
    per_serial = float(serial.history["wall_time"].iloc[1:].mean())
    per_ray = float(remote.history["wall_time"].iloc[1:].mean())
    per_equal = float(equal.history["wall_time"].iloc[1:].mean())
    overhead = {}
    if one_actor:  # all nodes on one actor: no parallelism, so the difference is Ray's cost per round
        single, _ = timed_solve(agents, RayBackend(nodes_per_actor=len(agents)), rounds)
        per_single = float(single.history["wall_time"].iloc[1:].mean())
        overhead = {"ray_1actor_ms/round": 1e3 * per_single, "ray_overhead_ms/round": 1e3 * (per_single - per_serial)}
    return {"case": name, "zones": len(agents), "vars": sum(a.layout.size for a in agents), "build_s": build_s,
            "serial_startup_s": serial_start, "ray_startup_s": ray_start, "serial_ms/round": 1e3 * per_serial,
            "ray_ms/round": 1e3 * per_ray, "speed-up": per_serial / per_ray,
            "ray_equal_counts_ms/round": 1e3 * per_equal, "balanced_vs_equal": per_equal / per_ray, **overhead,
            "bit-identical": same_numbers(serial, remote) and same_numbers(serial, equal)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=6, help="rounds per run (the first is the warm-up)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance (= actors)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # "did not reach consensus": a handful of rounds is the point

    print("load before:", os.popen("uptime").read().strip())
    start = time.perf_counter()
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, logging_level=logging.ERROR,
             log_to_driver=False)
    print(f"ray.init (local, {args.cpus} CPUs): {time.perf_counter() - start:.2f} s")
    rows = []
    for name in args.cases:
        rows.append(bench(name, CASES[name], args.rounds, one_actor=name == "case14"))
        print(pd.DataFrame([rows[-1]]).to_string(index=False, float_format=lambda v: f"{v:.3g}"), flush=True)
    ray.shutdown()
    print("load after:", os.popen("uptime").read().strip())
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main()
