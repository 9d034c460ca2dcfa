"""Seconds per round of federated multiclass logistic regression: cvxdp.solve vs a plain numpy loop.

MNIST-sized synthetic data (default 60,000 x 784, 10 classes, 10 IID agents, box |theta| <= 1): the same
linearized-ADMM update with the closed-form clip (SPEC §2), once through ``cvxdp.solve`` (non-private,
serial backend) and once as a bare numpy loop over the same hand-coded gradients. The goal is a ratio
within 1.2x.

    python benchmarks/bench_fl.py [--rounds 20] [--samples 60000] [--features 784] [--classes 10]
                                  [--agents 10] [--local-updates 1] [--repeats 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import cvxdp
from cvxdp_models.logistic.data import split_iid
from cvxdp_models.logistic.multiclass import MulticlassLogistic, multiclass_agents


def synthetic(samples: int, features: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of unit norm, labels from a random linear softmax model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(samples, features))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    W = rng.normal(size=(features, classes)) * 3.0
    Z = X @ W + rng.gumbel(size=(samples, classes))
    return X, np.argmax(Z, axis=1)


def numpy_ladmm(models: list[MulticlassLogistic], *, rho: float, eta: float, rounds: int, J: int,
                bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The reference loop: global mean, J linearized clip updates per agent, average, dual update.

    Returns the final global vector (``mean(z - lambda/rho)`` after the last round, as ``cvxdp.solve``
    reports it) and the seconds of every round.
    """
    P, n = len(models), int(np.prod(models[0].shape))
    z, lam = np.zeros((P, n)), np.zeros((P, n))
    c = eta + rho
    times = np.zeros(rounds)
    for t in range(rounds):
        t0 = time.perf_counter()
        w = np.mean(z - lam / rho, axis=0)
        for p, m in enumerate(models):
            u, acc = z[p], np.zeros(n)
            anchor = rho * w + lam[p]
            for _ in range(J):
                u = np.clip((eta * u + anchor - m.gradient(u)) / c, -bound, bound)
                acc += u
            z[p] = acc / J
        lam += rho * (w - z)
        times[t] = time.perf_counter() - t0
    return np.mean(z - lam / rho, axis=0), times


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--samples", type=int, default=60_000)
    ap.add_argument("--features", type=int, default=784)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--local-updates", type=int, default=1)
    ap.add_argument("--bound", type=float, default=1.0)
    ap.add_argument("--rho", type=float, default=0.01)
    ap.add_argument("--eta", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2, help="alternating repetitions of both loops")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    X, y = synthetic(args.samples, args.features, args.classes, args.seed)
    parts = split_iid(X, y, args.agents, np.random.default_rng(args.seed))
    del X
    t0 = time.perf_counter()
    agents, models = multiclass_agents(parts, classes=args.classes, bound=args.bound, clip=1.0)
    build_s = time.perf_counter() - t0
    del parts

    algo = cvxdp.LinearizedADMM(rho=args.rho, eta=args.eta, local_updates=args.local_updates, rounds=args.rounds)
    numpy_times, engine_times, totals = [], [], []
    for _ in range(args.repeats):  # alternate the two so that both see the same machine load
        w_ref, times = numpy_ladmm(models, rho=args.rho, eta=args.eta, rounds=args.rounds, J=args.local_updates,
                                   bound=args.bound)
        numpy_times.append(times)
        t0 = time.perf_counter()
        result = cvxdp.solve(agents, algorithm=algo, privacy=None, accountant="basic", seed=args.seed)
        totals.append(time.perf_counter() - t0)
        engine_times.append(result.history["wall_time"].to_numpy())  # seconds of each round
    numpy_s = float(np.median(np.concatenate(numpy_times)))
    engine_s = float(np.median(np.concatenate(engine_times)))
    total_s = float(np.median(totals))
    # the same iterates: both loops start from 0 with the same constants
    diff = float(np.max(np.abs(np.asarray(result.solution["theta"]) - w_ref)))
    out = {"samples": args.samples, "features": args.features, "classes": args.classes, "agents": args.agents,
           "local_updates": args.local_updates, "rounds": args.rounds, "build_s": build_s,
           "numpy_s_per_round": numpy_s, "cvxdp_s_per_round": engine_s,
           "cvxdp_total_s_per_round": total_s / args.rounds, "ratio": engine_s / numpy_s,
           "ratio_total": total_s / args.rounds / numpy_s, "max_abs_diff_vs_numpy": diff}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.samples} x {args.features}, {args.classes} classes, {args.agents} agents, J = "
              f"{args.local_updates}, {args.rounds} rounds (agents built in {build_s:.1f} s)")
        print(f"  numpy loop     {numpy_s * 1e3:8.1f} ms / round (median)")
        print(f"  cvxdp.solve    {engine_s * 1e3:8.1f} ms / round (median)   "
              f"{total_s / args.rounds * 1e3:8.1f} ms / round incl. setup")
        print(f"  ratio          {out['ratio']:8.2f} x   (incl. setup {out['ratio_total']:.2f} x; goal <= 1.2)")
        print(f"  max |w_cvxdp - w_numpy| = {diff:.2e}")
    return out


if __name__ == "__main__":
    main()
