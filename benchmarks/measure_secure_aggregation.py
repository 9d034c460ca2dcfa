"""How much of what distribution costs is the P silos' independent noise? (issue 50)

Each silo of a consortium noises its own update, so the average of P updates carries ``sqrt(P)`` times the
noise of one: at the same per-silo budget the sum is noisier than a trusted curator's update. Secure aggregation
(the coordinator sees only the sum) would let each silo add ``1/sqrt(P)`` of the noise and still give every record
the budget. This script runs that noise level: the case's own private run (its defaults: Poisson rate 0.05,
per-example clip 1, 200 rounds) at the per-silo total epsilon ``eps'`` whose calibrated noise multiplier is
``sigma(eps) / sqrt(P)``. Its numbers are those of a secure-aggregation run at ``eps`` (the noise each silo adds is
the same; only what the coordinator sees differs), measured here with cvxdp's ordinary, per-silo-private runs at
``eps'``. What ``fed(eps) - fed(eps')`` recovers is the part of the distribution cost that the independent noise
explains; the study's ``central-sqrtP`` anchor measures the same noise on the central recipe.

    python benchmarks/measure_secure_aggregation.py --data DIR [--silos 5 10] [--epsilons 0.5 1] [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import cvxdp
from cvxdp.config.build import build_instance, load_case, run_case

ROOT = Path(__file__).resolve().parents[1]


def noise_multiplier(case, agent, epsilon: float) -> float:
    """The noise multiplier the case's private defaults calibrate for a silo's total ``epsilon``."""
    p, steps = case.privacy, int(case.algorithm["rounds"]) * int(case.algorithm.get("local_updates", 1))
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=epsilon, delta=p["delta"], calibrate="total",
                                       sampling_rate=p["sampling_rate"], clip_norm=p["clip_norm"])
    public = SimpleNamespace(name=agent.name, per_example=agent.per_example.public())
    plan = mech.noise_plan(public, min_weight=1.0, separable=True, steps=steps,
                           accountant=case.run.get("accountant", "pld"))
    return plan.noise_multiplier


def secure_epsilon(case, agent, epsilon: float, parties: int) -> float:
    """``eps'`` with ``sigma(eps') = sigma(eps) / sqrt(parties)`` (bisection on log eps; sigma decreases in eps)."""
    target = noise_multiplier(case, agent, epsilon) / math.sqrt(parties)
    lo, hi = math.log(epsilon), math.log(epsilon * 10 * parties)
    for _ in range(40):
        mid = (lo + hi) / 2
        if noise_multiplier(case, agent, math.exp(mid)) > target:
            lo = mid
        else:
            hi = mid
    return math.exp(hi)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", type=Path, default=ROOT / "cases" / "femnist_silos.toml")
    ap.add_argument("--data", default=None)
    ap.add_argument("--silos", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--mechanisms", nargs="+", default=["ObjG", "OutG"])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"load average before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for silos in args.silos:
        case = load_case(args.case)
        case = case.with_data(args.data) if args.data is not None else case
        case.model["silos"] = silos
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance = build_instance(case)
        for eps in args.epsilons:
            sigma = noise_multiplier(case, instance.agents[0], eps)
            eps_secure = secure_epsilon(case, instance.agents[0], eps, silos)
            for mech in args.mechanisms:
                errors, t0 = [], time.perf_counter()
                for seed in range(args.seeds):
                    run = case.with_overrides(privacy={"mechanism": mech, "epsilon": eps_secure}, run={"seed": seed})
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        errors.append(float(run_case(run, instance=instance).summary["test_error"]))
                se = float(np.std(errors, ddof=1) / math.sqrt(len(errors))) if len(errors) > 1 else math.nan
                print(f"{silos} silos, total eps {eps:g} per silo (noise multiplier {sigma:.3f}): {mech} with the noise "
                      f"secure aggregation would need, i.e. at eps' = {eps_secure:.3g} (multiplier "
                      f"{sigma / math.sqrt(silos):.3f}): test error {100 * np.mean(errors):.1f} +- {100 * se:.1f} % "
                      f"({args.seeds} seeds, {time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
