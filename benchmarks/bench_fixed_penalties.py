"""Does any fixed penalty meet issue 12's three round targets at once? (a negative result)

    PYTHONPATH=. python benchmarks/bench_fixed_penalties.py             # the seven acceptance rows, 43 settings
    PYTHONPATH=. python benchmarks/bench_fixed_penalties.py --rhos 1 10 --relaxations 1.0

Each row of ``bench_power.py --acceptance`` (cost objective, PowerModelsADA's stopping rule: half the copies'
pairwise mismatch < 0.01 and cost within 1 % of the centralized optimum) runs exact ADMM with a fixed penalty in
every round, for every combination of:

- ``rho`` (``--rhos``);
- the weights: ``declared`` (coordinate ``k`` penalized with ``rho * rho_scale[k]``, the power template's public
  per-block weights, never adapted) or ``one`` (``rho`` on every coordinate, as PowerModelsADA's ADMM);
- the over-relaxation (``--relaxations``; 1.0 is plain ADMM).

The first line is exact ADMM's defaults (``rho="auto"``: the block balance from the declared weights, relaxation
1.3 then 1.6). Every run has consensus polishing off: this benchmark is about the penalty, so it counts ADMM's
own iterate (``bench_polish.py`` measures the polished point). The table gives the rounds to the rule for each row and which of the issue's three targets
(case14 in 2 areas <= 8, case118 in 3 zones <= 6, case300 in 4 automatic zones <= 11) the setting meets.

What it shows: MATPOWER's and PGLib's case118 share the network, the partition and every public bound (only the
generator costs differ) and want opposite penalties, and the penalties that bring case300 to 11 lose case14.
So no fixed penalty meets the three targets together. Some converge on all seven rows (rho 1 with the declared
weights and relaxation 1.3 needs fewer rounds than the default on four of them), but they miss the case118 and
case300 targets too.
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

from bench_power import ACCEPTANCE_CASES, TARGETS, _first_hit, _table

import cvxdp
from cvxdp.schedules import Constant
from cvxdp_models.power.template import build

RHOS = (0.3, 1.0, 2.0, 3.0, 10.0, 30.0, 100.0)
RELAXATIONS = (1.0, 1.3, 1.6)


class FixedBlocks:
    """The per-block penalty rule that never changes a weight: each coordinate keeps ``rho * declared weight``."""

    def update(self, t, weights, declared, **released):
        return weights


def fixed_admm(rho: float, weights: str, relaxation: float, rounds: int) -> cvxdp.ADMM:
    """Exact ADMM with ``rho`` fixed; ``weights="declared"`` keeps the agents' public per-block weights."""
    if weights == "one":
        return cvxdp.ADMM(rho=rho, rounds=rounds, relaxation=relaxation, polish=False)
    algo = cvxdp.ADMM(rho="auto", rounds=rounds, relaxation=relaxation, polish=False)
    algo.auto_rho = Constant(rho)  # the instance's own rules; the class defaults are untouched
    algo.auto_blocks = FixedBlocks()
    return algo


def settings(rhos, relaxations) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [("default (auto)", None)]
    for weights, relaxation, rho in itertools.product(("declared", "one"), relaxations, rhos):
        name = "declared weights" if weights == "declared" else "one penalty"
        out.append((f"rho {rho:g}, {name}, relaxation {relaxation:g}", (rho, weights, relaxation)))
    return out


def run(rows: list[str], grid: list[tuple[str, object]], rounds: int) -> dict[str, dict[str, int | None]]:
    """Rounds to the rule, ``counts[setting][row]`` (None: not within ``rounds``)."""
    counts: dict[str, dict[str, int | None]] = {label: {} for label, _ in grid}
    for row in rows:
        start = time.perf_counter()
        inst = build(dict(ACCEPTANCE_CASES[row], objective="cost"), base_dir=".")
        ref = inst.central(ac_check=False)["objective"]
        for label, spec in grid:
            algo = cvxdp.ADMM(rounds=rounds, polish=False) if spec is None else fixed_admm(*spec, rounds=rounds)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the non-converging settings warn, as they should
                h = cvxdp.solve(inst.agents, algorithm=algo, seed=0).history
            counts[label][row] = _first_hit(h, ref, 0.01, 0.01, factor=0.5)
        print(f"{row}: {len(grid)} settings in {time.perf_counter() - start:.0f} s", flush=True)
    return counts


def report(counts: dict[str, dict[str, int | None]], rows: list[str], rounds: int) -> list[dict]:
    out = []
    for label, per_row in counts.items():
        line: dict[str, object] = {"setting": label}
        for row in rows:
            line[row] = per_row[row] if per_row[row] is not None else f">{rounds}"
        met = [row for row, target in TARGETS.items() if row in per_row and per_row[row] is not None
               and per_row[row] <= target]
        judged = [row for row in TARGETS if row in per_row]
        line["targets met"] = f"{len(met)}/{len(judged)}"
        line["not converged"] = sum(per_row[row] is None for row in rows)
        out.append(line)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(ACCEPTANCE_CASES), help="acceptance rows to run")
    parser.add_argument("--rhos", nargs="+", type=float, default=list(RHOS))
    parser.add_argument("--relaxations", nargs="+", type=float, default=list(RELAXATIONS))
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    rows = [row for row in ACCEPTANCE_CASES if not args.only or row in args.only]
    counts = run(rows, settings(args.rhos, args.relaxations), args.rounds)
    table = report(counts, rows, args.rounds)
    print(_table(table))
    best = {row: min((c[row], label) for label, c in counts.items() if c[row] is not None)
            for row in rows if any(c[row] is not None for c in counts.values())}
    print("\nfewest rounds per row: " + "; ".join(f"{row} {n} ({label})" for row, (n, label) in best.items()))
    judged = [row for row in TARGETS if row in rows]
    winners = [line["setting"] for line in table if line["targets met"] == f"{len(judged)}/{len(judged)}"]
    print(f"settings meeting all {len(judged)} targets: " + (", ".join(winners) if winners else "none"))


if __name__ == "__main__":
    main()
