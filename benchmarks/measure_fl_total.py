"""FEMNIST at a whole-run budget (issue 39): non-private, ObjG/OutG with and without subsampling, central DP-SGD.

    python benchmarks/measure_fl_total.py --data ../shared/data/femnist_leaf --out results.json [--seeds 0 1 2]

Two writer sets: the first ten of the shards (shared, total_samples 1527) and the held-out writers 10..19
(total_samples 1263). Every private run is calibrated to the total (epsilon, 1e-5) per writer (PLD); the subsampled
runs use q and C fixed in advance (not tuned on the test data). The central anchor runs DP-SGD on the pooled
writers at the same total budget (models/logistic/baselines.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from pathlib import Path

import numpy as np

from cvxdp.config.build import build_instance, load_case, run_case
from cvxdp_models.logistic.baselines import central_private_anchor

CASE = Path(__file__).resolve().parents[1] / "cases" / "femnist_fl.toml"
SETS = {"shared": {"agents": 10, "total_samples": 1527}, "held_out": {"writers": list(range(10, 20)),
                                                                      "total_samples": 1263}}
METHODS = {"ObjG": {"mechanism": "ObjG"}, "OutG": {"mechanism": "OutG"},
           "ObjG-q0.1": {"mechanism": "ObjG", "sampling_rate": 0.1, "clip_norm": 1.0},
           "OutG-q0.1": {"mechanism": "OutG", "sampling_rate": 0.1, "clip_norm": 1.0}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 8.0])
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    rows = []
    for set_name, model in SETS.items():
        base = load_case(CASE)
        base.model["path"] = str(Path(args.data).resolve())
        base.model.pop("agents", None)
        base.model.update(model)
        if args.rounds:
            base.algorithm["rounds"] = args.rounds
        instance = build_instance(base)
        X_test, y_test = instance.test_data
        for seed in args.seeds:
            t0 = time.perf_counter()
            out = run_case(base.with_overrides(run={"seed": seed}), instance=instance)
            rows.append({"set": set_name, "method": "none", "epsilon": None, "seed": seed,
                         "test_error": out.summary["test_error"], "time_s": time.perf_counter() - t0})
            print(rows[-1], flush=True)
            for eps in args.epsilons:
                for name, priv in METHODS.items():
                    t0 = time.perf_counter()
                    case = base.with_overrides(privacy={**priv, "epsilon": eps, "delta": 1e-5, "calibrate": "total"},
                                               run={"seed": seed, "accountant": "pld"})
                    out = run_case(case, instance=instance)
                    worst = out.result.privacy["worst"]
                    rows.append({"set": set_name, "method": name, "epsilon": eps, "seed": seed,
                                 "test_error": out.summary["test_error"], "pld": worst["pld"],
                                 "time_s": time.perf_counter() - t0})
                    print(rows[-1], flush=True)
                t0 = time.perf_counter()
                anchor = central_private_anchor(instance.pooled, X_test, y_test, epsilon=eps, delta=1e-5, seed=seed)
                rows.append({"set": set_name, "method": "central-dpsgd", "epsilon": eps, "seed": seed,
                             "test_error": anchor["test_error"], "time_s": time.perf_counter() - t0})
                print(rows[-1], flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1))
    Path(args.out).write_text(json.dumps(rows, indent=1))
    table: dict = {}
    for r in rows:
        table.setdefault((r["set"], r["method"], r["epsilon"]), []).append(r["test_error"])
    for (s, m, e), v in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][2] or 0, kv[0][1])):
        print(f"{s:9s} {m:13s} eps={e}  test error {100 * np.mean(v):.1f} % (n={len(v)}"
              + (f", se {100 * np.std(v, ddof=1) / np.sqrt(len(v)):.1f})" if len(v) > 1 else ")"))


if __name__ == "__main__":
    main()
