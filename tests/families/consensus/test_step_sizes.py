"""Step sizes the engine chooses (issue 12): eta per agent, adaptive rho, divergence/stagnation warnings."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, InvalidParameterError, StepSizeWarning
from cvxdp.families.consensus.step_sizes import ETA_FACTOR_QUADRATIC
from cvxdp.model import Curvature
from cvxdp.model.curvature import estimate_lipschitz, has_constant_hessian
from cvxdp.schedules import AdaptiveRho, AutoEta, as_schedule, describe


def four_agents(seed: int = 0, scale: float = 10.0, lipschitz: bool = False):
    """The issue's four-agent consensus problem (boxes, SOC balls, a linear set, local-only variables), its
    curvature scaled so that the agents' gradient Lipschitz constants are ~40-60 (rho = eta = 5 stalls)."""
    rng = np.random.default_rng(seed)
    out, dim = [], 6
    for p in range(4):
        x = cp.Variable(dim, name=f"x{p}")
        loc = cp.Variable(3, name=f"loc{p}")
        A = rng.normal(size=(10, dim)) * math.sqrt(scale)
        b = rng.normal(size=10) + 1.0
        cons = [x >= -1, x <= 1, loc >= -2, loc <= 2]
        if p % 3 == 1:
            cons += [cp.norm(x[:3], 2) <= 0.8, cp.norm(cp.hstack([x[3], loc[0]]), 2) <= 1.0]
        elif p % 3 == 2:
            cons += [cp.sum(x) + loc[1] <= 0.5, x[0] - loc[2] == 0.1]
        objective = cp.sum_squares(A @ x - b) / 10 + scale * cp.sum_squares(loc - 0.5) + 0.1 * cp.sum(x)

        def gradient(u, A=A, b=b):
            return np.concatenate([2 * A.T @ (A @ u[:dim] - b) / 10 + 0.1, 2 * scale * (u[dim:] - 0.5)])

        L = max(2 * np.linalg.eigvalsh(A.T @ A).max() / 10, 2 * scale)
        out.append(cvxdp.Agent(f"agent{p}", objective, cons, shared={"head": x[:4], "tail": x[4:]},
                               gradient=gradient, lipschitz=L if lipschitz else None))
    return out


def _step_warnings(caught) -> list[StepSizeWarning]:
    return [w.message for w in caught if isinstance(w.message, StepSizeWarning)]


def _rel_gap(result, ref) -> float:
    return abs(result.history["objective"].iloc[-1] - ref) / abs(ref)


# ---------------------------------------------------------------------------------------------- Lipschitz
def test_power_iteration_finds_the_largest_curvature_of_a_quadratic():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(8, 5))
    H = M.T @ M
    est = estimate_lipschitz(lambda u: H @ u + 1.0, rng.normal(size=5))
    assert est == pytest.approx(np.linalg.eigvalsh(H).max(), rel=1e-4)
    assert estimate_lipschitz(lambda u: np.ones_like(u), np.zeros(3)) == 0.0  # affine: no curvature


def test_auto_eta_is_per_agent_and_estimated_in_a_non_private_run():
    agents = four_agents()
    declared = [a.lipschitz for a in four_agents(lipschitz=True)]
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=2), seed=0)
    chosen = result.config["eta_per_agent"]
    for agent, L in zip(agents, declared):
        assert chosen[agent.name]["source"] == "estimated" and chosen[agent.name]["quadratic"]
        assert chosen[agent.name]["eta"] == pytest.approx(ETA_FACTOR_QUADRATIC * L, rel=1e-3)
    assert len({round(v["eta"], 6) for v in chosen.values()}) == 4  # one eta per agent


def test_constant_hessian_is_read_from_the_expression_structure():
    x = cp.Variable(3)
    p = cp.Parameter(3, value=np.ones(3))
    A = cp.Parameter((2, 3), value=np.ones((2, 3)))
    quadratic = [cp.sum_squares(x - p), 2 * cp.sum_squares(cp.multiply(np.sqrt([1.0, 2.0, 3.0]), x)) + p @ x + 3,
                 cp.sum_squares(A @ x - 1) / 10, cp.quad_form(x, np.eye(3)), cp.sum(cp.square(x)), p @ x,
                 cp.quad_over_lin(x, 2.0), cp.sum(cp.power(x, 2)) + cp.sum_squares(x[:2])]
    general = [cp.sum(cp.huber(x)), cp.sum(cp.logistic(x)), cp.norm(x, 1), cp.sum(cp.power(x, 4)),
               cp.sum(cp.exp(x)), cp.sum_squares(x) + cp.sum(cp.logistic(x))]
    assert all(has_constant_hessian(e) for e in quadratic)
    assert not any(has_constant_hessian(e) for e in general)  # huber: CVXPY calls it quadratic, its curvature is not


def test_explicit_eta_is_measured_against_half_the_curvature_only_for_a_quadratic_objective():
    # Li, Sun & Toh (2016): a constant Hessian H needs eta I - H/2 > 0; a general objective eta >= L
    quad, general = Curvature(10.0, "declared", True), Curvature(10.0, "declared", False)
    assert quad.covers(5.5) and not quad.covers(5.0) and not quad.covers(4.0)
    assert general.covers(10.0) and not general.covers(5.5)
    assert Curvature(None, "unknown", True).covers(1.0) is None
    from cvxdp.families.consensus.step_sizes import check_explicit_eta

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_explicit_eta(["q", "g"], 6.0, [quad, general])
    assert [w.message.agent for w in caught] == ["g"]
    assert caught[0].message.suggestion == {"eta": 10.0}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_explicit_eta(["q"], 5.0, [quad])
    assert "quadratic" in str(caught[0].message) and caught[0].message.suggestion["eta"] == pytest.approx(5.5)


def _logistic_agents(lipschitz: float):
    rng = np.random.default_rng(0)
    agents = []
    for p in range(2):
        x = cp.Variable(3, name=f"w{p}")
        X, y = rng.normal(size=(20, 3)), rng.choice([-1.0, 1.0], size=20)
        objective = cp.sum(cp.logistic(-cp.multiply(y, X @ x))) / 20
        agents.append(cvxdp.Agent(f"node{p}", objective, [cp.abs(x) <= 1], shared={"w": x}, lipschitz=lipschitz))
        agents[-1].curvature_at_zero = float(np.linalg.eigvalsh(X.T @ X).max() / 80)  # sigma'(0) = 1/4, over 20
    return agents


def test_a_logistic_agent_gets_eta_equal_to_the_smaller_of_its_bound_and_its_measured_curvature():
    # non-quadratic: factor 1. A loose declared bound (2.0, ~3x the data's curvature at the start) gives way to
    # the estimate in a non-private run; a tighter one is kept; a private run reads the declared bound only
    loose = _logistic_agents(2.0)
    chosen = cvxdp.solve(loose, algorithm=cvxdp.LinearizedADMM(rounds=2), seed=0).config["eta_per_agent"]
    for agent in loose:
        row = chosen[agent.name]
        assert not row["quadratic"] and row["source"] == "estimated"
        assert row["eta"] == row["lipschitz"] == pytest.approx(agent.curvature_at_zero, rel=1e-3)
        assert row["eta"] < 2.0
    tight = _logistic_agents(0.05)
    assert all(a.curvature_at_zero > 0.05 for a in tight)
    chosen = cvxdp.solve(tight, algorithm=cvxdp.LinearizedADMM(rounds=2), seed=0).config["eta_per_agent"]
    assert all(v["source"] == "declared" and v["eta"] == 0.05 for v in chosen.values())
    for a in loose:
        a.sensitivity = cvxdp.Sensitivity(l2=0.1)
    privacy = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)
    chosen = cvxdp.solve(loose, algorithm=cvxdp.LinearizedADMM(rounds=2), privacy=privacy,
                         seed=0).config["eta_per_agent"]
    assert all(v["source"] == "declared" and v["eta"] == 2.0 for v in chosen.values())


def test_the_eta_floor_follows_the_agents_scale():
    from cvxdp.families.consensus.step_sizes import ETA_FLOOR, auto_etas

    small = [Curvature(0.0, "estimated"), Curvature(6e-4, "estimated"), Curvature(9e-4, "estimated")]
    # an affine agent gets 1e-3 of the scale; a small curvature is not lifted (an absolute 1e-3 would lift both)
    assert auto_etas(small) == pytest.approx([ETA_FLOOR * 9e-4, 6e-4, 9e-4])
    assert auto_etas([Curvature(0.0, "declared")] * 2) == [ETA_FLOOR, ETA_FLOOR]  # every agent affine (PGLib costs)
    assert auto_etas([Curvature(0.0, "declared"), Curvature(40.0, "declared")]) == [ETA_FLOOR, 40.0]


def test_ladmm_auto_rho_starts_at_the_agents_curvature_scale_below_one(tmp_path):
    # rho="auto" only rises, so from 1 it could never reach agents whose eta is ~0.05: it starts at max_p L_p
    agents = _logistic_agents(2.0)
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=40), seed=0)
    scale = max(v["lipschitz"] for v in result.config["eta_per_agent"].values())
    assert scale < 1.0 and result.config["rho_start"] == scale
    rho = result.history["rho"].to_numpy()
    assert rho[0] == scale and np.all(np.diff(rho) >= 0)
    # the previous start, as an explicit schedule: kept (explicit means explicit), and no rho_start recorded
    explicit = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=AdaptiveRho(decrease=False), rounds=40),
                           seed=0)
    assert explicit.history["rho"].iloc[0] == 1.0 and "rho_start" not in explicit.config
    # ... which is what the new start is for: after 40 rounds it is 10x further from the optimum
    ref = cvxdp.solve_central(agents)["objective"]
    assert _rel_gap(explicit, ref) > 10 * _rel_gap(result, ref)
    # a resumed run starts from the same place (the same estimate at the same starting point)
    def interrupt(t, row):
        if t == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=40), seed=0, checkpoint=tmp_path, callback=interrupt)
    resumed = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=40), seed=0, checkpoint=tmp_path)
    assert resumed.history["rho"].tolist() == result.history["rho"].tolist()
    assert resumed.history["objective"].tolist() == result.history["objective"].tolist()


def test_ladmm_auto_rho_start_reads_public_bounds_in_a_private_run_and_ignores_affine_agents():
    private = _logistic_agents(0.3)
    for a in private:
        a.sensitivity = cvxdp.Sensitivity(l2=0.1)
    privacy = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)
    result = cvxdp.solve(private, algorithm=cvxdp.LinearizedADMM(rounds=2), privacy=privacy, seed=0)
    assert result.config["rho_start"] == 0.3 and result.history["rho"].iloc[0] == 0.3  # the declared bound
    # agents at or above 1 keep the start of 1 (the power template: every row of bench_power.py)
    assert "rho_start" not in cvxdp.solve(four_agents(), algorithm=cvxdp.LinearizedADMM(rounds=2),
                                          seed=0).config
    # an affine objective's eta is only the floor: it says nothing of the scale, so rho starts at 1
    affine = []
    for p in range(2):
        x = cp.Variable(2, name=f"a{p}")
        affine.append(cvxdp.Agent(f"lin{p}", cp.sum(x) * (p + 1), [cp.abs(x) <= 1], shared={"x": x}))
    result = cvxdp.solve(affine, algorithm=cvxdp.LinearizedADMM(rounds=2), seed=0)
    assert all(v["lipschitz"] == 0.0 for v in result.config["eta_per_agent"].values())
    assert result.history["rho"].iloc[0] == 1.0 and "rho_start" not in result.config
    # exact ADMM's rho="auto" is its own rule
    assert cvxdp.solve(_logistic_agents(2.0), algorithm=cvxdp.ADMM(rounds=2), seed=0).history["rho"].iloc[0] == 1.0


# ------------------------------------------------------------------------------------- the cases
def test_four_agent_problem_default_reaches_the_optimum():
    agents = four_agents()
    ref = cvxdp.solve_central(agents)["objective"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=400, tol_primal=1e-7, tol_dual=1e-7),
                             seed=0)
    assert _rel_gap(result, ref) <= 1e-3
    assert result.history["primal_residual"].iloc[-1] <= 1e-4
    assert not _step_warnings(caught)


def test_four_agent_problem_with_rho_eta_5_warns_naming_the_agent_and_the_setting():
    agents = four_agents()
    ref = cvxdp.solve_central(agents)["objective"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=5.0, eta=5.0, rounds=200), seed=0)
    assert _rel_gap(result, ref) > 0.1  # the problem the issue reported: far off, no warning before
    found = _step_warnings(caught)
    up_front = [w for w in found if "below what the linearized step needs" in str(w)]
    assert {w.agent for w in up_front} == {a.name for a in agents}
    declared = {a.name: a.lipschitz for a in four_agents(lipschitz=True)}
    assert all(w.suggestion["eta"] > declared[w.agent] / 2 > 5.0 for w in up_front)
    assert "eta>=" in str(up_front[0])
    stalled = [w for w in found if "stagnates" in str(w) or "diverges" in str(w)]
    assert len(stalled) == 1 and stalled[0].agent in {a.name for a in agents}
    assert "eta for agent" in str(stalled[0])
    # every step-size warning points at the caller of cvxdp.solve, not inside the loop
    assert {r.filename for r in caught if issubclass(r.category, StepSizeWarning)} == {__file__}


def test_a_private_run_at_its_noise_floor_is_not_called_stagnant_but_divergence_is_reported():
    import pandas as pd

    from cvxdp.families.consensus.step_sizes import diagnose

    flat = pd.DataFrame({"round": range(1, 101), "primal_residual": [1.0] * 100})
    agents = pd.DataFrame({"round": list(range(1, 101)), "agent": ["a"] * 100, "residual": [1.0] * 100})
    kwargs = dict(stop_reason="rounds", algorithm=cvxdp.LinearizedADMM(), etas=[1.0], constants=[(None, "none")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(diagnose(flat, agents, **kwargs)) == 1
        assert diagnose(flat, agents, private=True, **kwargs) == []
        rising = flat.assign(primal_residual=[1e-3] * 50 + [1e3] * 50)
        assert len(diagnose(rising, agents, private=True, **kwargs)) == 1


def test_a_converging_run_does_not_warn():
    agents = four_agents(lipschitz=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=5.0, eta=80.0, rounds=60), seed=0)
    assert not _step_warnings(caught)


def test_case14_cost_run_with_defaults_reaches_the_central_optimum():
    pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")
    from cvxdp_models.power.template import build

    inst = build({"network": "case14", "zones": [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]],
                  "objective": "cost"}, base_dir=".")
    ref = inst.central(ac_check=False)["objective"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(rounds=200), seed=0)
    assert result.config["eta_per_agent"]["zone1"]["source"] == "declared"
    assert _rel_gap(result, ref) <= 1e-3
    assert result.history["primal_residual"].iloc[-1] <= 1e-3
    assert not _step_warnings(caught)
    # the old defaults (rho = eta = 1) ended at 9.74 vs 8.08 k$/h without a word; now they are named
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=60), seed=0)
    named = {w.agent for w in _step_warnings(caught)}
    assert named and named <= {a.name for a in inst.agents}


def test_ladmm_auto_rho_only_rises_and_reaches_consensus_on_the_balance_objective():
    # the linearized step reads as a large dual residual: balancing both ways drove rho to ~0.13 here and left
    # a consensus residual of 0.014 after 300 rounds; raising it only when the primal residual dominates: 2e-5
    pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")
    from cvxdp_models.power.template import build

    inst = build({"network": "case14", "zones": [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]},
                 base_dir=".")
    algo = cvxdp.LinearizedADMM(rounds=300)
    rho = algo.resolved().rho_schedule
    assert rho.decrease is False
    assert rho(2, 1.0, primal=1.0, dual=100.0) == 1.0  # a dominant dual residual: kept
    result = cvxdp.solve(inst.agents, algorithm=algo, seed=0)
    rho = result.history["rho"].to_numpy()
    assert np.all(np.diff(rho) >= 0)
    assert result.history["consensus_residual"].iloc[-1] <= 1e-3


# ----------------------------------------------------------------------------------------------- privacy
def test_private_auto_eta_needs_a_declared_bound_naming_the_agent():
    agents = four_agents()
    for a in agents:
        a.sensitivity = cvxdp.Sensitivity(l2=0.1)
    privacy = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)
    with pytest.raises(DeclarationError, match="'agent0'.*lipschitz=") as info:
        cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=2), privacy=privacy, seed=0)
    assert "eta" in str(info.value)
    # an explicit eta needs no bound
    cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(eta=50.0, rounds=1), privacy=privacy, seed=0)


def test_private_auto_eta_reads_no_data_before_the_first_update():
    agents = four_agents(lipschitz=True)
    calls = {"n": 0}
    for a in agents:
        a.sensitivity = cvxdp.Sensitivity(l2=0.1)
        inner = a.gradient

        def counted(u, inner=inner):
            calls["n"] += 1
            return inner(u)

        a.gradient = counted
    privacy = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=1), privacy=privacy, seed=0)
    assert calls["n"] == len(agents)  # one gradient per agent: the update itself, no estimation
    chosen = result.config["eta_per_agent"]
    # a private run starts from eta = L_p (each update's noise is divided by eta), even for a quadratic objective
    assert all(v["source"] == "declared" and v["quadratic"] and v["eta"] == v["lipschitz"] for v in chosen.values())


def test_bad_lipschitz_declaration_is_named():
    agents = four_agents()
    agents[2].lipschitz = -1.0
    with pytest.raises(InvalidParameterError, match="'lipschitz' parameter of Agent 'agent2'"):
        cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=1), seed=0)


# --------------------------------------------------------------------------------------------- rho
def test_adaptive_rho_balances_both_ways_and_freezes():
    rho = AdaptiveRho(start=2.0, adapt_rounds=10, target=1.0)
    assert rho(1) == 2.0
    assert rho(2, 2.0, primal=100.0, dual=1.0) == pytest.approx(20.0)  # sqrt(100) = 10 = max_step
    assert rho(2, 2.0, primal=4.0, dual=1.0) == pytest.approx(4.0)
    assert rho(2, 2.0, primal=1.0, dual=4.0) == pytest.approx(1.0)
    assert rho(2, 2.0, primal=2.0, dual=1.0) == 2.0  # inside [1/mu, mu]: unchanged
    assert rho(2, 2.0, primal=1.0, dual=math.inf) == 2.0  # round 1 has no dual residual
    assert rho(11, 2.0, primal=100.0, dual=1.0) == 2.0  # frozen: eventually constant
    assert AdaptiveRho(target=0.1)(2, 1.0, primal=1.0, dual=1.0) == pytest.approx(math.sqrt(10))


def test_auto_is_the_default_and_is_described():
    algo = cvxdp.LinearizedADMM().resolved()  # a copy with the run's schedules; the user's object is unchanged
    assert isinstance(algo.rho_schedule, AdaptiveRho) and isinstance(algo.eta_schedule, AutoEta)
    assert describe(algo.rho_schedule)["kind"] == "adaptive" and describe(algo.eta_schedule)["kind"] == "auto"
    assert cvxdp.LinearizedADMM().describe()["rho"]["kind"] == "adaptive"
    assert cvxdp.LinearizedADMM().rho_schedule is None
    admm = cvxdp.ADMM().resolved()
    assert isinstance(admm.rho_schedule, AdaptiveRho)
    assert isinstance(as_schedule({"kind": "adaptive", "start": 3.0}, "rho", "X"), AdaptiveRho)
    with pytest.raises(InvalidParameterError, match="'eta' parameter of LinearizedADMM"):
        cvxdp.LinearizedADMM(eta="fast").validate()
    with pytest.raises(InvalidParameterError, match="'rho' parameter"):
        as_schedule(AutoEta(), "rho", "LinearizedADMM")


def test_adaptive_rho_changes_rho_and_admm_still_reaches_the_optimum():
    agents = four_agents(scale=1.0)
    ref = cvxdp.solve_central(agents)["objective"]
    result = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=200, tol_primal=1e-7, tol_dual=1e-7), seed=0)
    assert result.history["rho"].nunique() > 1
    assert _rel_gap(result, ref) <= 1e-4


# ------------------------------------------------------------------------------------- set-up cost (issue 37)
@pytest.fixture
def estimates(monkeypatch) -> list:
    """The points at which the nodes estimate a Lipschitz constant (one entry per estimate)."""
    import cvxdp.model.curvature as curvature

    calls: list = []
    original = curvature.estimate_lipschitz

    def spy(grad, u0, **kwargs):
        calls.append(u0)
        return original(grad, u0, **kwargs)

    monkeypatch.setattr(curvature, "estimate_lipschitz", spy)
    return calls


def test_an_explicit_eta_is_checked_against_a_declared_bound_without_estimating(estimates):
    calls = estimates
    declared = four_agents(lipschitz=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.solve(declared, algorithm=cvxdp.LinearizedADMM(rho=5.0, eta=5.0, rounds=2), seed=0)
    assert calls == []  # eta given and every bound declared: nothing estimated
    up_front = [w for w in _step_warnings(caught) if "below what the linearized step needs" in str(w)]
    # ... and the explicit eta is still checked, against the declared bounds
    assert {w.agent for w in up_front} == {a.name for a in declared}
    assert all("(declared" in str(w) for w in up_front)
    # eta="auto" in a non-private run measures (the smaller of bound and estimate), and so does an explicit eta for
    # an agent that declares no bound (the up-front warning of the four-agent problem)
    cvxdp.solve(four_agents(lipschitz=True), algorithm=cvxdp.LinearizedADMM(rounds=2), seed=0)
    assert len(calls) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cvxdp.solve(four_agents(), algorithm=cvxdp.LinearizedADMM(rho=5.0, eta=5.0, rounds=2), seed=0)
    assert len(calls) == 8


def test_an_explicit_eta_never_estimates_on_cvxpys_gradient(estimates):
    """An agent on CVXPY's Expression.grad (~0.3 s a call on a real model) is not estimated for an explicit eta: the
    ~51 calls of the power iteration would dominate set-up. Agents on a user's or a compiled gradient still are
    (~1 ms each), so the up-front check of an explicit eta keeps working for them."""
    calls = estimates
    x, y = cp.Variable(2), cp.Variable(2)
    on_cvxpy = cvxdp.Agent("nd", cp.norm1(x - 0.5) + cp.sum_squares(x), [x <= 1, x >= -1], shared={"x": x})
    compiled = cvxdp.Agent("q", cp.sum_squares(y - 0.2), [y <= 1, y >= -1], shared={"x": y})
    assert on_cvxpy.compiled_gradient is None and compiled.compiled_gradient is not None
    cvxdp.solve([on_cvxpy, compiled], algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, rounds=3), seed=0)
    assert len(calls) == 1  # the compiled agent only
    # eta="auto" still needs L_p: both agents are measured
    cvxdp.solve([on_cvxpy, compiled], algorithm=cvxdp.LinearizedADMM(rounds=1), seed=0)
    assert len(calls) == 3


# ----------------------------------------------------------------------- a run that has not settled (issue 37)
def test_agreeing_copies_with_a_moving_consensus_point_warn_that_the_run_has_not_settled():
    """rho = 1000 pins the copies together (primal residual 8e-5) while the objective creeps: 60 rounds end ~8 %
    above the central optimum. Before, no warning: the primal residual kept falling, so nothing stagnated."""
    agents = four_agents(lipschitz=True)
    ref = cvxdp.solve_central(agents)["objective"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1000.0, eta=80.0, rounds=60), seed=0)
    assert _rel_gap(result, ref) > 0.01
    assert result.history["primal_residual"].iloc[-1] < 1e-3  # looks converged
    found = [w for w in _step_warnings(caught) if "has not settled" in str(w)]
    assert len(found) == 1 and found[0].suggestion == {"algorithm": "admm", "rounds": 120}
    assert "cvxdp.ADMM" in str(found[0])
    assert {r.filename for r in caught if "has not settled" in str(r.message)} == {__file__}
    # the defaults reach the optimum, and say nothing
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=100), seed=0)
    assert _rel_gap(result, ref) <= 1e-6
    assert not _step_warnings(caught)


def test_the_settling_rule_reads_both_residuals_and_stays_quiet_where_it_should():
    import pandas as pd

    from cvxdp.families.consensus.step_sizes import diagnose

    rounds = np.arange(1, 101)
    agents = pd.DataFrame({"round": rounds, "agent": ["a"] * 100, "residual": np.geomspace(1.0, 1e-6, 100)})
    primal = np.geomspace(1.0, 1e-6, 100)

    def warned(dual, primal=primal, **kwargs):
        history = pd.DataFrame({"round": rounds, "primal_residual": primal, "dual_residual": dual,
                                "rho": [100.0] * 100})
        args = dict(stop_reason="rounds", algorithm=cvxdp.LinearizedADMM(), etas=None, constants=None) | kwargs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [str(w) for w in diagnose(history, agents, **args) if "has not settled" in str(w)]

    moving = np.r_[np.inf, np.geomspace(5.0, 1.0, 99)]  # the first round has no previous point (inf)
    assert len(warned(moving)) == 1
    assert warned(np.r_[np.inf, np.geomspace(5.0, 1e-5, 99)]) == []  # fell below 1 % of its largest value
    assert warned(moving, primal=np.geomspace(1.0, 0.2, 100)) == []  # within 10x of the primal residual
    assert warned(moving, private=True) == []  # a private run's residuals sit at the noise floor by design
    assert warned(moving, stop_reason="converged") == []  # stopped on its tolerances
    assert "more rounds" in warned(moving, algorithm=cvxdp.ADMM())[0] and "cvxdp.ADMM" not in warned(moving, algorithm=cvxdp.ADMM())[0]
