"""Serial vs Ray backend: time per round, start-up time and Ray's overhead per round (one run of each).

    python benchmarks/bench_backends.py                     # case2869pegase/16, case1354pegase/8, case14/3
    python benchmarks/bench_backends.py --cases case14 --rounds 3 --cpus 2

Every row builds the power agents the way ``cvxdp run --network NAME --zones N`` does (automatic zones, balance
objective, non-private LinearizedADMM with rho = eta = 1, ``evaluate=False``: only released values, the same
work on both backends) and runs them once on the serial backend and once on
a ``RayBackend`` (``--cpus`` actors on a local Ray instance started before the runs, so its own start is
reported apart), then once more on Ray with the nodes in contiguous blocks balanced by the same work estimates
(:func:`cvxdp.run.backends.balanced_blocks`, the layout before the groups of
:func:`cvxdp.run.backends.balanced_groups`): "groups_vs_contiguous" is that run's time per round over the
default one's. Per round: the engine's ``wall_time`` of rounds 2..T (round 1 is the warm-up); start-up:
from calling ``solve`` to the start of round 1 (node construction: compilation, checks, initial point; for
Ray also the actors' processes and shipping the agents). Both runs use the same seed and must agree bit for
bit (checked). The ratio serial/Ray of the time per round is the speed-up. Beside it, the ceiling: the serial
time per round over the slowest block's serial time per round (each node's ``step`` timed inside the serial run,
summed over the blocks as Ray assigns them): what the actors could reach if each ran its block as fast as the
serial process does and nothing else cost anything ("ceiling_contiguous": the same for the contiguous
blocks). On case14 a third run puts all nodes on one actor: its time
per round minus the serial one is Ray's overhead per round (transport of messages and releases, serialization,
scheduling), with no parallelism to hide it. "auto" is what a default ``RayBackend()`` decides (Ray, or serial
below ``min_variables``); on case14 the script runs it and reports its time per round. The Ray runs above force
Ray (``min_variables=0``). Timings depend on the machine's load: the script prints ``uptime`` beside them.
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
from cvxdp.run import SerialBackend
from cvxdp.run.backends import balanced_blocks, method_name
from cvxdp.run.ray import RayBackend

try:
    import ray
except ImportError:  # the script needs the ray extra
    ray = None
from cvxdp.config.build import build_instance, power_case

CASES = {"case2869pegase": 16, "case1354pegase": 8, "case14": 3, "case118": 3, "case300": 4}
DEFAULT = ["case2869pegase", "case1354pegase", "case14"]  # case118 / case300: near min_variables (--cases)


class StepTimedSerial(SerialBackend):
    """The serial backend, timing each node's ``step`` (wall time per node and round, in ``self.steps``)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[list[float]] = []

    def call(self, method, args=None, *, round=None):
        if method_name(method) != "step":
            return super().call(method, args, round=round)
        out, times = [], []
        for node, a in zip(self.nodes, args):
            start = time.perf_counter()
            out.append(node.step(*a))
            times.append(time.perf_counter() - start)
        self.steps.append(times)
        return out


class ContiguousRay(RayBackend):
    """The layout before groups: contiguous blocks balanced by the nodes' public work."""

    def _layout(self, n, work=None):
        cpus = max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return balanced_blocks([1.0] * n if work is None else list(work), cpus)


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
    timed = StepTimedSerial()
    serial, serial_start = timed_solve(agents, timed, rounds)
    forced = RayBackend(min_variables=0)  # one actor per CPU, blocks balanced by work; Ray whatever the size
    remote, ray_start = timed_solve(agents, forced, rounds)
    contiguous = ContiguousRay(min_variables=0)  # the layout before groups
    contig, _ = timed_solve(agents, contiguous, rounds)
    per_serial = float(serial.history["wall_time"].iloc[1:].mean())
    per_ray = float(remote.history["wall_time"].iloc[1:].mean())
    per_contig = float(contig.history["wall_time"].iloc[1:].mean())
    # the ceiling: serial time per round / the slowest block's serial step time per round (rounds 2..T)
    step = np.mean(np.array(timed.steps[1:]), axis=0)
    work = [float(a.layout.size) for a in agents]
    slowest = max(float(step[b].sum()) for b in forced._layout(len(agents), work))
    slowest_contiguous = max(float(step[b].sum()) for b in contiguous._layout(len(agents), work))
    auto = RayBackend()  # the default decision: Ray, or serial below min_variables
    variables = sum(a.layout.size for a in agents)
    decision = "ray" if variables >= auto.min_variables else f"serial ({variables:,} < {auto.min_variables:,})"
    extra = {}
    if one_actor:  # all nodes on one actor: no parallelism, so the difference is Ray's cost per round
        single, _ = timed_solve(agents, RayBackend(nodes_per_actor=len(agents), min_variables=0), rounds)
        per_single = float(single.history["wall_time"].iloc[1:].mean())
        chosen, _ = timed_solve(agents, auto, rounds)
        extra = {"ray_1actor_ms/round": 1e3 * per_single, "ray_overhead_ms/round": 1e3 * (per_single - per_serial),
                 "auto_ms/round": 1e3 * float(chosen.history["wall_time"].iloc[1:].mean())}
    return {"case": name, "zones": len(agents), "vars": variables, "build_s": build_s,
            "serial_startup_s": serial_start, "ray_startup_s": ray_start, "serial_ms/round": 1e3 * per_serial,
            "ray_ms/round": 1e3 * per_ray, "speed-up": per_serial / per_ray, "ceiling": per_serial / slowest,
            "slowest_block_ms/round": 1e3 * slowest, "ray_contiguous_ms/round": 1e3 * per_contig,
            "ceiling_contiguous": per_serial / slowest_contiguous, "groups_vs_contiguous": per_contig / per_ray,
            "auto": decision, **extra,
            "bit-identical": same_numbers(serial, remote) and same_numbers(serial, contig)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=DEFAULT, choices=list(CASES))
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
