"""Set-up per agent of many small box agents, and the peak memory of an agent holding a large data matrix.

    python benchmarks/bench_setup.py                      # 1,000 box agents: old path forced vs new, one run
    python benchmarks/bench_setup.py --agents 1000 10000  # also 10,000 (new path only above --legacy-max)
    python benchmarks/bench_setup.py --memory             # peak RSS of the 76 MiB logistic agent (subprocesses)

Set-up: the agents of ``bench_many_agents.py`` (``x`` in the box ``[-1, 1]^3``, a hand-written gradient, a declared
``lipschitz``), non-private LinearizedADMM with eta = 2, one round, ``evaluate=False``; set-up is ``cvxdp.solve``'s
time outside the round (the agents' checks and building the nodes). Each path gets freshly built agents (the
compiled data are cached per agent). The old path is forced in the same process: the projection from CVXPY's
canonical data (``compile_projection(closed_form=False)``), the metrics built with the node, and the curvature
estimated although eta is given (what the node did before issue 37).

Memory: one logistic agent on 100,000 x 100 float64 samples (76 MiB) and a small one, box ``|theta_j| <= 1``,
three LinearizedADMM rounds, in a fresh subprocess each; ``peak`` is the process's high-water mark of resident
memory during ``cvxdp.solve`` (reset with /proc/self/clear_refs after the data are built), ``before`` the resident
memory when it starts. ``gradient=`` declared (the template's) and left out (the Agent's default gradient).

Timings depend on the machine's load: the script prints it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import cvxdp
from cvxdp.families.consensus import node as node_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_many_agents import box_agents  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def old_path():
    """The set-up before issue 37: canonicalize every feasible set, build the metrics and estimate the curvature."""
    compile_projection, lipschitz_constants = node_module.compile_projection, node_module.lipschitz_constants
    init = node_module.ConsensusNode.__init__

    def eager_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.metrics  # noqa: B018 - built with the node, as before

    node_module.compile_projection = functools.partial(compile_projection, closed_form=False)
    node_module.lipschitz_constants = lambda agents, starts, *, private, prefer_declared=False, **kw: (
        lipschitz_constants(agents, starts, private=private, **kw))
    node_module.ConsensusNode.__init__ = eager_init
    try:
        yield
    finally:
        node_module.compile_projection, node_module.lipschitz_constants = compile_projection, lipschitz_constants
        node_module.ConsensusNode.__init__ = init


def setup_seconds(count: int, legacy: bool) -> tuple[float, np.ndarray]:
    agents, _ = box_agents(count)
    with warnings.catch_warnings(), (old_path() if legacy else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=2.0, rounds=1), seed=0,
                             evaluate=False)
        total = time.perf_counter() - start
    return total - float(result.history["wall_time"].sum()), result.solution["x"]


MEMORY_CHILD = r"""
import re, sys, time, warnings
import numpy as np
sys.path.insert(0, {models!r})
import cvxdp
from logistic.binary import binary_agents

def status():
    text = open("/proc/self/status").read()
    return {{k: int(re.search(k + r":\s+(\d+)", text).group(1)) / 1024 for k in ("VmRSS", "VmHWM")}}

rng = np.random.default_rng(0)
n, d = 100_000, 100
X = rng.normal(size=(n, d)); X /= np.linalg.norm(X, axis=1, keepdims=True)
y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
X2 = rng.normal(size=(100, d)); X2 /= np.linalg.norm(X2, axis=1, keepdims=True)
y2 = np.where(rng.normal(size=100) > 0, 1.0, -1.0)
agents, models = binary_agents([(X, y), (X2, y2)], reg=0.1, bound=1.0, total=n + 100)
del X
for agent, model in zip(agents, models):
    agent.lipschitz = model.lipschitz
    if {plain}:
        agent.gradient = agent.value = None
open("/proc/self/clear_refs", "w").write("5")  # reset the high-water mark
before = status()["VmRSS"]
warnings.simplefilter("ignore")
start = time.perf_counter()
cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=2.0, rounds=3), seed=0)
print(before, status()["VmHWM"], time.perf_counter() - start)
"""


def memory(plain: bool) -> tuple[float, float, float]:
    code = MEMORY_CHILD.format(models=str(ROOT / "models"), plain=plain)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    before, peak, seconds = (float(v) for v in out.stdout.split()[-3:])
    return before, peak, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[1000])
    parser.add_argument("--legacy-max", type=int, default=2000, help="largest count the old path is run for")
    parser.add_argument("--memory", action="store_true", help="measure the 76 MiB agent's peak RSS instead")
    args = parser.parse_args()
    print("load:", os.getloadavg(), flush=True)
    if args.memory:
        print(f"{'gradient':>22} {'before MiB':>10} {'peak MiB':>9} {'solve s':>8}")
        for plain in (False, True):
            before, peak, seconds = memory(plain)
            label = "Agent default" if plain else "declared (template)"
            print(f"{label:>22} {before:>10.0f} {peak:>9.0f} {seconds:>8.1f}", flush=True)
    else:
        print(f"{'agents':>7} {'old s':>8} {'new s':>8} {'old ms/agent':>12} {'new ms/agent':>12} {'old/new':>7}")
        for count in args.agents:
            new, x_new = setup_seconds(count, legacy=False)
            if count <= args.legacy_max:
                old, x_old = setup_seconds(count, legacy=True)
                assert np.array_equal(x_old, x_new), "the two set-up paths gave different solutions"
                print(f"{count:>7} {old:>8.1f} {new:>8.1f} {1e3 * old / count:>12.2f} {1e3 * new / count:>12.2f} "
                      f"{old / new:>7.1f}", flush=True)
            else:
                print(f"{count:>7} {'-':>8} {new:>8.1f} {'-':>12} {1e3 * new / count:>12.2f} {'-':>7}", flush=True)
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
