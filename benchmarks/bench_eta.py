"""LinearizedADMM's automatic eta: ``eta_p = L_p`` vs the default (``0.55 L_p`` for a quadratic objective in a
non-private run; in a private run ``L_p``, grown while the released copies only move with the noise), measured
in one run on the power and logistic templates.

    PYTHONPATH=. python benchmarks/bench_eta.py                 # all five parts (about 30 minutes on 2 cores)
    PYTHONPATH=. python benchmarks/bench_eta.py --part balance  # one part: cost | balance | private | logistic | noise

* ``cost``: rounds to 1e-3 of the centralized optimum (and mismatch < 1e-3) on the seven rows of
  ``bench_power.py --acceptance`` (its LinearizedADMM settings);
* ``balance``: consensus residual after 300 rounds on the balance objective (the one every DP study uses),
  case14 and case118 in the shipped zones, case300 in 4 automatic zones;
* ``private``: why a private run starts from ``eta_p = L_p`` -- case14 balance, ObjG / OutG, 100 rounds, mean
  of 3 seeds, at ``L_p`` and at ``0.55 L_p`` (both fixed), and the default;
* ``logistic``: non-private runs of the federated cases with the default settings against the previous defaults
  (eta = the declared bound ``C^2/2``, rho starting at 1) and the case file's hand-tuned setting: rounds to
  1e-2 / 1e-3 of the centralized optimum, ``cases/digits_fl.toml`` (1,500 rounds) and with ``--femnist DIR``
  ``cases/femnist_fl.toml`` (300 rounds);
* ``noise``: the default's growth with the noise (:mod:`cvxdp.families.consensus.step_sizes`) vs a fixed ``eta_p = L_p``, over
  per-step epsilons 0.1 / 1 / 10 and three mechanisms, mean of 3 seeds: case14 balance (100 rounds, final
  objective; a fixed ``32 L_p``, the best of a sweep at eps = 1, for reference) and the federated digits case
  (``cases/digits_fl.toml``, 200 rounds, test error); with ``--femnist DIR`` also the FEMNIST case
  (``cases/femnist_fl.toml`` on that LEAF directory, 40 rounds, test error).
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
from bench_power import ACCEPTANCE_CASES, CASE14_ZONES, CASE118_ZONES, _first_hit, _table

import cvxdp
from cvxdp.config.build import build_instance, load_case
from cvxdp.families.consensus.step_sizes import ETA_FACTOR_QUADRATIC
from cvxdp.schedules import AdaptiveRho, AutoEta
from cvxdp_models.power.template import build

#: the mechanisms of the noise part
MECHANISMS = {"ObjG": (cvxdp.ObjectivePerturbation, "gaussian"), "OutG": (cvxdp.OutputPerturbation, "gaussian"),
              "ObjL": (cvxdp.ObjectivePerturbation, "laplace")}

#: (label, eta) of the two variants: the majorization bound, and the default
VARIANTS = (("eta = L_p", AutoEta(1.0)), ("default", "auto"))


def cost_rows(rounds: int) -> list[dict]:
    rows = []
    for label, model in ACCEPTANCE_CASES.items():
        inst = build(dict(model, objective="cost"), base_dir=".")
        ref = inst.central(ac_check=False)["objective"]
        row = {"case": label}
        for name, eta in VARIANTS:
            algo = cvxdp.LinearizedADMM(eta=eta, rounds=rounds, tol_primal=1e-5, tol_dual=1e-5)
            result = cvxdp.solve(inst.agents, algorithm=algo, seed=0)
            row[f"rounds to 1e-3, {name}"] = _first_hit(result.history, ref, 1e-3, 1e-3)
            row[f"eta, {name}"] = "/".join(f"{v['eta']:.3g}" for v in result.config["eta_per_agent"].values())
        rows.append(row)
        print(_table(rows[-1:]), flush=True)
    return rows


def balance_rows(rounds: int = 300) -> list[dict]:
    rows = []
    for label, model in (("case14 (3 zones)", {"network": "case14", "zones": CASE14_ZONES}),
                         ("case118 (3 zones)", {"network": "case118", "zones": CASE118_ZONES}),
                         ("case300 (4 auto zones)", {"network": "case300", "auto_zones": 4})):
        inst = build(dict(model, objective="balance"), base_dir=".")
        row = {"case": label}
        for name, eta in VARIANTS:
            result = cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(eta=eta, rounds=rounds), seed=0)
            row[f"consensus after {rounds}, {name}"] = float(result.history["consensus_residual"].iloc[-1])
        rows.append(row)
        print(_table(rows[-1:]), flush=True)
    return rows


def private_rows(rounds: int = 100, seeds: int = 3) -> list[dict]:
    inst = build({"network": "case14", "zones": CASE14_ZONES, "objective": "balance"}, base_dir=".")
    rows = []
    for mech in ("ObjG", "OutG"):
        cls = cvxdp.ObjectivePerturbation if mech == "ObjG" else cvxdp.OutputPerturbation
        row = {"mechanism": f"{mech}, eps = 1"}
        for name, eta in (("eta = L_p", AutoEta(1.0, noise_growth=1.0)),
                          (f"eta = {ETA_FACTOR_QUADRATIC} L_p", AutoEta(ETA_FACTOR_QUADRATIC, noise_growth=1.0)),
                          ("default", "auto")):
            objective = []
            for seed in range(seeds):
                result = cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(eta=eta, rounds=rounds),
                                     privacy=cls("gaussian", epsilon=1.0, delta=1e-6), seed=seed)
                objective.append(float(result.history["objective"].iloc[-1]))
            row[f"objective, {name}"] = float(np.mean(objective))
        rows.append(row)
        print(_table(rows[-1:]), flush=True)
    return rows


def _logistic_instance(path: str, femnist: str | None = None):
    case = load_case(path)
    if femnist:
        case = replace(case, model={**case.model, "path": str(Path(femnist).resolve())})
    return build_instance(case)


def _rounds_to(history, ref: float, rel: float) -> int | None:
    ok = (history["objective"] - ref).abs() < rel * abs(ref)
    return int(history["round"][ok].iloc[0]) if ok.any() else None


def logistic_rows(femnist: str | None = None) -> list[dict]:
    """Non-private federated runs: the default settings vs the previous defaults and the hand-tuned ones."""
    cases = [("digits (5 agents)", _logistic_instance("cases/digits_fl.toml"), 1500,
              {"hand-tuned (eta 0.004, rho 0.0025)": {"eta": 0.004, "rho": 0.0025}})]
    if femnist:
        cases.append(("femnist (10 writers)", _logistic_instance("cases/femnist_fl.toml", femnist), 300,
                      {"hand-tuned (rho 0.002, the default eta)": {"rho": 0.002}}))
    rows = []
    for label, inst, rounds, tuned in cases:
        ref = inst.central()["objective"]
        declared = max(a.lipschitz for a in inst.agents)
        variants = {"before (eta = declared bound, rho from 1)": {"eta": declared, "rho": AdaptiveRho(decrease=False)},
                    **tuned, "default": {}}
        for name, settings in variants.items():
            result = cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(rounds=rounds, **settings), seed=0)
            h = result.history
            etas = [v["eta"] for v in (result.config.get("eta_per_agent") or {}).values()]
            rows.append({"case": label, "settings": name, "rounds to 1e-2": _rounds_to(h, ref, 1e-2),
                         "rounds to 1e-3": _rounds_to(h, ref, 1e-3),
                         "rounds run": len(h), "final gap": float((h["objective"].iloc[-1] - ref) / abs(ref)),
                         "consensus residual": float(h["consensus_residual"].iloc[-1]),
                         "eta": f"{min(etas):.3g}-{max(etas):.3g}" if etas else f"{h['eta'].iloc[0]:.3g}",
                         "rho start": float(h["rho"].iloc[0]), "rho end": float(h["rho"].iloc[-1])})
            print(_table(rows[-1:]), flush=True)
    return rows


def _private_mean(inst, mech: str, eps: float, eta, rounds: int, seeds: int, metric, **algorithm) -> tuple[float, float]:
    """Mean of ``metric(result)`` over seeds, and the mean final eta multiplier of the default's growth."""
    cls, noise = MECHANISMS[mech]
    values, growth = [], []
    for seed in range(seeds):
        result = cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(eta=eta, rounds=rounds, **algorithm),
                             privacy=cls(noise, epsilon=eps, delta=1e-6), seed=seed)
        values.append(metric(result))
        growth += [v.get("noise_growth", 1.0) for v in result.config["eta_per_agent"].values()]
    return float(np.mean(values)), float(np.mean(growth))


def noise_rows(seeds: int = 3, femnist: str | None = None) -> list[dict]:
    case14 = build({"network": "case14", "zones": CASE14_ZONES, "objective": "balance"}, base_dir=".")
    digits = build_instance(load_case("cases/digits_fl.toml"))
    final = lambda result: float(result.history["objective"].iloc[-1])  # noqa: E731
    test_error = lambda inst: lambda result: float(inst.evaluate(result)["test_error"])  # noqa: E731
    cases = [("case14 balance", case14, 100, final, "objective", True, {}),
             ("digits (5 agents)", digits, 200, test_error(digits), "test error", False, {"rho": 0.0025})]
    if femnist:  # the shipped FEMNIST case on a local LEAF directory (its rho; eta="auto" instead of its schedule)
        case = load_case("cases/femnist_fl.toml")
        fem = build_instance(replace(case, model={**case.model, "path": str(Path(femnist).resolve())}))
        cases.append(("femnist (10 writers)", fem, 40, test_error(fem), "test error", False, {"rho": 0.002}))
    rows = []
    for label, inst, rounds, metric, name, extra, algorithm in cases:
        for mech in MECHANISMS:
            for eps in (0.1, 1.0, 10.0):
                row = {"case": label, "metric": name, "mechanism": mech, "eps per step": eps}
                row["eta = L_p"], _ = _private_mean(inst, mech, eps, AutoEta(noise_growth=1.0), rounds, seeds, metric,
                                                    **algorithm)
                row["default"], row["eta growth"] = _private_mean(inst, mech, eps, "auto", rounds, seeds, metric,
                                                                  **algorithm)
                if extra:
                    row["eta = 32 L_p"], _ = _private_mean(inst, mech, eps, AutoEta(32.0, noise_growth=1.0), rounds,
                                                           seeds, metric, **algorithm)
                rows.append(row)
                print(_table(rows[-1:]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["cost", "balance", "private", "logistic", "noise"], nargs="+",
                        default=["cost", "balance", "private", "logistic", "noise"])
    parser.add_argument("--rounds", type=int, default=1500, help="cost part: LinearizedADMM rounds")
    parser.add_argument("--femnist", metavar="DIR", help="logistic and noise parts: also the FEMNIST case on this LEAF directory "
                        "(e.g. ../shared/data/femnist_leaf)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    parts = {"cost": lambda: cost_rows(args.rounds), "balance": balance_rows, "private": private_rows,
             "logistic": lambda: logistic_rows(args.femnist), "noise": lambda: noise_rows(femnist=args.femnist)}
    for part in args.part:
        print(f"\n== {part}")
        print(_table(parts[part]()))


if __name__ == "__main__":
    main()
