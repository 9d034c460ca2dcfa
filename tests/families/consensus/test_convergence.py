"""Non-private LinearizedADMM and ADMM reach the centralized CVXPY optimum (issue 2 acceptance)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp


def generated_agents(seed: int, agents: int = 4, dim: int = 6, hand_gradient: bool = True):
    """Box, SOC and linear sets, local-only variables, shared slices of different variables.

    ``hand_gradient=False`` leaves the gradient to CVXPY's ``Expression.grad`` (slow but exercised).
    """
    rng = np.random.default_rng(seed)
    out = []
    for p in range(agents):
        x = cp.Variable(dim, name=f"x{p}")
        loc = cp.Variable(3, name=f"loc{p}")
        A = cp.Parameter((10, dim), value=rng.normal(size=(10, dim)))
        b = cp.Parameter(10, value=rng.normal(size=10) + 1.0)
        kind = p % 3
        cons = [x >= -1, x <= 1, loc >= -2, loc <= 2]
        if kind == 1:
            cons += [cp.norm(x[:3], 2) <= 0.8, cp.norm(cp.hstack([x[3], loc[0]]), 2) <= 1.0]
        elif kind == 2:
            cons += [cp.sum(x) + loc[1] <= 0.5, x[0] - loc[2] == 0.1]
        objective = cp.sum_squares(A @ x - b) / 10 + cp.sum_squares(loc - 0.5) + 0.1 * cp.sum(x)

        def gradient(u, A=A.value, b=b.value):  # layout: x (created first), then loc
            return np.concatenate([2 * A.T @ (A @ u[:dim] - b) / 10 + 0.1, 2 * (u[dim:] - 0.5)])

        out.append(cvxdp.Agent(f"agent{p}", objective, cons, shared={"head": x[:4], "tail": x[4:]},
                               gradient=gradient if hand_gradient else None))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_linearized_admm_reaches_central_optimum(seed):
    agents = generated_agents(seed, hand_gradient=seed == 0)
    ref = cvxdp.solve_central(agents)

    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=8.0, rounds=3000, tol_primal=1e-6,
                                                                tol_dual=1e-6))

    final = result.history.iloc[-1]
    assert abs(final["objective"] - ref["objective"]) / abs(ref["objective"]) <= 1e-3
    assert final["consensus_residual"] <= 1e-4
    for key in ("head", "tail"):
        assert np.allclose(result.solution[key], ref["solution"][key], atol=1e-3)


def test_admm_reaches_optimum_in_fewer_rounds():
    agents = generated_agents(3)
    ref = cvxdp.solve_central(agents)
    tol = {"tol_primal": 1e-6, "tol_dual": 1e-6}

    exact = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=2000, **tol))
    linear = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=8.0, rounds=3000, **tol))

    for result in (exact, linear):
        assert result.stop_reason == "tolerance"
        assert abs(result.history["objective"].iloc[-1] - ref["objective"]) / abs(ref["objective"]) <= 1e-3
        assert result.history["consensus_residual"].iloc[-1] <= 1e-4
    assert len(exact.history) < len(linear.history)


def test_more_local_updates_do_not_break_convergence():
    agents = generated_agents(4, agents=3)
    ref = cvxdp.solve_central(agents)

    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=8.0, local_updates=5, rounds=3000,
                                                                tol_primal=1e-6, tol_dual=1e-6))

    assert abs(result.history["objective"].iloc[-1] - ref["objective"]) / abs(ref["objective"]) <= 1e-3
