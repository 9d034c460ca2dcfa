"""Small same-seed runs of every algorithm family, pinned as regression data for the round-loop redesign.

``python tests/regression/pinned_runs.py`` rewrites ``tests/regression/data/*.csv``; do that only when a change
of numbers is intended, and say why in the commit. The test (``test_pinned_histories.py``) reruns each case and
compares every numeric history column except timings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd

import cvxdp
from cvxdp_models.erm import make_erm
from cvxdp_models.toy import make_agents
from cvxdp_models.vertical import synthetic_parties

DATA = Path(__file__).parent / "data"
TIMING = ("wall_time", "solver_time")


def _ladmm(mechanism: str) -> Callable[[], cvxdp.Result]:
    def run() -> cvxdp.Result:
        privacy = cvxdp.privacy.make_mechanism(mechanism, epsilon=1.0, delta=1e-6 if mechanism.endswith("G") else None)
        return cvxdp.solve(make_agents(agents=3, seed=1),
                           algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, local_updates=2, rounds=8),
                           privacy=privacy, seed=3)
    return run


def _admm() -> cvxdp.Result:
    return cvxdp.solve(make_agents(agents=3, seed=1), algorithm=cvxdp.ADMM(rho=1.0, rounds=8, relaxation=1.0), seed=0)


def _graph(algorithm: type) -> Callable[[], cvxdp.Result]:
    def run() -> cvxdp.Result:
        inst = make_erm({"nodes": 5, "C": 10.0, "rho": 1.0, "max_samples": 120})
        return cvxdp.solve(inst.agents, algorithm=algorithm(rounds=6), privacy=cvxdp.PenaltyPerturbation(alpha=3.0),
                           seed=5)
    return run


def _sharing() -> cvxdp.Result:
    parties, labels = synthetic_parties(12, 2, 2, seed=0)
    return cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=1.0, lam=0.1, epochs=5, labels=labels),
                       privacy=cvxdp.SharingGaussian(sigma=0.3, delta=1e-5), seed=7)


CASES: dict[str, Callable[[], cvxdp.Result]] = {
    "ladmm_objg": _ladmm("ObjG"), "ladmm_outl": _ladmm("OutL"), "admm": _admm,
    "madmm_pp": _graph(cvxdp.MADMM), "mradmm_pp": _graph(cvxdp.MRADMM), "sharing": _sharing,
}


def history(name: str) -> pd.DataFrame:
    """The run's history without timing columns (numeric columns only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = CASES[name]()
    frame = result.history.drop(columns=[c for c in TIMING if c in result.history.columns])
    return frame.select_dtypes(include="number").reset_index(drop=True)


if __name__ == "__main__":
    DATA.mkdir(exist_ok=True)
    for case in CASES:
        history(case).to_csv(DATA / f"{case}.csv", index=False, float_format="%.17g")
        print("pinned", case)
