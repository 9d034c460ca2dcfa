"""Honest convergence reporting (issue 37 item 6): does a run that looks converged say when it is not?

A custom model, non-private: a 3-region, 6-hour dispatch with ramp limits and shared exports (each region's
generation minus its load equals its exports; the exports sum to zero). For LinearizedADMM with the defaults and
with a fixed rho of 10 and 100, and exact ADMM with the defaults, 300 rounds each: the objective's gap to the
central optimum (evaluated on the parties' data: the user's check, not something the run reads), the consensus,
primal and dual residuals of the last round (released values), and whether the run warned that it "has not
settled" (:func:`cvxdp.families.consensus.step_sizes.unsettled`).

    python benchmarks/bench_settling.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import warnings

import cvxpy as cp
import numpy as np
import pandas as pd

import cvxdp


def dispatch_agents(regions: int = 3, hours: int = 6, seed: int = 3) -> list[cvxdp.Agent]:
    rng = np.random.default_rng(seed)
    out = []
    for r in range(regions):
        load = 1.0 + 0.5 * rng.random(hours) + 0.3 * r
        a, b = 0.5 + 0.3 * r, 1.0 + r
        x = cp.Variable(regions * hours, name="exports")  # every region's exports, hour by hour
        g = cp.Variable(hours, name="generation")
        own = x[r * hours:(r + 1) * hours]
        constraints = [g >= 0, g <= 3.0, cp.abs(g[1:] - g[:-1]) <= 0.4, g - own == load,
                       sum(x[k * hours:(k + 1) * hours] for k in range(regions)) == 0, x >= -3, x <= 3]
        out.append(cvxdp.Agent(f"region{r}", a * cp.sum_squares(g) + b * cp.sum(g), constraints, shared={"x": x}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    agents = dispatch_agents()
    central = cvxdp.solve_central(agents)["objective"]
    runs = {"LinearizedADMM (defaults)": cvxdp.LinearizedADMM(rounds=args.rounds),
            "LinearizedADMM rho=10": cvxdp.LinearizedADMM(rho=10.0, rounds=args.rounds),
            "LinearizedADMM rho=100": cvxdp.LinearizedADMM(rho=100.0, rounds=args.rounds),
            "ADMM (defaults)": cvxdp.ADMM(rounds=args.rounds)}
    rows = []
    for label, algorithm in runs.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = cvxdp.solve(agents, algorithm=algorithm, seed=0)
        last = result.history.iloc[-1]
        rows.append({"run": label, "rounds": len(result.history),
                     "gap_to_central": (float(last["objective"]) - central) / abs(central),
                     "consensus_residual": float(last["consensus_residual"]),
                     "primal_residual": float(last["primal_residual"]),
                     "dual_residual": float(last["dual_residual"]),
                     "warns_not_settled": any("has not settled" in str(w.message) for w in caught)})
    with pd.option_context("display.width", 200, "display.float_format", "{:.3g}".format):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
