"""Where a Ray actor's time goes: each node's step inside its actor against the same node in the serial process.

    python benchmarks/bench_ray_actor.py                            # case2869pegase, 16 zones, 6 rounds
    python benchmarks/bench_ray_actor.py --case case1354pegase --zones 8 --rounds 4

Runs the power agents of ``cvxdp run --network CASE --zones N`` (balance objective, non-private LinearizedADMM,
rho = eta = 1, ``evaluate=False``) once serially and once on a ``RayBackend`` (2 actors, Ray forced), timing every
node's ``step`` where it runs: wall time, the CPU time of the calling thread and of the whole process (more than
the thread's would mean threads of BLAS or of the solver working beside it), and the time the thread waited on
the kernel's run queue for a core (Linux ``/proc/.../schedstat``). Per actor block it prints the sums, mean over
rounds 2..T; per run, the CPU seconds of every process on the machine while the run lasted (the actors, the driver,
Ray's own daemons, other work). A block slower in an actor than serially with the same CPU time was waiting for a
core. Both runs must agree bit for bit (checked). The script prints ``uptime`` beside the numbers.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
import warnings

import numpy as np

import cvxdp
from cvxdp.config.build import build_instance, power_case
from cvxdp.run import SerialBackend
from cvxdp.run import ray as ray_backend
from cvxdp.run.backends import method_name

try:
    import ray
except ImportError:  # the script needs the ray extra
    ray = None


def waited() -> float:
    """Seconds this thread has waited on a run queue (0 where /proc/.../schedstat is missing)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9
    except OSError:
        return 0.0


def timed_step(node, args) -> tuple:
    marks = (time.perf_counter(), time.thread_time(), time.process_time(), waited())
    out = node.step(*args)
    now = (time.perf_counter(), time.thread_time(), time.process_time(), waited())
    return out, [b - a for a, b in zip(marks, now)]


class TimedSerial(SerialBackend):
    def call(self, method, args=None, *, round=None):
        if method_name(method) != "step":
            return super().call(method, args, round=round)
        pairs = [timed_step(node, a) for node, a in zip(self.nodes, args)]
        self.times = [*getattr(self, "times", []), [t for _, t in pairs]]
        return [out for out, _ in pairs]


class TimedHost(ray_backend.NodeHost):
    """The actor body, timing each node's step (the reply is the real NodeHost's: warnings, errors, pickling)."""

    def call(self, method, blob):
        if method != "step":
            return super().call(method, blob)
        times = []

        def step(pair):
            out, t = timed_step(*pair)
            times.append(t)
            return out

        args = ray_backend._loads(blob, "the arguments of 'step'")
        reply = self._run(step, list(zip(self.nodes, args)))
        self.times = [*getattr(self, "times", []), times]
        return reply

    def timings(self) -> list:
        return self.times


def cpu_by_process() -> dict[int, tuple[float, str]]:
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{pid}/cmdline") as fh:
                cmd = fh.read().replace("\0", " ").strip()[:80]
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        out[int(pid)] = ((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), cmd)
    return out


def report_cpu(before: dict, after: dict, seconds: float, label: str) -> None:
    rows = sorted(((t - before.get(pid, (0.0, ""))[0], pid, cmd) for pid, (t, cmd) in after.items()), reverse=True)
    print(f"{label}: {seconds:.1f} s; CPU seconds by process (> 0.1 s):")
    for cpu, pid, cmd in rows:
        if cpu > 0.1:
            print(f"  {cpu:7.2f}  {pid:7d}  {cmd}")


def run(agents, backend, rounds: int, label: str) -> cvxdp.Result:
    before, start = cpu_by_process(), time.perf_counter()
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=rounds), seed=0,
                         backend=backend, evaluate=False)
    report_cpu(before, cpu_by_process(), time.perf_counter() - start, label)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="case2869pegase")
    parser.add_argument("--zones", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=6, help="rounds per run (the first is the warm-up)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # "did not reach consensus": a handful of rounds is the point
    agents = build_instance(power_case(args.case, args.zones, objective="balance")).agents
    print("load before:", os.popen("uptime").read().strip())
    serial_backend = TimedSerial()
    serial = run(agents, serial_backend, args.rounds, "serial run")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    ray_backend.NodeHost = TimedHost  # the actors RayBackend starts run this body
    backend = ray_backend.RayBackend(keep_actors=True, min_variables=0)
    remote = run(agents, backend, args.rounds, "Ray run")
    blocks = backend._layout(len(agents), [float(a.layout.size) for a in agents])
    inside = [np.mean(np.array(ray.get(actor.timings.remote())[1:]), axis=0) for actor in backend._idle]
    outside = np.mean(np.array(serial_backend.times[1:]), axis=0)
    backend.shutdown()
    ray.shutdown()
    per = {name: float(r.history["wall_time"].iloc[1:].mean()) * 1e3 for name, r in (("serial", serial),
                                                                                   ("ray", remote))}
    print(f"time per round: serial {per['serial']:.1f} ms, Ray {per['ray']:.1f} ms")
    print("per block, ms per round (wall / thread CPU / process CPU / run-queue wait):")
    for k, (block, times) in enumerate(zip(blocks, inside)):
        s, a = outside[block].sum(axis=0) * 1e3, times.sum(axis=0) * 1e3
        print(f"  actor {k} ({len(block)} nodes)  serial {' / '.join(f'{v:.1f}' for v in s)}   "
              f"actor {' / '.join(f'{v:.1f}' for v in a)}   wall ratio {a[0] / s[0]:.2f}")
    cols = [c for c in serial.history.columns if c not in ("wall_time", "solver_time")]
    print("bit-identical:", bool(serial.history[cols].equals(remote.history[cols])))
    print("load after:", os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
