"""The central DP anchor against an independent implementation: diffprivlib's LogisticRegression (issue 50, item 2).

The equal-total studies measure what distribution costs against a centralized private model on the pooled records
(:func:`cvxdp_models.logistic.baselines.central_private_anchor`, DP-SGD, checked so far only against an
independent accountant). This benchmark fits, on the same pooled training records (the case's preprocessing: the
public pixel range, rows clipped to ``||x|| <= 1``) and at the same total epsilon:

- ``cvxdp central``: the anchor as the studies run it (Poisson rate 0.05, per-example clip 1, 200 projected steps,
  lr 1, the box of the case; ``(epsilon, 1e-5)``-DP under add/remove one record, PLD accounting);
- ``Opacus`` (optional: ``pip install opacus``, with PyTorch): the same recipe in Opacus, the independent
  DP-SGD implementation, with its own PRV accountant's noise multiplier (a linear softmax model without bias,
  weights clipped to the box after each step);
- ``diffprivlib``: IBM's objective-perturbation LogisticRegression (Chaudhuri et al. 2011, the Vector mechanism;
  pure ``epsilon``-DP, one record replaced), with ``data_norm`` = the clip 1 (public), no intercept (as the
  anchor) and its default ``C = 1`` (no tuning); multiclass is one-vs-rest at ``epsilon / K`` per class;

and, non-private: the case's pooled optimum (``central``: the box-constrained softmax) and scikit-learn's
LogisticRegression (C = 1, no intercept). Test errors are on the case's held-out images; mean +- standard error
over ``--seeds`` seeds (each method's own randomness; the data are fixed).

diffprivlib 0.6.6 (the newest) imports names that scikit-learn 1.8 and 1.9 removed: install the ``bench`` extra
(``pip install -e ".[bench]"``, which asks for scikit-learn < 1.8), or run this file with a scikit-learn 1.7 first
on the path. Nothing is downloaded: digits is bundled, FEMNIST is read from ``--data``.

    python benchmarks/bench_anchor.py [--case cases/digits_silos.toml] [--data DIR] [--epsilons 0.5 1 2 4 8]
                                      [--seeds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from pathlib import Path

import numpy as np

from cvxdp.config.build import build_instance, load_case

ROOT = Path(__file__).resolve().parents[1]


def _diffprivlib():
    try:
        from diffprivlib.models import LogisticRegression
    except ImportError as exc:  # not installed, or a scikit-learn it cannot import from
        raise SystemExit(f"bench_anchor needs diffprivlib with a scikit-learn it supports ({exc}); install the bench "
                         "extra: pip install -e \".[bench]\" (diffprivlib, scikit-learn < 1.8).") from None
    return LogisticRegression


def _opacus_sgd(X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, *, classes: int, bound: float,
                epsilon: float, delta: float, seed: int, steps: int = 200, sampling_rate: float = 0.05,
                clip_norm: float = 1.0, lr: float = 1.0) -> tuple[float, float]:
    """The anchor's recipe in Opacus (independent DP-SGD and accountant): a linear softmax model without bias, Poisson
    sampling at ``sampling_rate``, per-sample clip ``clip_norm``, the noise multiplier from Opacus' PRV accountant for
    ``steps`` steps at ``(epsilon, delta)``, SGD at ``lr`` on the mean loss (the clipped sum and the noise divided by
    the expected batch ``q N``), weights clipped to the box after each step. Returns (test error, noise multiplier)."""
    import torch
    from opacus import PrivacyEngine
    from opacus.accountants.utils import get_noise_multiplier

    torch.manual_seed(seed)
    noise = get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=sampling_rate, steps=steps,
                                 accountant="prv")
    model = torch.nn.Linear(X.shape[1], classes, bias=False, dtype=torch.float64)
    torch.nn.init.zeros_(model.weight)
    data = torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(np.asarray(y, dtype=np.int64)))
    loader = torch.utils.data.DataLoader(data, batch_size=max(1, round(sampling_rate * len(y))))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=noise, max_grad_norm=clip_norm,
                                                   poisson_sampling=True)
    loss_fn, done = torch.nn.CrossEntropyLoss(), 0
    while done < steps:
        for xb, yb in loader:
            if done == steps:
                break
            optimizer.zero_grad()
            if len(yb):
                loss_fn(model(xb), yb).backward()
            optimizer.step()
            with torch.no_grad():  # the box W (post-processing)
                model._module.weight.clamp_(-bound, bound)
            done += 1
    with torch.no_grad():
        predicted = model(torch.from_numpy(X_test)).argmax(dim=1).numpy()
    return float(np.mean(predicted != y_test)), float(noise)


def _pm(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) > 1 else math.nan


def run(case_path: Path, data: str | None, epsilons: list[float], seeds: int, delta: float = 1e-5) -> dict:
    """Both private models and both non-private references on the case's pooled records."""
    from sklearn import __version__ as sklearn_version
    from sklearn.linear_model import LogisticRegression as SkLogisticRegression

    DpLogisticRegression = _diffprivlib()
    import diffprivlib

    case = load_case(case_path)
    if data is not None:
        case = case.with_data(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        instance = build_instance(case)
    pooled, (X_test, y_test) = instance.pooled, instance.test_data
    X, y = np.asarray(pooled.X_param.value, dtype=float), pooled.y  # the clipped float64 rows every model sees
    clip = float(instance.settings["clip"])
    t0 = time.perf_counter()
    optimum = instance.central(tol=1e-6, time_limit=600)
    sk = SkLogisticRegression(C=1.0, fit_intercept=False, max_iter=2000).fit(X, y)
    out: dict = {"case": case.name, "n_train": int(len(y)), "n_test": int(len(y_test)), "features": int(X.shape[1]),
                 "classes": int(pooled.classes), "clip": clip, "delta": delta, "seeds": seeds,
                 "sklearn": sklearn_version, "diffprivlib": diffprivlib.__version__,
                 "optimum_test_error": float(optimum["test_error"]),
                 "sklearn_test_error": float(np.mean(sk.predict(X_test) != y_test)), "rows": []}
    try:
        import opacus
        out["opacus"] = opacus.__version__
    except ImportError:
        out["opacus"] = None
    for eps in epsilons:
        ours, theirs, sgd, t_ours, t_theirs = [], [], [], 0.0, 0.0
        for seed in range(seeds):
            t = time.perf_counter()
            anchor = instance.central_private(eps, delta, seed)
            ours.append(float(anchor["test_error"]))
            t_ours += time.perf_counter() - t
            if out["opacus"]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # Opacus' notes on secure RNG (research runs are seeded)
                    error, opacus_noise = _opacus_sgd(X, y, X_test, y_test, classes=int(pooled.classes),
                                                      bound=float(pooled.bound), epsilon=eps, delta=delta, seed=seed)
                sgd.append(error)
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # lbfgs convergence notes of the noisy objective
                clf = DpLogisticRegression(epsilon=eps, data_norm=clip, fit_intercept=False, C=1.0, max_iter=1000,
                                           random_state=seed).fit(X, y)
            t_theirs += time.perf_counter() - t
            theirs.append(float(np.mean(clf.predict(X_test) != y_test)))
        out["rows"].append({"epsilon": eps, "cvxdp_central": _pm(ours), "diffprivlib": _pm(theirs),
                            "cvxdp_s": t_ours / seeds, "diffprivlib_s": t_theirs / seeds,
                            "cvxdp_noise_multiplier": float(anchor["noise_multiplier"]),
                            **({"opacus": _pm(sgd), "opacus_noise_multiplier": opacus_noise} if sgd else {})})
    out["elapsed_s"] = time.perf_counter() - t0
    out["load"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", type=Path, default=ROOT / "cases" / "digits_silos.toml")
    ap.add_argument("--data", default=None, help="the case's [model] path (a LEAF FEMNIST directory)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0, 8.0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    out = run(args.case, args.data, args.epsilons, args.seeds)
    if args.json:
        print(json.dumps(out))
        return out
    print(f"{out['case']}: {out['n_train']} training / {out['n_test']} test records, {out['features']} features, "
          f"{out['classes']} classes, rows clipped to norm {out['clip']:g}; {out['seeds']} seeds; diffprivlib "
          f"{out['diffprivlib']}, scikit-learn {out['sklearn']}")
    print(f"non-private: the case's pooled optimum {100 * out['optimum_test_error']:.1f} %, scikit-learn "
          f"LogisticRegression (C = 1) {100 * out['sklearn_test_error']:.1f} % test error")
    print(f"{'total eps':>9s}  {'cvxdp central (DP-SGD, PLD)':>30s}  {'Opacus DP-SGD (PRV)':>26s}  "
          f"{'diffprivlib (obj. pert.)':>26s}")
    for row in out["rows"]:
        (a, sa), (b, sb) = row["cvxdp_central"], row["diffprivlib"]
        ours = f"{100 * a:.1f} +- {100 * sa:.1f} % (sigma {row['cvxdp_noise_multiplier']:.3f})"
        sgd = f"{100 * row['opacus'][0]:.1f} +- {100 * row['opacus'][1]:.1f} % (sigma " \
              f"{row['opacus_noise_multiplier']:.3f})" if "opacus" in row else "not installed"
        theirs = f"{100 * b:.1f} +- {100 * sb:.1f} %"
        print(f"{row['epsilon']:9g}  {ours:>30s}  {sgd:>26s}  {theirs:>26s}")
    print("sigma: the noise multiplier each accountant gives the recipe (Poisson rate 0.05, 200 steps) at (eps, 1e-5)")
    print(f"load average (1, 5, 15 min) at the end: {' / '.join(f'{x:.2f}' for x in out['load'])}")
    return out


if __name__ == "__main__":
    main()
