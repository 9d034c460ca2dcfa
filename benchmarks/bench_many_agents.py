"""Per-round cost of the consensus loop with many small agents: private LADMM with and without the PLD budget guard,
against a plain numpy loop doing the same arithmetic.

    python benchmarks/bench_many_agents.py                  # 100 and 1,000 agents, 10 rounds
    python benchmarks/bench_many_agents.py --agents 2000 --rounds 5

Each agent fits ``x`` in the box ``[-1, 1]^d`` (d = 3, shared) to 10 private samples (least squares, its gradient
written by hand): a closed-form projection, so the round is bookkeeping plus numpy. Columns (seconds per round,
mean of rounds 2..T, ``evaluate=False``: no private evaluation):

- ``guard``: ObjG (Gaussian, per-step epsilon 1, delta 1e-6) with ``budget=(1e6, 1e-4)`` (the guard runs every round
  and never stops the run), the PLD accountant;
- ``no guard``: the same without a budget; ``guard/no guard``: the guard's cost;
- ``numpy``: a Python loop over the agents doing the same arithmetic per round (the gradient, Gaussian noise, the
  linearized prox step and the clip, J = 1; the global average and the dual update), no accounting, no checks;
  ``guard/numpy``: what the engine costs over it;
- ``set-up s``: ``cvxdp.solve``'s time outside the rounds (the checks and the nodes; a box declared as such is a clip
  built without CVXPY canonicalization, see ``bench_setup.py``).

Timings depend on the machine's load: the script prints it.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import cvxpy as cp
import numpy as np

import cvxdp

DIM, SAMPLES = 3, 10


def _gradient(x, *, A, b):
    return A.T @ (A @ x - b) / SAMPLES


def box_agents(count: int, seed: int = 0) -> tuple[list[cvxdp.Agent], list[tuple[np.ndarray, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=DIM)
    agents, data = [], []
    for p in range(count):
        A = rng.normal(size=(SAMPLES, DIM))
        A /= np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1.0)
        b = A @ truth + 0.1 * rng.normal(size=SAMPLES)
        x = cp.Variable(DIM, name=f"x{p}")
        objective = cp.sum_squares(A @ x - b) / (2 * SAMPLES)
        agents.append(cvxdp.Agent(f"a{p}", objective, [x <= 1, x >= -1], shared={"x": x},
                                  gradient=lambda v, A=A, b=b: _gradient(v, A=A, b=b),
                                  sensitivity=cvxdp.Sensitivity(l2=1.0 / SAMPLES, l1=np.sqrt(DIM) / SAMPLES,
                                                                relation="replace one b_i by a value within 1"),
                                  lipschitz=1.0))
        data.append((A, b))
    return agents, data


def numpy_loop(data, rounds: int, rho: float, eta: float, sigma: float, seed: int = 0) -> float:
    """Seconds per round of the same arithmetic in plain numpy (rounds 2..T)."""
    rng = np.random.default_rng(seed)
    P = len(data)
    z, lam, w = np.zeros((P, DIM)), np.zeros((P, DIM)), np.zeros(DIM)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for p, (A, b) in enumerate(data):
            g = _gradient(z[p], A=A, b=b) + rng.normal(0.0, sigma, DIM)
            v = (eta * z[p] + rho * w + lam[p] - g) / (eta + rho)
            z[p] = np.clip(v, -1.0, 1.0)
        w = (z - lam / rho).mean(axis=0)
        for p in range(P):
            lam[p] += rho * (w - z[p])
        times.append(time.perf_counter() - start)
    return float(np.mean(times[1:]))


def engine(agents, rounds: int, budget) -> tuple[float, float]:
    privacy = cvxdp.ObjectivePerturbation(epsilon=1.0, delta=1e-6, noise="gaussian")
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=2.0, rounds=rounds),
                             privacy=privacy, budget=budget, seed=0, evaluate=False)
    total = time.perf_counter() - start
    assert len(result.history) == rounds, result.stop_reason
    walls = result.history["wall_time"]
    return float(walls.iloc[1:].mean()), total - float(walls.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print("load:", os.getloadavg(), flush=True)
    header = f"{'agents':>7} {'guard s':>9} {'no guard s':>10} {'numpy s':>9} {'guard/no guard':>14} " \
             f"{'guard/numpy':>11} {'set-up s':>9}"
    print(header)
    for count in args.agents:
        agents, data = box_agents(count)
        guarded, setup = engine(agents, args.rounds, (1e6, 1e-4))
        plain, _ = engine(agents, args.rounds, None)
        sigma = cvxdp.ObjectivePerturbation(epsilon=1.0, delta=1e-6, noise="gaussian").noise_plan(
            agents[0], min_weight=2.0, separable=True, steps=args.rounds, accountant="pld").scale
        raw = numpy_loop(data, args.rounds, 1.0, 2.0, sigma)
        print(f"{count:>7} {guarded:>9.4f} {plain:>10.4f} {raw:>9.4f} {guarded / plain:>14.2f} "
              f"{guarded / raw:>11.1f} {setup:>9.1f}", flush=True)
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
