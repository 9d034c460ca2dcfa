"""Acceptance: federated training through cvxdp.solve reaches the centralized constrained optimum.

Digits, IID agents, box |theta| <= 1.5 on standardised, row-clipped features. The non-private acceptance runs
use the pooled standardization (all agents' mean and sd: better conditioned, honest only without privacy, and
what their hand-tuned step sizes and round counts were measured on); the private runs use the template's
default, the public pixel range of the shipped digits_fl case (issue 36). The step sizes scale with the local
Lipschitz constant, which scales as 1/agents.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import cvxdp
from cvxdp_models.logistic.template import build

CASES = Path(__file__).resolve().parents[3] / "cases"


POOLED = {"standardize": "pooled", "baselines": False}  # non-private runs only (issue 36)


@pytest.fixture(scope="module")
def digits5():
    inst = build({"agents": 5, **POOLED}, base_dir=Path("."))
    return inst, inst.central(solver="L-BFGS-B", tol=1e-8)


@pytest.fixture(scope="module")
def digits5_private():
    """The template's default (public pixel range): agents that declare a sensitivity."""
    return build({"agents": 5, "baselines": False}, base_dir=Path("."))


@pytest.mark.parametrize("agents", [5, 10])
def test_nonprivate_ladmm_matches_central(agents, digits5):
    inst, central = digits5
    if agents != 5:  # same pooled training data (same seeded test split), so the same central optimum
        inst = build({"agents": agents, **POOLED}, base_dir=Path("."))
        assert inst.info["n_train"] == digits5[0].info["n_train"]
    assert central["status"] == "optimal"
    scale = 5 / agents
    algo = cvxdp.LinearizedADMM(rho=0.0025 * scale, eta=0.004 * scale, local_updates=1, rounds=1200)
    result = cvxdp.solve(inst.agents, algorithm=algo, privacy=None, accountant="basic", seed=0)
    ev = inst.evaluate(result)
    gap = (ev["train_cost"] - central["objective"]) / central["objective"]
    assert abs(gap) < 1e-3, gap
    assert ev["test_error"] < 0.10
    assert abs(ev["test_error"] - central["test_error"]) <= 0.01
    assert ev["box_violation"] < 1e-2
    hist = result.history
    assert len(hist) == 1200 and hist["max_violation"].max() == 0.0
    # sum_p f_p(z_p) in the engine's history agrees with the template's numpy value at the end
    assert hist["objective"].iloc[-1] == pytest.approx(ev["train_cost"], rel=1e-3)


def test_objective_perturbation_stays_feasible(digits5_private):
    inst = digits5_private
    algo = cvxdp.LinearizedADMM(rho=0.0025, eta=0.05, local_updates=2, rounds=30)
    obj = cvxdp.solve(inst.agents, algorithm=algo, accountant="rdp", seed=1,
                      privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-5))
    out = cvxdp.solve(inst.agents, algorithm=algo, accountant="rdp", seed=1,
                      privacy=cvxdp.OutputPerturbation("gaussian", epsilon=1.0, delta=1e-5))
    assert obj.history["max_violation"].max() == 0.0  # ObjPert: every communicated z_p is in W
    assert out.history["max_violation"].max() > 0.0  # OutPert may leave the box
    assert obj.history["noise_magnitude"].min() > 0
    ev = inst.evaluate(obj)
    assert np.isfinite(ev["train_cost"]) and np.isfinite(ev["train_cost_local_mean"])
    local_mean = np.mean([obj.local[a.name] for a in inst.agents], axis=0)
    assert np.max(np.abs(local_mean)) <= inst.info["bound"] + 1e-12  # feasible, whatever the noise
    laplace = cvxdp.solve(inst.agents, algorithm=algo, accountant="rdp", seed=1,
                          privacy=cvxdp.ObjectivePerturbation("laplace", epsilon=1.0))
    assert laplace.history["max_violation"].max() == 0.0


def test_same_seed_same_numbers(digits5_private):
    inst = digits5_private
    algo = cvxdp.LinearizedADMM(rho=0.0025, eta=0.05, local_updates=1, rounds=5)
    priv = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-5)
    a = cvxdp.solve(inst.agents, algorithm=algo, privacy=priv, accountant="basic", seed=3)
    b = cvxdp.solve(inst.agents, algorithm=algo, privacy=priv, accountant="basic", seed=3)
    np.testing.assert_array_equal(a.solution["theta"], b.solution["theta"])


@pytest.mark.parametrize("agents", [5, 10])
def test_default_step_sizes_reach_the_central_optimum_without_tuning(agents, digits5):
    # issue 12: eta="auto" and rho="auto" on the federated digits case (with the pooled standardization it was
    # measured on; non-private. The shipped case's public range converges more slowly: cases/digits_fl.toml).
    # The declared public bound C^2/2 = 0.5 is ~170x the curvature each agent measures at the start; the previous
    # defaults (eta = 0.5, rho from 1) were 88 % above the optimum after 1,500 rounds, and the case file carried
    # hand-tuned values scaled by 5/agents
    from cvxdp.errors import StepSizeWarning

    inst, central = digits5
    if agents != 5:
        inst = build({"agents": agents, **POOLED}, base_dir=Path("."))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(rounds=1000), seed=0)
    assert not [w for w in caught if issubclass(w.category, StepSizeWarning)]
    chosen = result.config["eta_per_agent"]
    assert all(v["source"] == "estimated" and v["eta"] < 0.05 * a.lipschitz
               for v, a in zip(chosen.values(), inst.agents))
    assert result.config["rho_start"] == max(v["lipschitz"] for v in chosen.values())
    ev = inst.evaluate(result)
    gap = (ev["train_cost"] - central["objective"]) / central["objective"]
    assert abs(gap) < 1e-3, gap
    assert ev["test_error"] < 0.10


def test_the_shipped_case_uses_the_default_step_sizes():
    from cvxdp.config.build import load_case

    algorithm = load_case(CASES / "digits_fl.toml").algorithm
    assert "eta" not in algorithm and "rho" not in algorithm


def test_shipped_case_files_run():
    from cvxdp.config.build import load_case, run_case
    from cvxdp.studies.grid import load_study

    case = load_case(CASES / "digits_fl.toml")
    assert case.template == "logistic"
    quick = case.with_overrides(algorithm={"rounds": 20}, privacy={"mechanism": "ObjG", "epsilon": 1.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = run_case(quick).summary
    assert summary["rounds"] == 20 and 0 <= summary["test_error"] <= 1
    assert summary["max_violation"] == 0.0
    study = load_study(CASES / "study_digits.toml")
    assert study.case_path.name == "digits_fl.toml" and "ObjG" in study.mechanisms and "OutG" in study.mechanisms


@pytest.mark.slow
def test_central_clarabel_full_digits(digits5):
    """The first-order central reference used above equals CVXPY + Clarabel on the full data (~20 s)."""
    inst, lbfgsb = digits5
    clarabel = inst.central(solver="CLARABEL")
    assert clarabel["objective"] == pytest.approx(lbfgsb["objective"], rel=1e-6)
