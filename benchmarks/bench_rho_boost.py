"""Why exact ADMM's default does not boost its penalty once the cost settles (a negative result, issue 12).

    PYTHONPATH=. python benchmarks/bench_rho_boost.py            # the seven acceptance rows (about 15 minutes)
    PYTHONPATH=. python benchmarks/bench_rho_boost.py --only "case118 (3 zones)"

The idea: phase 1 at the default penalty finds the prices, phase 2 at a high penalty forces the copies to agree.
Each row of ``bench_power.py --acceptance`` (cost objective, PowerModelsADA's stopping rule) runs twice: once with
exact ADMM's defaults, and once with a boost. From the first round after which the summed objective moved by less
than ``--tol`` (relative), every block weight is multiplied by ``--factor`` per round, up to ``--cap`` times its
declared value. The block balance goes on within those limits. Consensus polishing is off in both runs: the
question is the iterate's penalty (``bench_polish.py`` measures the polished point).

The boost reads the objective, which is computed from each zone's private loads. That is allowed only because exact
ADMM never runs privately. The table also gives the cost error at the first round where the mismatch alone meets
the rule, which is where a stop on the mismatch (``tol_mismatch``) would end the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import warnings

import numpy as np
from bench_power import ACCEPTANCE_CASES, _first_hit

import cvxdp
from cvxdp.schedules import BlockBalance
from cvxdp_models.power.template import build


class BoostedBlocks:
    """The default block balance, with every weight multiplied by ``factor`` per round once ``boosting`` is set."""

    def __init__(self, base: BlockBalance, factor: float, cap: float) -> None:
        self.base = dataclasses.replace(base, span=max(base.span, cap))
        self.factor, self.cap = factor, cap
        self.boosting, self.since = False, None

    def update(self, t, weights, declared, **released):
        out = self.base.update(t, weights, declared, **released)
        if self.boosting:
            self.since = self.since or t
            out = np.minimum(out * self.factor, declared * self.cap)
        return out


def boosted_admm(rounds: int, factor: float, cap: float) -> tuple[cvxdp.ADMM, BoostedBlocks]:
    blocks = BoostedBlocks(cvxdp.ADMM.auto_blocks, factor, cap)
    algo = cvxdp.ADMM(rounds=rounds, polish=False)
    algo.auto_blocks = blocks  # the instance's own block rule; the class default is untouched
    return algo, blocks


def run_row(label: str, rounds: int, tol: float, factor: float, cap: float) -> list[dict]:
    inst = build(dict(ACCEPTANCE_CASES[label], objective="cost"), base_dir=".")
    ref = inst.central(ac_check=False)["objective"]
    rows = []
    for variant in ("default", "boost"):
        if variant == "default":
            algo, blocks, callback = cvxdp.ADMM(rounds=rounds, polish=False), None, None
        else:
            algo, blocks = boosted_admm(rounds, factor, cap)
            previous = [math.nan]

            def callback(t: int, row: dict, blocks=blocks, previous=previous) -> None:
                obj = float(row["objective"])
                if abs(obj - previous[0]) < tol * abs(obj):
                    blocks.boosting = True
                previous[0] = obj

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h = cvxdp.solve(inst.agents, algorithm=algo, seed=0, callback=callback).history
        only_mismatch = _first_hit(h, ref, math.inf, 0.01, factor=0.5)
        gap_there = (h["objective"].iloc[only_mismatch - 1] - ref) / abs(ref) if only_mismatch else math.nan
        rows.append({"case": label, "variant": variant, "boost from round": getattr(blocks, "since", None) or "-",
                     "rounds (rule)": _first_hit(h, ref, 0.01, 0.01, factor=0.5) or f"> {rounds}",
                     "rounds (mismatch only)": only_mismatch or f"> {rounds}",
                     "cost error there": f"{gap_there:+.2%}",
                     "final cost error": f"{(h['objective'].iloc[-1] - ref) / abs(ref):+.2%}"})
    return rows


def main() -> None:
    import pandas as pd

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(ACCEPTANCE_CASES), default=list(ACCEPTANCE_CASES))
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--tol", type=float, default=0.002, help="relative objective change that starts the boost")
    parser.add_argument("--factor", type=float, default=3.0, help="weight multiplier per boosted round")
    parser.add_argument("--cap", type=float, default=30.0, help="largest weight, in multiples of the declared one")
    args = parser.parse_args()
    rows = []
    for label in args.only:
        rows += run_row(label, args.rounds, args.tol, args.factor, args.cap)
        print(pd.DataFrame(rows[-2:]).to_string(index=False), flush=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
