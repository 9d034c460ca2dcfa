"""What exact ADMM's consensus polishing buys and costs (issue 12), both measured in one run.

    PYTHONPATH=. python benchmarks/bench_polish.py                       # the seven acceptance rows
    PYTHONPATH=. python benchmarks/bench_polish.py --large               # + case1354pegase (8) / case2869pegase (16)
    PYTHONPATH=. python benchmarks/bench_polish.py --only "case118 (3 zones)" --rounds 40

Each row of ``bench_power.py --acceptance`` (cost objective, PowerModelsADA's stopping rule: half the copies'
pairwise mismatch < 0.01 and cost within 1 % of the centralized optimum) runs exact ADMM's defaults twice on the
same agents three times: the default (``polish=True``: a round polishes once the copies' mismatch of the round
before is at most a tenth of round 1's), polishing in every round (``ADMM.polish_below = None``, the default
before issue 37) and ``polish=False``. Polishing changes no iterate (the columns ``rounds (iterate)`` agree), so
the difference is the polished point: in each round that polishes each zone also solves
its problem with its tie-line values fixed to the mean of the copies released in the round before. When every zone
can, the zones' solutions form a dispatch that is feasible for the whole network and whose copies agree exactly.

Columns: the rounds to the rule by the iterate and with the polished point; the local solves per zone to the
rule (one per round plus one per polishing round) with the gate, without polishing and polishing every round; the first round whose polish was
feasible for every zone; the polished cost's gap to the optimum in that round and at the end; time per round with
and without polishing and their ratio (the extra local solve); time to the rule with polishing and without
(the iterate's rule, in the ``polish=False`` run).
"""

from __future__ import annotations

import argparse
import time
import warnings

from bench_power import ACCEPTANCE_CASES, TARGETS, _first_hit, _table, local_solves

import cvxdp
from cvxdp_models.power.template import build

LARGE = {"case1354pegase (8 auto zones)": {"network": "case1354pegase", "auto_zones": 8},
         "case2869pegase (16 auto zones)": {"network": "case2869pegase", "auto_zones": 16}}


def _run(agents, polish: bool | None, rounds: int):
    """``polish=None``: polish in every round (``ADMM.polish_below = None``, the default before the gate)."""
    algo = cvxdp.ADMM(rounds=rounds, polish=polish is not False)
    if polish is None:
        algo.polish_below = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        result = cvxdp.solve(agents, algorithm=algo, seed=0)
    return result.history, time.perf_counter() - start


def row(label: str, model: dict, rounds: int) -> dict:
    inst = build(dict(model, objective="cost"), base_dir=".")
    ref = inst.central(ac_check=False)["objective"]
    on, on_s = _run(inst.agents, True, rounds)
    off, off_s = _run(inst.agents, False, rounds)
    every, _ = _run(inst.agents, None, rounds)
    hit = _first_hit(on, ref, 0.01, 0.01, factor=0.5, polished=True)
    hit_every = _first_hit(every, ref, 0.01, 0.01, factor=0.5, polished=True)
    iterate = _first_hit(off, ref, 0.01, 0.01, factor=0.5)
    complete = on["round"][on["polished"] == 1.0]
    first = int(complete.iloc[0]) if len(complete) else None
    gaps = (on["polished_objective"] - ref) / abs(ref)
    per_on, per_off = on["wall_time"].mean(), off["wall_time"].mean()
    return {
        "case": label, "target": TARGETS.get(label, "-"),
        "rounds (iterate)": iterate, "rounds (iterate, polish on)": _first_hit(on, ref, 0.01, 0.01, factor=0.5),
        "rounds (with polish)": hit, "first polished round": first,
        "solves to rule (polish)": local_solves(on, hit), "solves to rule (plain)": iterate,
        "rounds (polish every round)": hit_every, "solves (polish every round)": local_solves(every, hit_every),
        "polished gap there": float(gaps[on["round"] == first].iloc[0]) if first else None,
        "polished gap at end": float(gaps.iloc[-1]) if first else None,
        "polished rounds": f"{len(complete)}/{len(on)}",
        "s/round polish": per_on, "s/round plain": per_off, "ratio": per_on / per_off,
        "s to rule polish": float(on["wall_time"][:hit].sum()) if hit else None,
        "s to rule plain": float(off["wall_time"][:iterate].sum()) if iterate else None,
        "total s (both runs)": on_s + off_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--only", nargs="+", choices=sorted({**ACCEPTANCE_CASES, **LARGE}))
    parser.add_argument("--large", action="store_true", help="also the two pegase cases (about 10 minutes more)")
    args = parser.parse_args()
    cases = {**ACCEPTANCE_CASES, **(LARGE if args.large else {})}
    if args.only:
        cases = {k: {**ACCEPTANCE_CASES, **LARGE}[k] for k in args.only}
    rows = []
    for label, model in cases.items():
        rows.append(row(label, model, args.rounds))
        print(_table(rows[-1:]), flush=True)
    print(_table(rows))


if __name__ == "__main__":
    main()
