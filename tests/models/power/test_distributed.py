"""Distributed acceptance: non-private ADMM and linearized ADMM reach the centralized optimum (SPEC §6.1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

import cvxdp  # noqa: E402
from cvxdp_models.power.template import build  # noqa: E402

ZONES = {
    "case14": [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]],
    "case118": [
        [b for b in range(1, 33) if b != 24] + [113, 114, 115, 117],
        list(range(33, 68)),
        [24, *range(68, 113), 116, 118],
    ],
}
HERE = Path(".")


def _instance(network: str, objective: str):
    return build({"network": network, "zones": ZONES[network], "objective": objective}, base_dir=HERE)


@pytest.fixture(scope="module")
def case14_balance():
    return _instance("case14", "balance")


@pytest.fixture(scope="module")
def case14_cost():
    return _instance("case14", "cost")


def _final(result):
    return result.history.iloc[-1]


@pytest.mark.parametrize(
    "algorithm",
    [cvxdp.ADMM(rho=1.0, rounds=30), cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=200)],
    ids=["admm", "ladmm"],
)
def test_case14_balance_reaches_zero(case14_balance, algorithm):
    result = cvxdp.solve(case14_balance.agents, algorithm=algorithm)
    last = _final(result)
    assert last["objective"] < 1e-6
    assert last["primal_residual"] < 1e-3
    assert last["max_violation"] < 1e-6
    metrics = case14_balance.evaluate(result)
    assert metrics["balance_deviation"] < 1e-6 and abs(metrics["objective_gap"]) < 1e-6


@pytest.mark.parametrize(
    "algorithm",
    [cvxdp.ADMM(rho=1.0, rounds=60), cvxdp.LinearizedADMM(rho=5.0, eta=5.0, rounds=150)],
    ids=["admm", "ladmm"],
)
def test_case14_cost_within_one_percent(case14_cost, algorithm):
    result = cvxdp.solve(case14_cost.agents, algorithm=algorithm)
    metrics = case14_cost.evaluate(result)
    assert abs(metrics["relative_gap"]) < 0.01
    assert abs(metrics["cost"] - metrics["central_cost"]) / metrics["central_cost"] < 0.01
    assert _final(result)["primal_residual"] <= 0.01


def test_case14_private_runs_keep_objective_perturbation_feasible(case14_balance):
    obj = cvxdp.solve(
        case14_balance.agents,
        algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=15),
        privacy=cvxdp.ObjectivePerturbation("laplace", epsilon=1.0),
        seed=1,
    )
    out = cvxdp.solve(
        case14_balance.agents,
        algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=15),
        privacy=cvxdp.OutputPerturbation("laplace", epsilon=1.0),
        seed=1,
    )
    assert obj.history["noise_magnitude"].iloc[-1] > 0
    assert obj.history["max_violation"].max() < 1e-6  # ObjPert iterates stay in W_p
    assert out.history["max_violation"].max() > 1e-3  # OutPert iterates leave it


@pytest.mark.slow
@pytest.mark.parametrize(
    "objective,algorithm,tol",
    [
        ("balance", cvxdp.ADMM(rho=1.0, rounds=30), 1e-6),
        ("balance", cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=500), 1e-6),
        ("cost", cvxdp.ADMM(rho=1.0, rounds=100), 0.01),
        ("cost", cvxdp.LinearizedADMM(rho=15.0, eta=15.0, rounds=300), 0.01),
    ],
    ids=["balance-admm", "balance-ladmm", "cost-admm", "cost-ladmm"],
)
def test_case118_reaches_the_central_optimum(objective, algorithm, tol):
    inst = _instance("case118", objective)
    result = cvxdp.solve(inst.agents, algorithm=algorithm)
    metrics = inst.evaluate(result)
    if objective == "balance":
        assert metrics["zone_objective"] < tol
    else:
        assert abs(metrics["relative_gap"]) < tol
    assert _final(result)["primal_residual"] <= 0.01


def _first_hit(history, ref: float, rel: float, tol: float, factor: float = 1.0):
    ok = ((history["objective"] - ref).abs() < rel * abs(ref)) & (factor * history["mismatch"] < tol)
    return int(history["round"][ok].iloc[0]) if ok.any() else None


def test_default_admm_beats_powermodelsada_on_case14_in_two_areas():
    """Issue 12: defaults (rho="auto" with the template's per-block weights, over-relaxation), PowerModelsADA's
    stopping rule (its ADMM mismatch, half the copies' pairwise mismatch, < 0.01; objective within 1 %): within
    the issue's target of 8 rounds (PowerModelsADA's published table: 12; measured: 5)."""
    inst = build({"network": "case14", "zones": [[1, 2, 3, 4, 5], list(range(6, 15))], "objective": "cost"},
                 base_dir=HERE)
    ref = inst.central(ac_check=False)["objective"]
    result = cvxdp.solve(inst.agents, algorithm=cvxdp.ADMM(rounds=8), seed=0)
    assert _first_hit(result.history, ref, 0.01, 0.01, factor=0.5) is not None
    assert set(result.config["rho_blocks"]) == {"1", "100"}  # the voltage block and the flow block


def test_default_admm_reaches_1e3_of_the_optimum_on_case14(case14_cost):
    ref = case14_cost.central(ac_check=False)["objective"]
    result = cvxdp.solve(case14_cost.agents, algorithm=cvxdp.ADMM(), seed=0)
    assert _first_hit(result.history, ref, 1e-3, 1e-3) is not None


def test_zone_penalty_weights_are_public_and_declared_for_every_shared_key(case14_cost):
    for agent in case14_cost.agents:
        assert set(agent.rho_scale) == set(agent.shared)
        for key, weights in agent.rho_scale.items():
            expected = [100.0] * 2 + [1.0] * 4 if key.startswith("line") else 100.0
            assert np.asarray(weights).tolist() == expected
