"""Gradients of agents declared without ``gradient=`` (issue 37 item 1), three ways per call, in one run:

(a) a hand-written numpy gradient (what ``gradient=`` would hold),
(b) cvxdp's compiled gradient (:mod:`cvxdp.model.gradients`: ``H u + c`` for a quadratic objective, a reverse-mode
    numpy tape otherwise), through ``Agent.grad``,
(c) CVXPY's ``Expression.grad`` (the previous default), through the same layout,

on a custom quadratic agent (a 3-region, 6-hour dispatch with ramp limits, exports shared) and on a logistic agent.
Goal: (b) within 3x of (a). Then 10 private LinearizedADMM rounds of 3 dispatch agents, with each agent's gradient
from (c) ("before"), (b) ("after") and (a) (``gradient=``).

    python benchmarks/bench_gradients.py [--calls 2000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.model.agent import cvxpy_gradient


def dispatch_agent(name: str, seed: int, regions: int = 3, hours: int = 6):
    """Quadratic generation cost per region and hour, ramp limits, and a quadratic penalty tying the hourly
    generation minus load to the shared exports ``e``. Returns the agent and its hand-written gradient."""
    rng = np.random.default_rng(seed)
    g, e = cp.Variable((regions, hours), name="g"), cp.Variable(hours, name="e")
    a = cp.Parameter((regions, hours), nonneg=True, value=rng.uniform(0.5, 1.5, (regions, hours)))
    b = cp.Parameter((regions, hours), value=rng.uniform(1.0, 3.0, (regions, hours)))
    load = cp.Parameter(hours, value=rng.uniform(1.0, 2.0, hours))
    c = 10.0
    objective = (cp.sum(cp.multiply(a, cp.square(g)) + cp.multiply(b, g))
                 + c * cp.sum_squares(cp.sum(g, axis=0) - load - e))
    constraints = [g >= 0, g <= 2, cp.abs(g[:, 1:] - g[:, :-1]) <= 0.3, e <= 1, e >= -1]
    size = regions * hours

    def hand(u: np.ndarray) -> np.ndarray:
        G = u[:size].reshape((regions, hours), order="F")
        r = G.sum(axis=0) - load.value - u[size:]
        dG = 2.0 * a.value * G + b.value + 2.0 * c * r
        return np.concatenate([dG.ravel(order="F"), -2.0 * c * r])

    agent = cvxdp.Agent(name, objective, constraints, shared={"e": e})
    assert [v.name() for v in agent.layout.variables] == ["g", "e"]
    return agent, hand


def logistic_agent(n: int = 200, d: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    theta = cp.Variable(d)
    lam = 1e-2
    objective = cp.sum(cp.logistic(cp.multiply(-y, X @ theta))) / n + lam / 2 * cp.sum_squares(theta)

    def hand(u: np.ndarray) -> np.ndarray:
        m = -y * (X @ u)
        return X.T @ (-y / (1.0 + np.exp(-m))) / n + lam * u

    return cvxdp.Agent("logistic", objective, [cp.abs(theta) <= 2], shared={"theta": theta}), hand


def per_call(fn, u: np.ndarray, calls: int, batches: int = 5) -> float:
    """The fastest of ``batches`` batches of ``calls`` calls, per call (the machine is shared)."""
    fn(u)
    fn(u)  # the quadratic path builds H on its second call with the same data
    best = float("inf")
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn(u)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def gradient_table(calls: int) -> list[dict]:
    rows = []
    for label, (agent, hand) in (("dispatch 3x6 (quadratic)", dispatch_agent("dispatch", 0)),
                                 ("logistic n=200 d=10", logistic_agent())):
        u = np.random.default_rng(1).uniform(0.0, 1.0, agent.layout.size)
        ref = cvxpy_gradient(agent, u)
        err = float(np.max(np.abs(agent.grad(u) - ref)) / (1.0 + np.max(np.abs(ref))))
        err_hand = float(np.max(np.abs(hand(u) - ref)) / (1.0 + np.max(np.abs(ref))))
        t_hand = per_call(hand, u, calls)
        t_fast = per_call(agent.grad, u, calls)
        t_cvxpy = per_call(partial(cvxpy_gradient, agent), u, max(5, calls // 200), batches=1)
        rows.append({"agent": label, "path": agent.compiled_gradient.kind, "hand_us": t_hand * 1e6,
                     "fast_us": t_fast * 1e6, "cvxpy_us": t_cvxpy * 1e6, "fast_over_hand": t_fast / t_hand,
                     "cvxpy_over_fast": t_cvxpy / t_fast, "rel_err_fast": err, "rel_err_hand": err_hand})
    return rows


def ladmm_rounds(rounds: int) -> dict:
    """``rounds`` private LinearizedADMM rounds of 3 dispatch agents, per gradient source."""
    out = {}
    for mode in ("cvxpy", "compiled", "hand"):
        agents = []
        for p in range(3):
            agent, hand = dispatch_agent(f"zone{p}", seed=p)
            agent.sensitivity = cvxdp.Sensitivity(l2=0.1, relation="benchmark only")
            if mode == "cvxpy":
                agent.__dict__["compiled_gradient"] = None  # the previous default: Expression.grad every call
            elif mode == "hand":
                agent.gradient = hand
            agents.append(agent)
        start = time.perf_counter()
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=60.0, rounds=rounds),
                             privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=0)
        out[mode] = {"seconds": time.perf_counter() - start, "objective": float(result.history["objective"].iloc[-1])}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    rows = gradient_table(args.calls)
    print(f"{'agent':28s} {'path':9s} {'hand us':>9s} {'fast us':>9s} {'cvxpy us':>10s} {'fast/hand':>9s} "
          f"{'cvxpy/fast':>10s}")
    for r in rows:
        print(f"{r['agent']:28s} {r['path']:9s} {r['hand_us']:9.1f} {r['fast_us']:9.1f} {r['cvxpy_us']:10.1f} "
              f"{r['fast_over_hand']:9.2f} {r['cvxpy_over_fast']:10.0f}")
    runs = ladmm_rounds(args.rounds)
    print(f"\n{args.rounds} private LinearizedADMM rounds, 3 dispatch agents (J=1, Clarabel projections):")
    for mode, r in runs.items():
        print(f"  gradient from {mode:9s}: {r['seconds']:7.2f} s   final objective {r['objective']:.6g}")
    print(f"  before/after: {runs['cvxpy']['seconds'] / runs['compiled']['seconds']:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"gradients": rows, "ladmm": runs}))


if __name__ == "__main__":
    main()
