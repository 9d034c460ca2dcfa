"""Seconds per round of federated box-constrained multiclass logistic regression, all loops in one run.

MNIST-sized synthetic data (default 60,000 x 784, 10 classes, 10 IID agents, box |theta| <= 1), the same
linearized-ADMM round (J local updates with the closed-form clip, SPEC §2) timed as:

- ``authors``: the authors' published closed-form round, re-implemented here with the same structure and
  array operations (APPFL/DPFL-IADMM-Classification, ``Models.py``: ``First_Block_Problem_ClosedForm`` and
  ``Proximal_Second_Block_Problem_ClosedForm``, non-private; ``Functions.py``: ``calculate_hypothesis``,
  ``calculate_gradient``): per-entry Python loops for the consensus and the clip, a per-row softmax
  normalisation and a per-sample one-hot encoding every round. It is slow, so it runs ``--authors-rounds``.
- ``authors-vectorised``: the later vectorised release of the same code (minseok-ryu/DP-IADMM-Multiclass-
  Logistic, ``src/Models.py``, ObjP non-private, CPU numpy): whole-array updates, two passes over the data
  per local update, one-hot rebuilt every round.
- ``numpy``: a bare numpy loop over this package's own hand-coded gradient (``MulticlassLogistic.gradient``).
- ``cvxdp (before)``: ``cvxdp.solve`` with the previous model evaluation (float64, separate products for
  the value and the gradient: two passes over the data per round).
- ``cvxdp float64`` / ``cvxdp float32``: ``cvxdp.solve`` with the fused one-pass value and gradient
  (:func:`cvxdp_models.logistic.multiclass.value_and_gradient`) in each precision.

The loops alternate (``--repeats``) so that all see the same machine load. Times are medians of per-round
wall times; cvxdp's are its history's ``wall_time`` (the whole round: broadcast, local steps, metrics,
aggregation, dual update). Run with one BLAS thread (``OPENBLAS_NUM_THREADS=1``) for stable ratios.

    python benchmarks/bench_fl.py [--rounds 20] [--authors-rounds 3] [--samples 60000] [--features 784]
                                  [--classes 10] [--agents 10] [--local-updates 1] [--repeats 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import cvxdp
from cvxdp_models.logistic.data import split_iid
from cvxdp_models.logistic.multiclass import (
    MulticlassLogistic,
    multiclass_agents,
)


def synthetic(samples: int, features: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of unit norm, labels from a random linear softmax model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(samples, features))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    W = rng.normal(size=(features, classes)) * 3.0
    Z = X @ W + rng.gumbel(size=(samples, classes))
    return X, np.argmax(Z, axis=1)


# --------------------------------------------------------------------------- reference loops
def _authors_state(parts, classes: int, rounds: int):
    """Features, agents, the global W, local Z_p, duals Lambda_p (all zero, as the authors start) and a timer."""
    d, P = parts[0][0].shape[1], len(parts)
    return d, P, np.zeros((d, classes)), np.zeros((P, d, classes)), np.zeros((P, d, classes)), np.zeros(rounds)


def authors_loop(parts, *, total: int, classes: int, rho: float, eta: float, rounds: int, bound: float,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The authors' closed-form round (non-private), structure and operations as published.

    Their ``eta`` is a step: the prox weight is ``1/eta``; here the prox weight is ``eta`` as in cvxdp.
    Returns the final consensus ``W`` (flat, column-major) and the seconds of every round.
    """
    d, P, W, Zs, Lam, times = _authors_state(parts, classes, rounds)
    for t in range(rounds):
        t0 = time.perf_counter()
        for j in range(d):  # first block: consensus entry by entry, clipped to the box
            for k in range(classes):
                m = 0.0
                for p in range(P):
                    m += Zs[p][j][k] - Lam[p][j][k] / rho
                W[j][k] = min(max(m / P, -bound), bound)
        for p, (X, y) in enumerate(parts):  # second block: one linearized step per agent
            E = np.exp(X @ Zs[p])
            H = np.array([row / np.sum(row) for row in E])  # per-row normalisation
            H = np.clip(H, 1e-9, 1.0)
            Y = np.zeros((len(y), classes))
            for i in range(len(y)):  # one-hot, sample by sample
                Y[i][y[i]] = 1.0
            grad = X.T @ (H - Y) / total
            for j in range(d):
                for k in range(classes):
                    v = (-grad[j][k] + rho * W[j][k] + Lam[p][j][k] + eta * Zs[p][j][k]) / (rho + eta)
                    Zs[p][j][k] = min(max(v, -bound), bound)
        for p in range(P):
            Lam[p] += rho * (W - Zs[p])
        times[t] = time.perf_counter() - t0
    return W.ravel(order="F"), times


def authors_vectorised_loop(parts, *, total: int, classes: int, rho: float, eta: float, rounds: int, J: int,
                            bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The authors' vectorised round (non-private ObjP, CPU numpy), structure and operations as published."""
    d, P, W, Zs, Lam, times = _authors_state(parts, classes, rounds)
    for t in range(rounds):
        t0 = time.perf_counter()
        W = np.sum(Zs - Lam / rho, axis=0) / P
        Ys = [(np.arange(classes) == y[..., None]).astype(int) for _, y in parts]
        for p, (X, _) in enumerate(parts):
            acc = np.zeros_like(Zs[p])
            for _ in range(J):
                E = np.exp(X @ Zs[p])
                H = np.clip(E / E.sum(axis=1)[:, None], 1e-9, 1.0)
                grad = X.T @ (H - Ys[p]) / total
                Zs[p] = np.clip((-grad + rho * W + Lam[p] + eta * Zs[p]) / (rho + eta), -bound, bound)
                acc += Zs[p]
            Zs[p] = acc / J
        Lam += rho * (W - Zs)
        times[t] = time.perf_counter() - t0
    return np.sum(Zs - Lam / rho, axis=0).ravel(order="F") / P, times


def numpy_ladmm(models: list[MulticlassLogistic], *, rho: float, eta: float, rounds: int, J: int,
                bound: float) -> tuple[np.ndarray, np.ndarray]:
    """Global mean, J linearized clip updates per agent (this package's gradient), average, dual update.

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


class TwoPass:
    """The previous evaluation (float64): logits ``X theta`` cached for the last point, the value from them,
    the gradient as a second product ``X^T (softmax - Y)``: two passes over the data per round."""

    def __init__(self, model: MulticlassLogistic) -> None:
        self.m, self._u, self._Z = model, None, None

    def _logits(self, u: np.ndarray) -> np.ndarray:
        if self._u is None or not np.array_equal(u, self._u):
            self._u, self._Z = u.copy(), self.m.X @ self.m.unflatten(u)
        return self._Z

    def value(self, u: np.ndarray) -> float:
        return _cost(self._logits(u), self.m)

    def gradient(self, u: np.ndarray) -> np.ndarray:
        Z = self._logits(u)
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        P -= self.m.Y
        return (self.m.X.T @ P / self.m.total).ravel(order="F")

    def agent(self) -> cvxdp.Agent:
        m = self.m
        return cvxdp.Agent(m.name, m.objective, m.constraints, shared={"theta": m.theta}, gradient=self.gradient,
                           sensitivity=m.sensitivity, value=self.value)


def _cost(Z: np.ndarray, m: MulticlassLogistic) -> float:
    """The previous value from cached logits (same formula as ``softmax_cost``)."""
    zmax = Z.max(axis=1)
    lse = np.log(np.exp(Z - zmax[:, None]).sum(axis=1)) + zmax
    return float((lse.sum() - Z[np.arange(len(m.y)), m.y].sum()) / m.total)


# --------------------------------------------------------------------------- driver
def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--authors-rounds", type=int, default=3, help="rounds of the (slow) loop-based authors' code")
    ap.add_argument("--samples", type=int, default=60_000)
    ap.add_argument("--features", type=int, default=784)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--local-updates", type=int, default=1)
    ap.add_argument("--bound", type=float, default=1.0)
    ap.add_argument("--rho", type=float, default=0.01)
    ap.add_argument("--eta", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2, help="alternating repetitions of every loop")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    X, y = synthetic(args.samples, args.features, args.classes, args.seed)
    parts = split_iid(X, y, args.agents, np.random.default_rng(args.seed))
    del X
    t0 = time.perf_counter()
    agents64, models64 = multiclass_agents(parts, classes=args.classes, bound=args.bound, clip=1.0,
                                           total=args.samples)
    build_s = time.perf_counter() - t0
    agents32, _ = multiclass_agents(parts, classes=args.classes, bound=args.bound, clip=1.0, total=args.samples,
                                    dtype="float32")
    before = [TwoPass(m).agent() for m in models64]
    parts = [(m.X, m.y) for m in models64]  # the clipped rows every loop sees

    kw = {"rho": args.rho, "eta": args.eta, "bound": args.bound}
    algo = cvxdp.LinearizedADMM(rho=args.rho, eta=args.eta, local_updates=args.local_updates, rounds=args.rounds)
    engines = {"cvxdp (before)": before, "cvxdp float64": agents64, "cvxdp float32": agents32}
    times: dict[str, list[np.ndarray]] = {k: [] for k in ("authors", "authors-vectorised", "numpy", *engines)}
    solutions: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):  # alternate all loops so that they see the same machine load
        if args.local_updates == 1 and args.authors_rounds > 0:
            solutions["authors"], t = authors_loop(parts, total=args.samples, classes=args.classes,
                                                   rounds=args.authors_rounds, **kw)
            times["authors"].append(t)
        solutions["authors-vectorised"], t = authors_vectorised_loop(
            parts, total=args.samples, classes=args.classes, rounds=args.rounds, J=args.local_updates, **kw)
        times["authors-vectorised"].append(t)
        solutions["numpy"], t = numpy_ladmm(models64, rounds=args.rounds, J=args.local_updates, **kw)
        times["numpy"].append(t)
        for label, agents in engines.items():
            result = cvxdp.solve(agents, algorithm=algo, privacy=None, accountant="basic", seed=args.seed)
            times[label].append(result.history["wall_time"].to_numpy())  # seconds of each round
            solutions[label] = np.asarray(result.solution["theta"]).ravel(order="F")
    per_round = {k: float(np.median(np.concatenate(v))) for k, v in times.items() if v}
    ref = solutions["numpy"]
    diffs = {k: float(np.max(np.abs(v - ref))) for k, v in solutions.items() if k != "authors"}
    speed_vs_authors = {k: per_round["authors"] / v for k, v in per_round.items()} if "authors" in per_round else {}
    speed_vs_vec = {k: per_round["authors-vectorised"] / v for k, v in per_round.items()}
    out = {"samples": args.samples, "features": args.features, "classes": args.classes, "agents": args.agents,
           "local_updates": args.local_updates, "rounds": args.rounds, "build_s": build_s,
           "s_per_round": per_round, "speedup_vs_authors": speed_vs_authors,
           "speedup_vs_authors_vectorised": speed_vs_vec, "max_abs_diff_vs_numpy": diffs}
    if args.json:
        print(json.dumps(out))
        return out
    print(f"{args.samples} x {args.features}, {args.classes} classes, {args.agents} agents, J = {args.local_updates}, "
          f"{args.rounds} rounds ({args.authors_rounds} for the loop-based authors' code); float64 agents built in "
          f"{build_s:.1f} s")
    print(f"{'':22s} {'ms/round':>9s} {'x authors':>10s} {'x authors-vec':>14s} {'max|w - w_numpy|':>17s}")
    for k, v in per_round.items():
        print(f"{k:22s} {v * 1e3:9.1f} {speed_vs_authors.get(k, float('nan')):10.2f} {speed_vs_vec[k]:14.2f} "
              f"{diffs.get(k, float('nan')):17.2e}")
    return out


if __name__ == "__main__":
    main()
