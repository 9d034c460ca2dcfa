"""Power template benchmark: time per round and per zone, and the share of it spent inside the solver.

    PYTHONPATH=. python benchmarks/bench_power.py                 # case118 (3 zones), pegase (8 zones)
    PYTHONPATH=. python benchmarks/bench_power.py --acceptance    # + non-private ADMM / LADMM vs central

Each row runs non-private linearized ADMM (J = 1) and exact ADMM on the "balance" objective. "solver share" is
the engine's ``solver_time`` (local conic solves) over its ``wall_time`` (the whole round, all zones run
serially); "setup" is everything before round 1 (building the agents, checks, compilation).
"""

from __future__ import annotations

import argparse
import time

import cvxdp
from cvxdp_models.power.template import build

CASE118_ZONES = [
    [b for b in range(1, 33) if b != 24] + [113, 114, 115, 117],
    list(range(33, 68)),
    [24, *range(68, 113), 116, 118],
]
CASE14_ZONES = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]
CASES = {
    "case118": {"network": "case118", "zones": CASE118_ZONES},
    "case1354pegase": {"network": "case1354pegase", "auto_zones": 8},
    "case14": {"network": "case14", "zones": CASE14_ZONES},
}


def bench_case(name: str, rounds: int) -> list[dict]:
    rows = []
    start = time.perf_counter()
    inst = build(dict(CASES[name], objective="balance"), base_dir=".")
    build_s = time.perf_counter() - start
    n_zones = len(inst.agents)
    sizes = [a.layout.size for a in inst.agents]
    for algo in (cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=rounds), cvxdp.ADMM(rho=1.0, rounds=rounds)):
        start = time.perf_counter()
        result = cvxdp.solve(inst.agents, algorithm=algo)
        total = time.perf_counter() - start
        h = result.history
        wall, solver = float(h["wall_time"].sum()), float(h["solver_time"].sum())
        rows.append(
            {
                "case": name,
                "zones": n_zones,
                "vars/zone": f"{min(sizes)}-{max(sizes)}",
                "algorithm": algo.name,
                "rounds": len(h),
                "build_s": build_s,
                "setup_s": total - wall,
                "ms/round": 1e3 * wall / len(h),
                "ms/round/zone": 1e3 * wall / len(h) / n_zones,
                "solver share": solver / wall,
                "final objective": float(h["objective"].iloc[-1]),
            }
        )
    return rows


def acceptance() -> list[dict]:
    """Rounds and wall time for non-private ADMM / LADMM to reach the centralized optimum (3 zones)."""
    runs = [
        ("case14", "balance", cvxdp.ADMM(rho=1.0, rounds=30)),
        ("case14", "balance", cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=300)),
        ("case14", "cost", cvxdp.ADMM(rho=1.0, rounds=100)),
        ("case14", "cost", cvxdp.LinearizedADMM(rho=5.0, eta=5.0, rounds=300)),
        ("case118", "balance", cvxdp.ADMM(rho=1.0, rounds=30)),
        ("case118", "balance", cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=500)),
        ("case118", "cost", cvxdp.ADMM(rho=1.0, rounds=100)),
        ("case118", "cost", cvxdp.LinearizedADMM(rho=15.0, eta=15.0, rounds=500)),
    ]
    rows = []
    for network, objective, algo in runs:
        inst = build(dict(CASES[network], objective=objective), base_dir=".")
        ref = inst.central(ac_check=False)["objective"]
        start = time.perf_counter()
        result = cvxdp.solve(inst.agents, algorithm=algo)
        total = time.perf_counter() - start
        h = result.history
        if objective == "balance":
            ok = (h["objective"] < 1e-6) & (h["primal_residual"] < 1e-3)
            target = "obj<1e-6, l2 res<1e-3"
        else:
            ok = ((h["objective"] - ref).abs() < 0.01 * abs(ref)) & (h["primal_residual"] <= 0.01)
            target = "gap<1%, l2 res<=0.01"
        hit = int(h["round"][ok].iloc[0]) if ok.any() else None
        last = h.iloc[-1]
        gap = (last["objective"] - ref) / abs(ref) if objective == "cost" else last["objective"] - ref
        rows.append(
            {
                "case": network,
                "objective": objective,
                "algorithm": algo.name,
                "target": target,
                "rounds to target": hit,
                "s to target": float(h["wall_time"][:hit].sum()) if hit else None,
                "rounds run": len(h),
                "total s": total,
                "final gap": gap,
                "final l2 res": float(last["primal_residual"]),
            }
        )
    return rows


def _table(rows: list[dict]) -> str:
    import pandas as pd

    return pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.4g}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", nargs="+", default=["case118", "case1354pegase"], choices=sorted(CASES))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--acceptance", action="store_true", help="also run the distributed acceptance table")
    args = parser.parse_args()
    rows = [row for name in args.cases for row in bench_case(name, args.rounds)]
    print(_table(rows))
    if args.acceptance:
        print()
        print(_table(acceptance()))


if __name__ == "__main__":
    main()
