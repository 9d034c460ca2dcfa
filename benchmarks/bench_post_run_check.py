"""The post-run check of the consensus solution (is it inside every agent's set?), three ways, in one run.

After every run cvxdp measures each agent's distance from the consensus values of its shared keys to its
feasible set (:func:`cvxdp.model.central.solution_violation`). On the solution of a short run (outside the sets):

(a) cvxdp: a projection on the agent's compiled ``W_p`` -- the data its worker compiled, so nothing is compiled
    again in the serial backend (a clip for a box, else a live Clarabel solve);
(a') the same on fresh agents (nothing cached: one compile per agent, as in the main process of a Ray run);
(b) the previous path: a CVXPY problem ``min ||u[idx] - target||^2 s.t. W_p`` built and solved per agent
    (Clarabel, then ECOS; NaN when both fail).

Rows: FEMNIST (the shared LEAF sample, 10 writers, box-constrained softmax; skipped without the data),
case14 and case118 in 3 zones (cost objective, exact ADMM); ``--large`` adds case1354pegase in 8 zones.

    python benchmarks/bench_post_run_check.py [--large]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.config.build import build_instance, load_case, power_case
from cvxdp.model import solution_violation

REPO = Path(__file__).resolve().parents[1]
FEMNIST = REPO.parent / "shared" / "data" / "femnist_leaf"


def rebuilt_distance(agent: cvxdp.Agent, solution: dict) -> float:
    """(b): the distance as a CVXPY problem built and solved for this one call."""
    keys = sorted(agent.layout.shared)
    idx = np.concatenate([agent.layout.shared[k] for k in keys])
    target = np.concatenate([np.ravel(solution[k]) for k in keys])
    u = agent.u_expression()
    prob = cp.Problem(cp.Minimize(cp.sum_squares(u[idx] - target)), agent.constraints)
    for solver in (cp.CLARABEL, cp.ECOS):  # the previous chain; NaN when both fail
        try:
            prob.solve(solver=solver)
        except cp.SolverError:
            continue
        if prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and prob.value is not None:
            return math.sqrt(max(prob.value, 0.0))
    return math.nan


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def row(label: str, build, algorithm) -> dict:
    agents = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cvxdp.solve(agents, algorithm=algorithm, seed=0)  # compiles each agent once (serial backend)
        compiled, t_a = timed(lambda: solution_violation(agents, result.solution, warn=False))
        fresh = build()
        cold, t_cold = timed(lambda: solution_violation(fresh, result.solution, warn=False))
        rebuilt, t_b = timed(lambda: {a.name: rebuilt_distance(a, result.solution) for a in build()})
    both = [k for k in rebuilt if math.isfinite(rebuilt[k]) and math.isfinite(compiled["per_agent"][k])]
    gap = max((abs(compiled["per_agent"][k] - rebuilt[k]) for k in both), default=math.nan)
    gap_cold = max(abs(compiled["per_agent"][k] - cold["per_agent"][k]) for k in rebuilt)
    unsolved = {"compiled": sum(not math.isfinite(v) for v in compiled["per_agent"].values()),
                "rebuilt": sum(not math.isfinite(v) for v in rebuilt.values())}
    out = {"row": label, "agents": len(agents), "largest_distance": compiled["max"], "compiled_s": t_a,
           "fresh_s": t_cold, "rebuilt_s": t_b, "rebuilt_over_compiled": t_b / t_a, "rebuilt_over_fresh": t_b / t_cold,
           "largest_difference": max(gap, gap_cold), "unsolved": unsolved}
    print(f"{label:>34}: (a) {t_a:7.3f} s  (a') {t_cold:7.3f} s  (b) {t_b:7.3f} s   (b)/(a) = "
          f"{out['rebuilt_over_compiled']:6.1f}x  (b)/(a') = {out['rebuilt_over_fresh']:5.2f}x   largest distance "
          f"{compiled['max']:.3g}, largest difference {out['largest_difference']:.1e}, no answer (a) {unsolved['compiled']} "
          f"(b) {unsolved['rebuilt']} of {len(agents)}", flush=True)
    return out


def power(network: str, zones: int):
    def build():
        case = power_case(network, zones, objective="cost") if not network.endswith(".toml") else load_case(
            REPO / "cases" / network)
        case.model["objective"] = "cost"
        case.model.pop("penalty", None)
        return build_instance(case).agents
    return build


def femnist():
    case = load_case(REPO / "cases" / "femnist_fl.toml")
    case.model["path"] = str(FEMNIST)
    return lambda: build_instance(case).agents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="add case1354pegase in 8 automatic zones")
    args = parser.parse_args()
    print("post-run check of the consensus solution; one call each, on the solution of a short run")
    rows = []
    if FEMNIST.is_dir():
        rows.append(row("FEMNIST, 10 writers (box)", femnist(),
                        cvxdp.LinearizedADMM(rho=0.002, eta=0.05, rounds=3)))
    else:
        print(f"  (FEMNIST skipped: {FEMNIST} is not present)")
    rows.append(row("case14, 3 zones (cost, ADMM)", power("case14_3zones.toml", 3), cvxdp.ADMM(rounds=3)))
    rows.append(row("case118, 3 zones (cost, ADMM)", power("case118_3zones.toml", 3), cvxdp.ADMM(rounds=3)))
    if args.large:
        rows.append(row("case1354pegase, 8 zones (cost, ADMM)", power("case1354pegase", 8), cvxdp.ADMM(rounds=2)))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
