"""Private runs: feasibility of communicated iterates, determinism, the budget guard, save/load."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp


def boundary_agents(n_agents: int = 3, dim: int = 4):
    """The unconstrained optimum (d = 2) lies outside W = {||x|| <= 1, |x| <= 1}: the optimum is on the boundary."""
    agents = []
    for p in range(n_agents):
        x = cp.Variable(dim)
        d = cp.Parameter(dim, value=np.full(dim, 2.0) + 0.1 * p)
        agents.append(cvxdp.Agent(f"a{p}", 0.5 * cp.sum_squares(x - d), [cp.norm(x, 2) <= 1, x <= 1, x >= -1],
                                  shared={"x": x}, gradient=lambda u, d=d: u - d.value,
                                  sensitivity=cvxdp.Sensitivity(l1=0.2, l2=0.2, relation="one d_i moves by 0.2")))
    return agents


ALGO = cvxdp.LinearizedADMM(rho=1.0, eta=2.0, local_updates=2, rounds=25)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_objective_perturbation_keeps_every_communicated_iterate_feasible(noise):
    agents = boundary_agents()
    mech = cvxdp.ObjectivePerturbation(noise, epsilon=0.5, delta=1e-6 if noise == "gaussian" else None)

    result = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=1)

    assert result.history["noise_magnitude"].min() > 0
    assert result.agent_history["violation"].max() <= 1e-7  # Clarabel's tolerance


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_output_perturbation_leaves_the_set_on_a_boundary_optimum(noise):
    agents = boundary_agents()
    mech = cvxdp.OutputPerturbation(noise, epsilon=0.5, delta=1e-6 if noise == "gaussian" else None)

    result = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=1)

    assert (result.agent_history["violation"] > 1e-3).mean() > 0.5


def test_same_seed_same_numbers_and_different_seed_differs():
    agents = boundary_agents()
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)
    timing = ["wall_time", "solver_time"]

    a = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=7).history.drop(columns=timing)
    b = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=7).history.drop(columns=timing)
    c = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=8).history.drop(columns=timing)

    assert a.equals(b)
    assert not np.allclose(a["objective"], c["objective"])


def test_budget_stops_before_the_round_that_would_exceed_it():
    agents = boundary_agents()
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=0.5, delta=1e-6)
    algo = cvxdp.LinearizedADMM(rho=1.0, eta=2.0, local_updates=2, rounds=200)

    result = cvxdp.solve(agents, algorithm=algo, privacy=mech, budget=(3.0, 1e-5), accountant="rdp", seed=0)

    assert result.stop_reason == "budget"
    assert 0 < len(result.history) < 200
    assert result.privacy["worst"]["rdp"] <= 3.0
    one_more = cvxdp.PrivacyLedger.from_dict(result.ledger.to_dict())
    for agent in agents:
        one_more.record(agent.name, mech.noise_plan(agent, min_weight=3.0, separable=False, steps=400,
                                                    accountant="rdp"), count=2)
    assert one_more.spent("a0", "rdp")[0] > 3.0


def test_result_save_and_load_round_trip(tmp_path):
    agents = boundary_agents()
    mech = cvxdp.OutputPerturbation("laplace", epsilon=1.0)
    result = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=2)

    loaded = cvxdp.load_result(result.save(tmp_path / "run"))

    assert loaded.summary() == result.summary()
    assert loaded.config == result.config
    assert loaded.seed == 2
    assert np.array_equal(loaded.solution["x"], result.solution["x"])
    assert loaded.privacy == result.privacy
    assert set(loaded.history.columns) >= {"objective", "consensus_residual", "max_violation", "noise_magnitude",
                                           "eps_basic", "eps_rdp", "wall_time", "solver_time"}


def test_infinite_privacy_totals_reload_as_floats(tmp_path):
    # JSON has no infinity: the file holds the string "inf", the reloaded result the float again
    agents = boundary_agents()
    result = cvxdp.solve(agents, algorithm=ALGO, privacy=cvxdp.OutputPerturbation("laplace", epsilon=1.0), seed=2)
    result.privacy["worst"]["rdp"] = float("inf")
    result.privacy["worst"]["basic"] = [float("-inf"), 0.0]

    loaded = cvxdp.load_result(result.save(tmp_path / "run"))

    assert loaded.privacy["worst"]["rdp"] == float("inf")
    assert loaded.privacy["worst"]["basic"] == [float("-inf"), 0.0]
    assert loaded.privacy["worst"]["agent"] == result.privacy["worst"]["agent"]
    assert loaded.privacy == result.privacy


def test_authors_step_schedule_takes_epsilon_from_the_mechanism():
    agents = boundary_agents()
    eta = cvxdp.schedules.StepSchedule(c1=2.0, c2=0.5, period=5)  # c1 * 1.2**floor(t/5) + c2/eps
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=0.25, delta=1e-6)

    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=eta, rounds=6), privacy=mech)
    plain = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=eta, rounds=6))

    assert list(result.history["eta"]) == pytest.approx([2.0 + 2.0] * 4 + [2.4 + 2.0] * 2)
    assert list(plain.history["eta"]) == pytest.approx([2.0] * 4 + [2.4] * 2)


def test_ledger_reports_all_accountants_per_agent():
    agents = boundary_agents()
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=0.5, delta=1e-6)

    result = cvxdp.solve(agents, algorithm=ALGO, privacy=mech, seed=0)

    steps = ALGO.rounds * ALGO.local_updates
    for name in ("a0", "a1", "a2"):
        entry = result.privacy["per_agent"][name]
        assert entry["basic"][0] == pytest.approx(0.5 * steps)
        assert entry["basic"][1] == pytest.approx(1e-6 * steps)
        assert 0 < entry["pld"] <= entry["rdp"] < entry["basic"][0]
