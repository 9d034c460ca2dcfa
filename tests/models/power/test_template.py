"""The power template: zone agents, shared keys, sensitivity, [model] validation, central reference."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

import cvxdp  # noqa: E402
from cvxdp import build_model  # noqa: E402
from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp_models.power.template import build, load_sensitivity  # noqa: E402

CASE14 = {"network": "case14", "zones": [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]}
HERE = Path(".")


@pytest.fixture(scope="module")
def case14_balance():
    return build(dict(CASE14, objective="balance", alpha=0.05, penalty=2.0), base_dir=HERE)


def test_agents_and_shared_keys(case14_balance):
    agents = case14_balance.agents
    assert [a.name for a in agents] == ["zone1", "zone2", "zone3"]
    sizes = cvxdp.model.agent.check_agents(agents, private=True, noise="laplace")
    info = case14_balance.info
    # cut lines of the paper's case14 partition and the buses at their ends
    cut = {f"line{k}" for k in info["cut_lines"]}
    walls = {f"w{b}" for b in info["boundary_buses"]}
    assert set(sizes) == cut | walls
    assert all(sizes[k] == 6 for k in cut) and all(sizes[k] == 1 for k in walls)
    # cut lines 4-7, 4-9, 5-6, 9-10, 13-14
    assert len(cut) == 5 and set(info["boundary_buses"]) == {4, 5, 6, 7, 9, 10, 13, 14}
    holders = {k: [a.name for a in agents if k in a.shared] for k in sizes}
    assert all(len(h) >= 2 for h in holders.values())
    for agent in agents:
        assert len(agent.layout.variables) == 1  # one variable vector per zone


def test_zone_objectives_sum_to_the_central_objective(case14_balance):
    """The engine's consensus reference equals the template's central solve (both objectives)."""
    ref = cvxdp.solve_central(case14_balance.agents)
    assert ref["objective"] == pytest.approx(case14_balance.central(ac_check=False)["objective"], abs=1e-7)
    cost = build(dict(CASE14, objective="cost"), base_dir=HERE)
    ref = cvxdp.solve_central(cost.agents)
    central = cost.central(ac_check=False)
    assert ref["objective"] == pytest.approx(central["objective"], rel=1e-6)
    assert central["cost"] == pytest.approx(8075.12, abs=0.05)


def test_sensitivity_is_exact(case14_balance):
    """Changing one bus's (pd, qd) by alpha changes the gradient by exactly the declared l1 / l2 bounds."""
    alpha, s = 0.05, 2.0
    agent = case14_balance.agents[1]
    sens = agent.sensitivity
    assert sens == load_sensitivity(s, alpha)
    assert sens.l1 == pytest.approx(4 * s * alpha) and sens.l2 == pytest.approx(2 * math.sqrt(2) * s * alpha)
    assert sens.alpha == alpha and "alpha-adjacent loads" in sens.relation
    u = np.random.default_rng(0).normal(size=agent.layout.size)
    pd_param = next(p for p in agent.problem.parameters() if p.name().endswith("_pd"))
    qd_param = next(p for p in agent.problem.parameters() if p.name().endswith("_qd"))
    g0 = agent.grad(u)
    pd0, qd0 = pd_param.value.copy(), qd_param.value.copy()
    try:
        pd_param.value = pd0 + alpha * np.eye(len(pd0))[2]
        qd_param.value = qd0 - alpha * np.eye(len(qd0))[2]
        diff = agent.grad(u) - g0
    finally:
        pd_param.value, qd_param.value = pd0, qd0
    assert np.linalg.norm(diff, 1) == pytest.approx(sens.l1)
    assert np.linalg.norm(diff, 2) == pytest.approx(sens.l2)


def test_hand_coded_gradient_matches_cvxpy(case14_balance):
    for agent in case14_balance.agents:
        u = np.random.default_rng(3).normal(size=agent.layout.size)
        agent._set(u)
        cvx = np.asarray(agent.objective.grad[agent.layout.variables[0]].toarray()).ravel()
        np.testing.assert_allclose(agent.grad(u), cvx, atol=1e-10)


def test_exact_cost_has_no_sensitivity_and_refuses_private_runs():
    inst = build(dict(CASE14, objective="cost"), base_dir=HERE)
    assert inst.agents[0].sensitivity.l2 is None
    with pytest.raises(cvxdp.errors.CvxdpError, match="sensitivity"):
        cvxdp.solve(
            inst.agents,
            algorithm=cvxdp.LinearizedADMM(rounds=1),
            privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6),
        )
    penalized = build(dict(CASE14, objective="cost", penalty=10.0), base_dir=HERE)
    assert penalized.agents[0].sensitivity.l2 == pytest.approx(2 * math.sqrt(2) * 10.0 * 0.1)


def test_central_reports_ac_check(case14_balance):
    cost = build(dict(CASE14, objective="cost"), base_dir=HERE)
    out = cost.central()
    for key in ("objective", "solver", "time_s", "ac_converged", "ac_slack_p_mw", "ac_max_vm_dev_pu"):
        assert key in out
    assert out["ac_converged"] and abs(out["ac_slack_p_mw"]) < 5 and out["ac_max_vm_dev_pu"] < 0.02
    assert out["ac_reason"] == ""
    assert cost.central(ac_check=False)["objective"] == pytest.approx(out["objective"])
    balance = case14_balance.central("balance", ac_check=False)
    assert balance["objective"] == pytest.approx(0.0, abs=1e-8)


def test_load_scale_and_auto_zones():
    inst = build({"network": "case30", "auto_zones": 4, "load_scale": 1.1}, base_dir=HERE)
    assert len(inst.agents) == 4
    assert inst.info["total_load_mw"] == pytest.approx(1.1 * 189.2)
    assert sum(len(z) for z in inst.info["zones"]) == 30


def test_build_through_the_registry_and_case_file():
    from cvxdp.config.build import load_case

    case = load_case("case14_3zones")
    inst = build_model(case.template, case.model, base_dir=case.path.parent)
    assert len(inst.agents) == 3 and inst.info["objective"] == "balance"
    from cvxdp.config.build import make_algorithm

    assert isinstance(make_algorithm(case.algorithm), cvxdp.LinearizedADMM)


def test_study_files_load():
    from cvxdp.studies.grid import load_study

    for name in ("study_case14", "study_case118"):
        study = load_study(name)
        assert study.mechanisms == ["ObjL", "ObjG", "OutL", "OutG"]
        assert len(study.local_updates) >= 2 and min(study.local_updates) == 1


@pytest.mark.parametrize(
    "model,message",
    [
        ({"zones": CASE14["zones"]}, "needs a 'network' entry"),
        ({**CASE14, "colour": 1}, r"Unknown key\(s\) 'colour' in \[model\]"),
        ({**CASE14, "auto_zones": 3}, "exactly one of 'zones'"),
        ({"network": "case14"}, "exactly one of 'zones'"),
        (
            {**CASE14, "alpha": -1},
            r"The 'alpha' entry of \[model\] must be a float in \(0, inf\). Got -1 instead.",
        ),
        (
            {**CASE14, "penalty": 0},
            r"The 'penalty' entry of \[model\] must be a float in \(0, inf\). Got 0 instead.",
        ),
        (
            {**CASE14, "objective": "cost", "penalty": -2.0},
            r"'penalty' entry of \[model\] must be a float in \[0, inf\)",
        ),
        (
            {**CASE14, "objective": "loss"},
            r"The 'objective' entry of \[model\] must be one of 'balance', 'cost'",
        ),
        ({**CASE14, "load_scale": "x"}, r"The 'load_scale' entry of \[model\] must be a float in \(0, inf\)"),
        ({**CASE14, "cost_scale": float("inf")}, r"The 'cost_scale' entry"),
        (
            {"network": "case14", "auto_zones": 1},
            r"'auto_zones' entry of \[model\] must be an int in \[2, inf\)",
        ),
        ({"network": "case14", "zones": [list(range(1, 15))]}, "at least 2 zones"),
        ({"network": 14, "auto_zones": 2}, "The 'network' entry of \\[model\\] must be a str"),
        ({"network": "case7", "auto_zones": 2}, "Unknown network 'case7'"),
    ],
)
def test_model_table_validation(model, message):
    with pytest.raises(ConfigError, match=message):
        build(model, base_dir=HERE)


@pytest.mark.parametrize("network, k", [("case14", 2), ("case30", 3), ("case57", 4)])
def test_cost_objective_is_feasible_zone_by_zone_with_auto_zones(network, k):
    """Exact balance puts each zone's loads in its constraints: every zone must still be feasible."""
    inst = build({"network": network, "auto_zones": k, "objective": "cost"}, base_dir=HERE)
    assert inst.info["penalty"] == 0.0 and len(inst.agents) == k
    for agent in inst.agents:
        agent.check_feasible()  # raises InfeasibleAgentError naming the zone
    ref = inst.central(ac_check=False)
    assert ref["status"] == "optimal" and ref["balance"] < 1e-10


def test_central_reports_progress():
    inst = build({"network": "case14", "auto_zones": 2, "objective": "cost"}, base_dir=HERE)
    lines: list[str] = []
    out = inst.central(ac_check=False, time_limit=60.0, progress=lines.append)
    assert out["solver"] == "CLARABEL"
    assert "SOC model with" in lines[0] and "over 14 buses" in lines[0]
    assert "solving with CLARABEL (at most 200 iterations, 60 s)" in lines[1]
    assert "CLARABEL status 'optimal'" in lines[2]


def test_the_partitioner_is_part_of_the_fingerprint(monkeypatch):
    """Automatic zones depend on the partitioner: a run or study cell made with another one is refused."""
    import cvxdp_models.power.template as template
    from cvxdp.config.build import power_case, settings_context
    from cvxdp_models.power.zones import PARTITIONER

    assert template.settings({"network": "case14", "auto_zones": 3})["partitioner"] == PARTITIONER
    # explicit zones: no partitioner, and the fingerprints of such runs are unchanged
    assert "partitioner" not in template.settings({"network": "case14", "zones": [[1, 2, 3, 4, 5], [6, 7, 8]]})
    case = power_case("case14", 3)
    before, _ = settings_context(case)
    monkeypatch.setattr(template, "PARTITIONER", "another-partitioner")
    after, _ = settings_context(case)
    changed = [k for k in before if before[k] != after.get(k)]
    assert changed and all("partitioner" in k for k in changed)
