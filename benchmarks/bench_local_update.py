"""Time per local update on an SOC set of ~500 variables, three ways, in one run.

(a) cvxdp's compiled path (canonicalized once; per call only q is written into a live Clarabel solver),
(b) rebuilding and solving the CVXPY problem every call (what a naive loop does),
(c) the raw solver on the same canonical data: a fresh ``clarabel.DefaultSolver(P, q, A, b, cones)`` per call.

Goals (issue 2): (a) at least 8x faster than (b), and within 1.3x of (c).

Then the exact ADMM local step (prox of f_p over W_p, issue 12), on the same SOC agent and on power-flow zones
(case14 and case118 in 3 zones, cost objective), three ways on the same targets and the same rho:

(d) cvxdp's compiled prox (:class:`cvxdp.model.local_solver.ProxSolver`: canonical data compiled once, a live
    Clarabel solver set up once per rho that only receives the new linear term),
(e) a live raw Clarabel solver on the same canonical data that only receives ``update(q=...)`` (no cvxdp code),
(f) the previous path: a DPP CVXPY problem solved with ``cp.Problem.solve`` every call.

Goal (issue 12): (d)/(e) <= 1.1x.

Finally the exact-ADMM set-up on case118 (3 zones, cost objective), on fresh agents, in the same run:
(g) the previous compile path — ``W_p`` and ``f_p`` canonicalized apart and merged (two compiles per agent) —
vs (h) one canonicalization of ``min f_p s.t. W_p`` whose ``W_p`` rows are split out of the same data
(:func:`cvxdp.model.compiled.prox_data`), with the compile counts and the whole worker set-up (compile, feasibility
and boundedness verdict, projection, initial point) of (h).

    python benchmarks/bench_local_update.py [--n 500] [--calls 30] [--no-power]
"""

from __future__ import annotations

import argparse
import json
import time

import clarabel
import cvxpy as cp
import numpy as np
import scipy.sparse as sp

import cvxdp
from cvxdp.model import ProxSolver, compile_projection
from cvxdp.model.local_solver import ConicProjection, clarabel_settings


def soc_agent(n: int, seed: int = 0) -> cvxdp.Agent:
    """n variables: a box, one SOC constraint per block of 10, and a few linear constraints."""
    rng = np.random.default_rng(seed)
    x = cp.Variable(n)
    blocks = [cp.norm(x[i:i + 10], 2) <= 1.0 for i in range(0, n, 10)]
    G = rng.normal(size=(5, n))
    cons = [x <= 0.5, x >= -0.5, G @ x <= 1.0, cp.sum(x[: n // 2]) == 0.2] + blocks
    return cvxdp.Agent("bench", cp.sum_squares(x), cons, shared={"x": x[: n // 5]})


def time_calls(fn, inputs) -> float:
    start = time.perf_counter()
    for v, c in inputs:
        fn(v, c)
    return (time.perf_counter() - start) / len(inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--no-power", action="store_true", help="skip the power-flow zones (needs pandapower)")
    args = parser.parse_args()

    agent = soc_agent(args.n)
    rng = np.random.default_rng(1)
    mask = agent.layout.shared_mask
    c = 2.0 + 1.0 * mask  # eta = 2, rho = 1 on shared coordinates
    inputs = [(rng.normal(size=args.n), c) for _ in range(args.calls)]

    proj = compile_projection(agent)
    assert isinstance(proj, ConicProjection)
    proj.project(*inputs[0])  # first call builds the solver

    def compiled(v, c):
        return proj.project(v, c)[0]

    def rebuilt(v, c):
        u = cp.Variable(args.n)
        prob = cp.Problem(cp.Minimize(0.5 * cp.sum(cp.multiply(c, cp.square(u - v)))),
                          [con for con in _rebuild_constraints(agent, u)])
        prob.solve(solver=cp.CLARABEL)
        return u.value

    settings = proj.settings
    P = proj._P(c)

    def raw(v, c):
        q = np.zeros(proj.n_x)
        q[proj.cols] = -c * v
        return np.asarray(clarabel.DefaultSolver(P, q, proj.A, proj.b, proj.cones, settings).solve().x)[proj.cols]

    # same answers
    for v, cc in inputs[:3]:
        gap = np.max(np.abs(compiled(v, cc) - raw(v, cc)))
        assert gap < 1e-4, gap  # both within the solver tolerance of the same optimum
        assert np.max(np.abs(compiled(v, cc) - rebuilt(v, cc))) < 1e-4

    t_compiled = time_calls(compiled, inputs)
    t_rebuilt = time_calls(rebuilt, inputs[: max(5, args.calls // 3)])
    t_raw = time_calls(raw, inputs)
    report = {"n": args.n, "calls": args.calls, "compiled_ms": 1e3 * t_compiled, "rebuilt_ms": 1e3 * t_rebuilt,
              "raw_solver_ms": 1e3 * t_raw, "rebuilt_over_compiled": t_rebuilt / t_compiled,
              "compiled_over_raw": t_compiled / t_raw}
    print(f"local update on an SOC set of {args.n} variables ({args.calls} calls)")
    print(f"  (a) compiled path   {report['compiled_ms']:8.2f} ms")
    print(f"  (b) rebuilt CVXPY   {report['rebuilt_ms']:8.2f} ms   (b)/(a) = {report['rebuilt_over_compiled']:.1f}x "
          "(goal >= 8x)")
    print(f"  (c) raw Clarabel    {report['raw_solver_ms']:8.2f} ms   (a)/(c) = {report['compiled_over_raw']:.2f}x "
          "(goal <= 1.3x)")
    report["prox"] = [bench_prox("soc", agent, args.calls)]
    if not args.no_power:
        report["prox"] += power_prox(args.calls)
    print("exact ADMM local step (prox), same targets and rho; median ms per call (interleaved), "
          "median of per-target ratios")
    for r in report["prox"]:
        print(f"  {r['agent']:>16}: (d) compiled {r['compiled_ms']:7.2f}  (e) live raw Clarabel {r['raw_ms']:7.2f}  "
              f"(f) cp.Problem {r['cvxpy_ms']:7.2f}   (d)/(e) = {r['compiled_over_raw']:.3f}x (goal <= 1.1x)  "
              f"(f)/(d) = {r['cvxpy_over_compiled']:.2f}x")
    if not args.no_power:
        report["setup"] = bench_setup("case118")
        r = report["setup"]
        print(f"exact-ADMM set-up on {r['case']} ({r['agents']} zones, cost), fresh agents")
        print(f"  (g) W_p and f_p compiled apart + merge: {r['old_compiles']} compiles, {r['old_s']:.3f} s")
        print(f"  (h) one compile + split:                {r['new_compiles']} compiles, {r['new_s']:.3f} s   "
              f"(g)/(h) = {r['old_s'] / r['new_s']:.2f}x")
        print(f"  (h) whole worker set-up (compile, verdict, projection, start): {r['worker_setup_s']:.3f} s, "
              f"{r['worker_compiles']} compiles")
    print(json.dumps(report))


def bench_setup(case: str) -> dict:
    """(g) vs (h) above: compile time and count of the exact-ADMM data on fresh agents of ``case``."""
    from cvxdp.families.consensus.node import ConsensusNode
    from cvxdp.model import compiled

    count = compiled.COMPILE_COUNT
    old_agents, new_agents, worker_agents = (_power_instance(case).agents for _ in range(3))
    n0, start = count["n"], time.perf_counter()
    for agent in old_agents:
        compiled.merge(compiled.constraint_data(agent), compiled.objective_data(agent))
    old_s, old_n = time.perf_counter() - start, count["n"] - n0
    n0, start = count["n"], time.perf_counter()
    for agent in new_agents:
        compiled.prox_data(agent)
        compiled.prox_constraint_data(agent)
    new_s, new_n = time.perf_counter() - start, count["n"] - n0
    algorithm = cvxdp.ADMM(rho=1.0, rounds=1)
    seeds = np.random.SeedSequence(0).spawn(len(worker_agents))
    n0, start = count["n"], time.perf_counter()
    for agent, seed in zip(worker_agents, seeds):
        agent.check()
        ConsensusNode(agent, seed, algorithm)
    worker_s, worker_n = time.perf_counter() - start, count["n"] - n0
    return {"case": case, "agents": len(new_agents), "old_compiles": old_n, "old_s": old_s, "new_compiles": new_n,
            "new_s": new_s, "worker_setup_s": worker_s, "worker_compiles": worker_n}


def bench_prox(label: str, agent: cvxdp.Agent, calls: int, rho: float = 1.0) -> dict:
    """Time (d), (e), (f) above on ``calls`` random targets for one agent."""
    rng = np.random.default_rng(2)
    targets = [0.3 * rng.normal(size=agent.layout.shared_indices.size) for _ in range(calls)]
    prox = ProxSolver(agent)
    assert prox.path == "compiled"
    old = ProxSolver(agent, compiled=False)
    d = prox.data
    scols = d.cols[agent.layout.shared_indices]
    diag = np.zeros(d.n_x)
    diag[scols] = rho
    P = sp.triu(d.P + sp.diags(diag), format="csc")
    raw_solver = clarabel.DefaultSolver(P, d.q, d.A, d.b, d.cones(), clarabel_settings())  # set up as ProxSolver is

    def raw(t):
        q = d.q.copy()
        q[scols] -= rho * t
        raw_solver.update(q=q)
        return np.asarray(raw_solver.solve().x)[d.cols]

    sidx = agent.layout.shared_indices
    for t in targets[:3]:  # same optimum (objective values; the minimizer need not be unique)
        f1, f2 = (agent.objective_value(u) + rho / 2 * np.sum((u[sidx] - t) ** 2) for u in (prox.solve(t, rho)[0], raw(t)))
        assert abs(f1 - f2) <= 1e-6 * max(1.0, abs(f2)), (f1, f2)
        old.solve(t, rho)
    # interleaved per target, median over targets: the three paths see the same machine load and caches
    times: dict[str, list[float]] = {"d": [], "e": [], "f": []}
    calls = list({"d": lambda t: prox.solve(t, rho), "e": raw, "f": lambda t: old.solve(t, rho)}.items())
    for i, t in enumerate(targets):
        for key, fn in calls[i % 3:] + calls[:i % 3]:  # rotate the order: none always runs after CVXPY
            start = time.perf_counter()
            fn(t)
            times[key].append(time.perf_counter() - start)
    t_compiled, t_raw, t_cvxpy = (float(np.median(times[k])) for k in "def")
    d, e, f = (np.asarray(times[k]) for k in "def")
    # ratios: median of the per-target ratios (paired, so a load change between targets cancels out)
    return {"agent": label, "size": agent.layout.size, "compiled_ms": 1e3 * t_compiled, "raw_ms": 1e3 * t_raw,
            "cvxpy_ms": 1e3 * t_cvxpy, "compiled_over_raw": float(np.median(d / e)),
            "cvxpy_over_compiled": float(np.median(f / d))}


def power_prox(calls: int) -> list[dict]:
    """The prox benchmark on every zone of case14 and case118 (3 zones, cost objective)."""
    rows = []
    for case in ("case14", "case118"):
        inst = _power_instance(case)
        for agent in inst.agents:
            agent.check()
            rows.append(bench_prox(f"{case}/{agent.name}", agent, calls))
    return rows


def _power_instance(case: str):
    from pathlib import Path

    from cvxdp.config.build import build_instance, load_case

    path = Path(__file__).resolve().parents[1] / "cases" / f"{case}_3zones.toml"
    case = load_case(path)
    case.model["objective"] = "cost"
    case.model.pop("penalty", None)  # exact balance, as `cvxdp central --objective cost`
    return build_instance(case)


def _rebuild_constraints(agent: cvxdp.Agent, u: cp.Variable) -> list:
    """The agent's constraints rewritten over a fresh variable (what rebuilding from scratch costs)."""
    x = agent.layout.variables[0]
    n = x.size
    rng = np.random.default_rng(0)
    G = rng.normal(size=(5, n))
    return [u <= 0.5, u >= -0.5, G @ u <= 1.0, cp.sum(u[: n // 2]) == 0.2] + \
        [cp.norm(u[i:i + 10], 2) <= 1.0 for i in range(0, n, 10)]


if __name__ == "__main__":
    main()
