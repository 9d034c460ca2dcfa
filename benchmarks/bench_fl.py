"""Seconds per round of federated box-constrained multiclass logistic regression, interleaved in one process.

MNIST-sized synthetic data (default 60,000 x 784, 10 classes, 10 IID agents, box |theta| <= 1), the same
linearized-ADMM round (J local updates with the closed-form clip, SPEC §2) timed as:

- ``authors``: **the authors' own code for issue 12's acceptance** (cvxdp >= 5x): their published
  closed-form round, re-implemented with the same structure and array operations (APPFL/DPFL-IADMM-
  Classification, ``Models.py``: ``First_Block_Problem_ClosedForm`` and
  ``Proximal_Second_Block_Problem_ClosedForm``, non-private; ``Functions.py``: ``calculate_hypothesis``,
  ``calculate_gradient``): per-entry Python loops for the consensus and the clip, a per-row softmax
  normalisation and a per-sample one-hot encoding every round. It is slow, so each block runs
  ``--authors-rounds`` rounds.
- ``authors-vectorised``: the later vectorised release of the same code (minseok-ryu/DP-IADMM-Multiclass-
  Logistic, ``src/Models.py``, ObjP non-private, CPU numpy): whole-array updates, two passes over the data
  per local update, one-hot rebuilt every round. Reported too, honestly: against it cvxdp's margin is small.
- ``numpy``: a bare numpy loop over this package's own gradient (float64; the floor of engine overhead).
- ``cvxdp float64`` / ``cvxdp float32``: ``cvxdp.solve`` with the fused one-pass value and gradient
  (:func:`cvxdp_models.logistic.multiclass.value_and_gradient`) in each precision. float64 is the
  logistic template's default before this change (main), float32 its default after (``[model] dtype``).

Measurement: the variants run interleaved (A B C ... A B C ..., ``--repeats`` blocks each) in one process
with BLAS pinned to ``--threads`` threads (default 1, for every variant, through threadpoolctl), so that all
see the same machine load. A variant's time is the median of its per-round wall times over all blocks
(cvxdp's are its history's ``wall_time``: the whole round, i.e. broadcast, local steps, metrics,
aggregation and dual update; set-up before round 1 is reported separately). Speed-ups are ratios of
medians; ``[lo-hi]`` is the range of the per-block ratios (block i of A over block i of B). On a shared
machine the wall-time ratios swing with the other processes' load, so every variant's CPU time per round
(``time.process_time``, this process only) is reported and compared too: for the loops around each round, for
cvxdp between consecutive ``callback`` calls (rounds 2 on; round 1 includes set-up). The load average
(``os.getloadavg``) before and after the measurement is printed beside the numbers.

    python benchmarks/bench_fl.py [--rounds 10] [--authors-rounds 3] [--repeats 5] [--samples 60000]
                                  [--features 784] [--classes 10] [--agents 10] [--local-updates 1]
                                  [--threads 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

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


# --------------------------------------------------------------------------- reference loops
def _authors_state(parts, classes: int, rounds: int):
    """Features, agents, the global W, local Z_p, duals Lambda_p (all zero, as the authors start) and a timer."""
    d, P = parts[0][0].shape[1], len(parts)
    return d, P, np.zeros((d, classes)), np.zeros((P, d, classes)), np.zeros((P, d, classes)), _Timer(rounds)


class _Timer:
    """Wall and CPU seconds of every round: ``start()`` then ``stop(t)``."""

    def __init__(self, rounds: int) -> None:
        self.wall, self.cpu = np.zeros(rounds), np.zeros(rounds)

    def start(self) -> None:
        self._w, self._c = time.perf_counter(), time.process_time()

    def stop(self, t: int) -> None:
        self.wall[t], self.cpu[t] = time.perf_counter() - self._w, time.process_time() - self._c


def authors_loop(parts, *, total: int, classes: int, rho: float, eta: float, rounds: int, bound: float,
                 ) -> tuple[np.ndarray, _Timer]:
    """The authors' closed-form round (non-private), structure and operations as published.

    Their ``eta`` is a step: the prox weight is ``1/eta``; here the prox weight is ``eta`` as in cvxdp.
    Returns the final consensus ``W`` (flat, column-major) and the round timer.
    """
    d, P, W, Zs, Lam, times = _authors_state(parts, classes, rounds)
    for t in range(rounds):
        times.start()
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
        times.stop(t)
    return W.ravel(order="F"), times


def authors_vectorised_loop(parts, *, total: int, classes: int, rho: float, eta: float, rounds: int, J: int,
                            bound: float) -> tuple[np.ndarray, _Timer]:
    """The authors' vectorised round (non-private ObjP, CPU numpy), structure and operations as published."""
    d, P, W, Zs, Lam, times = _authors_state(parts, classes, rounds)
    for t in range(rounds):
        times.start()
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
        times.stop(t)
    return np.sum(Zs - Lam / rho, axis=0).ravel(order="F") / P, times


def numpy_ladmm(models: list[MulticlassLogistic], *, rho: float, eta: float, rounds: int, J: int,
                bound: float) -> tuple[np.ndarray, _Timer]:
    """Global mean, J linearized clip updates per agent (this package's gradient), average, dual update.

    Returns the final global vector (``mean(z - lambda/rho)`` after the last round, as ``cvxdp.solve``
    reports it) and the round timer.
    """
    P, n = len(models), int(np.prod(models[0].shape))
    z, lam = np.zeros((P, n)), np.zeros((P, n))
    c = eta + rho
    times = _Timer(rounds)
    for t in range(rounds):
        times.start()
        w = np.mean(z - lam / rho, axis=0)
        for p, m in enumerate(models):
            u, acc = z[p], np.zeros(n)
            anchor = rho * w + lam[p]
            for _ in range(J):
                u = np.clip((eta * u + anchor - m.gradient(u)) / c, -bound, bound)
                acc += u
            z[p] = acc / J
        lam += rho * (w - z)
        times.stop(t)
    return np.mean(z - lam / rho, axis=0), times


# --------------------------------------------------------------------------- driver
def _ratios(times: dict[str, list[np.ndarray]], ref: str) -> dict[str, tuple[float, float, float]]:
    """``median(ref) / median(variant)`` and the range of the per-block ratios, for every variant."""
    med = {k: float(np.median(np.concatenate(v))) for k, v in times.items()}
    out = {}
    for k, blocks in times.items():
        per_block = [float(np.median(r)) / float(np.median(b)) for r, b in zip(times[ref], blocks)]
        out[k] = (med[ref] / med[k], min(per_block), max(per_block))
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="rounds per block of the fast variants")
    ap.add_argument("--authors-rounds", type=int, default=3, help="rounds per block of the (slow) loop-based "
                    "authors' code (0: skip it)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved blocks of every variant")
    ap.add_argument("--samples", type=int, default=60_000)
    ap.add_argument("--features", type=int, default=784)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--local-updates", type=int, default=1)
    ap.add_argument("--bound", type=float, default=1.0)
    ap.add_argument("--rho", type=float, default=0.01)
    ap.add_argument("--eta", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of every variant")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    with threadpool_limits(limits=args.threads, user_api="blas"):
        blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
        out = _run(args)
    out["blas_threads"] = blas
    if args.json:
        print(json.dumps(out))
        return out
    vs_authors, vs_vec = out["speedup_vs_authors"], out["speedup_vs_authors_vectorised"]
    print(f"{args.samples} x {args.features}, {args.classes} classes, {args.agents} agents, J = {args.local_updates}; "
          f"{args.repeats} interleaved blocks of {args.rounds} rounds ({args.authors_rounds} for the loop-based "
          f"authors' code); BLAS threads: {', '.join(f'{a} {n}' for a, n in blas) or 'none found'}")
    cpu_vec = out["cpu_speedup_vs_authors_vectorised"]
    print(f"load average (1, 5, 15 min) before {_load(out['load_before'])}, after {_load(out['load_after'])} "
          f"({os.cpu_count()} CPUs)")
    print(f"{'':20s} {'ms/round':>9s} {'x authors [lo-hi]':>20s} {'x authors-vec [lo-hi]':>24s} "
          f"{'CPU ms/round':>13s} {'CPU x authors-vec [lo-hi]':>26s} {'set-up s':>9s} {'max|w - w_numpy|':>17s}")
    for k, v in out["s_per_round"].items():
        a = vs_authors.get(k)
        a_txt = f"{a[0]:6.2f} [{a[1]:.1f}-{a[2]:.1f}]" if a else "n/a"
        b, c = vs_vec[k], cpu_vec[k]
        print(f"{k:20s} {v * 1e3:9.1f} {a_txt:>20s} {f'{b[0]:6.2f} [{b[1]:.1f}-{b[2]:.1f}]':>24s} "
              f"{out['cpu_s_per_round'][k] * 1e3:13.1f} {f'{c[0]:6.2f} [{c[1]:.2f}-{c[2]:.2f}]':>26s} "
              f"{out['setup_s'].get(k, float('nan')):9.1f} {out['max_abs_diff_vs_numpy'].get(k, float('nan')):17.2e}")
    print("acceptance (issue 12, item 7): cvxdp >= 5x the authors' own (loop-based) round: "
          + ", ".join(f"{k} {vs_authors[k][0]:.1f}x" for k in ("cvxdp float64", "cvxdp float32") if k in vs_authors))
    return out


def _load(avg: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in avg)


def _run(args: argparse.Namespace) -> dict:
    X, y = synthetic(args.samples, args.features, args.classes, args.seed)
    parts = split_iid(X, y, args.agents, np.random.default_rng(args.seed))
    del X
    t0 = time.perf_counter()
    agents64, models64 = multiclass_agents(parts, classes=args.classes, bound=args.bound, clip=1.0,
                                           total=args.samples)
    build_s = time.perf_counter() - t0
    agents32, _ = multiclass_agents(parts, classes=args.classes, bound=args.bound, clip=1.0, total=args.samples,
                                    dtype="float32")
    parts = [(m.X, m.y) for m in models64]  # the clipped rows every loop sees

    kw = {"rho": args.rho, "eta": args.eta, "bound": args.bound}
    algo = cvxdp.LinearizedADMM(rho=args.rho, eta=args.eta, local_updates=args.local_updates, rounds=args.rounds)
    engines = {"cvxdp float64": agents64, "cvxdp float32": agents32}
    loops = {"authors-vectorised": lambda: authors_vectorised_loop(
                 parts, total=args.samples, classes=args.classes, rounds=args.rounds, J=args.local_updates, **kw),
             "numpy": lambda: numpy_ladmm(models64, rounds=args.rounds, J=args.local_updates, **kw)}
    if args.local_updates == 1 and args.authors_rounds > 0:
        loops = {"authors": lambda: authors_loop(parts, total=args.samples, classes=args.classes,
                                                 rounds=args.authors_rounds, **kw), **loops}
    times: dict[str, list[np.ndarray]] = {k: [] for k in (*loops, *engines)}
    cpu: dict[str, list[np.ndarray]] = {k: [] for k in (*loops, *engines)}
    setup: dict[str, list[float]] = {k: [] for k in engines}
    solutions: dict[str, np.ndarray] = {}
    load_before = os.getloadavg()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bench's eta is the authors'; the engine may warn about it
        for _ in range(args.repeats):  # interleaved blocks: every variant sees the same machine load
            for label, loop in loops.items():
                solutions[label], timer = loop()
                times[label].append(timer.wall)
                cpu[label].append(timer.cpu)
            for label, agents in engines.items():
                marks: list[float] = []  # CPU clock at the end of every round
                t0 = time.perf_counter()
                result = cvxdp.solve(agents, algorithm=algo, privacy=None, accountant="basic", seed=args.seed,
                                     callback=lambda t, row, marks=marks: marks.append(time.process_time()))
                wall = result.history["wall_time"].to_numpy()  # seconds of each round
                times[label].append(wall)
                cpu[label].append(np.diff(marks))  # rounds 2 on (round 1's start is inside set-up)
                setup[label].append(time.perf_counter() - t0 - float(wall.sum()))
                solutions[label] = np.asarray(result.solution["theta"]).ravel(order="F")
    load_after = os.getloadavg()
    per_round = {k: float(np.median(np.concatenate(v))) for k, v in times.items()}
    cpu_per_round = {k: float(np.median(np.concatenate(v))) for k, v in cpu.items()}
    ref = solutions["numpy"]
    # the loop-based authors' code runs fewer rounds: its iterate is not comparable
    diffs = {k: float(np.max(np.abs(v - ref))) for k, v in solutions.items() if k != "authors"}
    return {"samples": args.samples, "features": args.features, "classes": args.classes, "agents": args.agents,
            "local_updates": args.local_updates, "rounds": args.rounds, "repeats": args.repeats,
            "build_s": build_s, "s_per_round": per_round, "cpu_s_per_round": cpu_per_round,
            "load_before": load_before, "load_after": load_after,
            "setup_s": {k: float(np.median(v)) for k, v in setup.items()},
            "speedup_vs_authors": _ratios(times, "authors") if "authors" in times else {},
            "speedup_vs_authors_vectorised": _ratios(times, "authors-vectorised"),
            "cpu_speedup_vs_authors_vectorised": _ratios(cpu, "authors-vectorised"),
            "max_abs_diff_vs_numpy": diffs}


if __name__ == "__main__":
    main()
