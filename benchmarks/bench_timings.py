"""Timings that used to be asserted in the test suite, measured here instead (tests carry no wall-clock limits).

Prints, in one run: PLD/RDP accounting of 1,000 composed calls, a ledger's per-round totals for 10 agents from
the cache, OpenDP sampling per 1,000 coordinates (when the ``secure`` extra is installed) and the automatic
partition of case1354pegase into 8 zones (when the ``power`` extra is installed).

Usage: ``python benchmarks/bench_timings.py``
"""

from __future__ import annotations

import time

from cvxdp.privacy import NoisePlan, PrivacyLedger, pld_epsilon, rdp_epsilon


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    rows = []
    for noise, scale in (("laplace", 2.0 * 1.2345), ("gaussian", 6.0 * 1.2345)):
        plan = NoisePlan(noise, scale, 1.0, 0.5, 0.0 if noise == "laplace" else 1e-6)
        rows.append((f"PLD of 1,000 {noise} calls (cold)", _best(lambda p=plan: pld_epsilon([(p, 1000)], 1e-5), 1)))
        rows.append((f"RDP of 1,000 {noise} calls (cold)", _best(lambda p=plan: rdp_epsilon([(p, 1000)], 1e-5), 1)))

    agents = [f"zone{i}" for i in range(10)]
    ledger = PrivacyLedger(agents, target_delta=1e-5)
    for p, name in enumerate(agents):
        ledger.record(name, NoisePlan("gaussian", 3.0 + 0.1 * (p % 3), 0.5, 0.9, 1e-6), 300)

    def totals() -> None:
        for name in agents:
            for acc in ("pld", "rdp", "basic"):
                ledger.spent(name, acc)

    totals()  # warm the cache
    rows.append(("ledger totals for 10 agents, one round (cached)", _best(totals)))

    try:
        from cvxdp.privacy import secure

        for noise in ("laplace", "gaussian"):
            secure.sample(noise, 1.3, 1000)  # build the measurement once
            rows.append((f"OpenDP {noise}, 1,000 coordinates", _best(lambda n=noise: secure.sample(n, 1.3, 1000))))
    except ImportError:
        rows.append(("OpenDP sampling", float("nan")))

    try:
        from cvxdp_models.power.network import load_case
        from cvxdp_models.power.zones import auto_zones, clear_auto_zones_cache

        case = load_case("case1354pegase")
        fresh = lambda: (clear_auto_zones_cache(), auto_zones(case, 8))  # noqa: E731
        rows.append(("auto_zones(case1354pegase, 8)", _best(fresh, 1)))
        rows.append(("auto_zones(case1354pegase, 8), kept from the last call", _best(lambda: auto_zones(case, 8))))
    except ImportError:
        rows.append(("auto_zones(case1354pegase, 8)", float("nan")))

    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds * 1e3:10.2f} ms")


if __name__ == "__main__":
    main()
