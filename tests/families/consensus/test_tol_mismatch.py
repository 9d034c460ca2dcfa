"""The consensus family's ``tol_mismatch`` stopping rule (issue 12: PowerModelsADA's rule, read from released
copies only)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.config.build import make_algorithm
from cvxdp.errors import InvalidParameterError


def _agents(seed: int = 0) -> list[cvxdp.Agent]:
    rng = np.random.default_rng(seed)
    out = []
    for p in range(3):
        x = cp.Variable(3, name=f"x{p}")
        target = rng.normal(size=3)  # the consensus optimum is interior: the copies agree only in the limit
        out.append(cvxdp.Agent(f"a{p}", cp.sum_squares(x - target), [x >= -5, x <= 5], shared={"v": x[:2]},
                               lipschitz=2.0))
    return out


@pytest.mark.parametrize("make", [lambda tol: cvxdp.ADMM(rho=1.0, rounds=200, tol_mismatch=tol),
                                  lambda tol: cvxdp.LinearizedADMM(rho=1.0, rounds=400, tol_mismatch=tol)],
                         ids=["admm", "ladmm"])
def test_the_run_stops_in_the_first_round_whose_mismatch_is_below_the_tolerance(make):
    full = cvxdp.solve(_agents(), algorithm=make(None), seed=0).history["mismatch"]
    tol = 1e-3 * float(full.iloc[0])  # reached, but not in the first rounds
    first = int(np.argmax(full.to_numpy() <= tol)) + 1
    assert 2 < first < len(full)
    res = cvxdp.solve(_agents(), algorithm=make(tol), seed=0)
    assert res.stop_reason == "tolerance"
    assert len(res.history) == first < len(full)
    assert res.history["mismatch"].iloc[-1] <= tol < res.history["mismatch"].iloc[-2]
    assert res.config["algorithm"]["tol_mismatch"] == tol


def test_without_tol_mismatch_the_description_says_none():
    assert cvxdp.ADMM(rounds=3).describe()["tol_mismatch"] is None


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), "small"])
def test_a_bad_tol_mismatch_is_refused_naming_it(bad):
    with pytest.raises(InvalidParameterError, match="'tol_mismatch' parameter of ADMM must be a float in"):
        cvxdp.solve(_agents(), algorithm=cvxdp.ADMM(rounds=2, tol_mismatch=bad), seed=0)


def test_case_files_take_tol_mismatch_for_both_consensus_algorithms():
    assert make_algorithm({"name": "admm", "tol_mismatch": 0.02}).tol_mismatch == 0.02
    assert make_algorithm({"name": "ladmm", "tol_mismatch": 0.02}).tol_mismatch == 0.02
