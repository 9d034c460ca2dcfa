"""The SOC-WR model: flow formulas, centralized optima against the AC-OPF costs, gradients, DPP."""

from __future__ import annotations

import dataclasses

import cvxpy as cp
import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp_models.power.network import load_case, make_ybus  # noqa: E402
from cvxdp_models.power.soc import SocModel, angle_limits, flow_coefficients, solve_central  # noqa: E402

# MATPOWER AC-OPF optimal costs (runopf) and the SOC relaxation must sit just below them
AC_OPF = {"case14": 8081.53, "case57": 41737.79, "case118": 129660.69, "case300": 719725.11}
SOC_EXPECTED = {"case14": 8075.12, "case57": 41711.01, "case118": 129341.95, "case300": 718654.27}


@pytest.fixture(scope="module")
def case14():
    return load_case("case14")


@pytest.fixture(scope="module")
def case118():
    return load_case("case118")


def _random_voltages(case, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.94, 1.06, case.n_bus) * np.exp(1j * rng.uniform(-0.3, 0.3, case.n_bus))


@pytest.mark.parametrize("name", ["case118", "case300"])
def test_flow_formulas_match_the_admittance_model(name):
    """SPEC §6.1 flows at w = |V|^2, wr + j wi = V_f conj(V_t) equal MATPOWER's branch flows and injections.

    Phase shifts are added to some branches to exercise every term of the formulas.
    """
    case = load_case(name)
    shift = np.array(case.shift)
    shift[::7] = np.deg2rad(np.linspace(-10, 10, len(shift[::7])))
    case = dataclasses.replace(case, shift=shift)
    V = _random_voltages(case)
    lines = np.arange(case.n_branch)
    f, t = case.f_bus, case.t_bus
    w = np.abs(V) ** 2
    vv = V[f] * np.conj(V[t])
    coef = flow_coefficients(case, lines)
    flows = {
        k: a[0] * (w[f] if k[1] == "f" else w[t]) + a[1] * vv.real + a[2] * vv.imag for k, a in coef.items()
    }
    # MATPOWER branch model
    ys = 1 / (case.r + 1j * case.x)
    tau = case.tap * np.exp(1j * case.shift)
    i_f = (ys + 0.5j * case.b) / np.abs(tau) ** 2 * V[f] - ys / np.conj(tau) * V[t]
    i_t = -ys / tau * V[f] + (ys + 0.5j * case.b) * V[t]
    s_f, s_t = V[f] * np.conj(i_f), V[t] * np.conj(i_t)
    np.testing.assert_allclose(flows["pf"], s_f.real, atol=1e-9)
    np.testing.assert_allclose(flows["qf"], s_f.imag, atol=1e-9)
    np.testing.assert_allclose(flows["pt"], s_t.real, atol=1e-9)
    np.testing.assert_allclose(flows["qt"], s_t.imag, atol=1e-9)
    # injections with shunts agree with the (PYPOWER-validated) admittance matrix
    s_inj = V * np.conj(make_ybus(case) @ V)
    p = np.bincount(f, s_f.real, case.n_bus) + np.bincount(t, s_t.real, case.n_bus) + case.gs * w
    q = np.bincount(f, s_f.imag, case.n_bus) + np.bincount(t, s_t.imag, case.n_bus) - case.bs * w
    np.testing.assert_allclose(p, s_inj.real, atol=1e-9)
    np.testing.assert_allclose(q, s_inj.imag, atol=1e-9)


def test_ac_point_is_feasible_for_the_relaxation(case14):
    """An AC operating point (with its injections as pinj, qinj) satisfies every SOC constraint."""
    model = SocModel(case14)
    lay = model.layout
    V = np.linspace(0.95, 1.05, 14) * np.exp(1j * np.deg2rad(np.linspace(0, -16, 14)))
    u = np.zeros(lay.size)
    u[lay.w] = np.abs(V[lay.buses]) ** 2
    f, t = case14.f_bus[lay.lines], case14.t_bus[lay.lines]
    vv = V[f] * np.conj(V[t])
    u[lay.wr], u[lay.wi] = vv.real, vv.imag
    coef = flow_coefficients(case14, lay.lines)
    w = np.abs(V) ** 2
    for key, idx, wend in (
        ("pf", lay.p_fr, w[f]),
        ("qf", lay.q_fr, w[f]),
        ("pt", lay.p_to, w[t]),
        ("qt", lay.q_to, w[t]),
    ):
        a = coef[key]
        u[idx] = a[0] * wend + a[1] * vv.real + a[2] * vv.imag
    gen_mid = (case14.pmin + case14.pmax) / 2
    u[lay.pg], u[lay.qg] = gen_mid[lay.gens], ((case14.qmin + case14.qmax) / 2)[lay.gens]
    s_inj = V * np.conj(make_ybus(case14) @ V)
    # pinj = sum pg - gs w - flows = sum pg - S_inj
    own = lay.own
    genp = np.bincount(case14.gen_bus[lay.gens], u[lay.pg], case14.n_bus)
    genq = np.bincount(case14.gen_bus[lay.gens], u[lay.qg], case14.n_bus)
    u[lay.pinj] = genp[own] - s_inj.real[own]
    u[lay.qinj] = genq[own] - s_inj.imag[own]
    model.u.value = u
    worst = max(float(np.max(c.violation())) for c in model.constraints)
    assert worst < 1e-9


@pytest.mark.parametrize("name", ["case14", "case57", "case118", "case300"])
def test_soc_opf_cost_sits_just_below_ac_opf(name):
    res = solve_central(load_case(name), "cost")
    assert res["status"] == cp.OPTIMAL
    assert res["solver"] == "CLARABEL"
    assert res["cost"] == pytest.approx(SOC_EXPECTED[name], rel=2e-5)
    gap = (AC_OPF[name] - res["cost"]) / AC_OPF[name]
    assert 0 < gap < 0.01
    assert res["balance"] < 1e-10


@pytest.mark.parametrize("name", ["case14", "case118"])
def test_balance_optimum_is_zero_when_load_can_be_served(name):
    res = solve_central(load_case(name), "balance")
    assert res["objective"] == pytest.approx(0.0, abs=1e-8)


def test_balance_optimum_positive_when_load_cannot_be_served(case14):
    heavy = case14.with_loads(case14.pd * 4, case14.qd * 4)
    res = solve_central(heavy, "balance")
    # at least the active load above total capacity is shed
    shortfall = heavy.pd.sum() - case14.pmax.sum()
    assert res["objective"] >= shortfall**2 / case14.n_bus - 1e-9


def test_penalized_cost_approaches_the_exact_optimum(case14):
    exact = solve_central(case14, "cost")["cost"]
    costs = [solve_central(case14, "cost", penalty=s, cost_scale=1000.0)["cost"] for s in (1e2, 1e3, 1e4)]
    assert costs[0] < costs[1] < costs[2] < exact
    assert costs[2] == pytest.approx(exact, rel=2e-3)


def test_parallel_branches_share_voltage_products(case118):
    res = solve_central(case118, "cost")
    model, u = res["model"], res["u"]
    lay = model.layout
    pairs = {}
    for j, k in enumerate(lay.lines):
        key = (min(case118.f_bus[k], case118.t_bus[k]), max(case118.f_bus[k], case118.t_bus[k]))
        pairs.setdefault(key, []).append(j)
    groups = [g for g in pairs.values() if len(g) > 1]
    assert len(groups) >= 5
    for g in groups:
        assert np.ptp(u[lay.wr[g]]) < 1e-7


def test_angle_limits_follow_powermodels(case14):
    lo, hi = angle_limits(case14)
    assert np.allclose(lo, -np.pi / 3) and np.allclose(hi, np.pi / 3)  # MATPOWER's +-360 become +-60 degrees


@pytest.mark.parametrize("kind,penalty", [("balance", 2.0), ("cost", 3.0), ("cost", None)])
def test_hand_coded_gradient_matches_cvxpy(case14, kind, penalty):
    model = SocModel(case14, own=[0, 1, 2, 3, 4])
    expr = model.objective(kind, penalty=penalty, cost_scale=100.0)
    grad = model.gradient(kind, penalty=penalty, cost_scale=100.0)
    u = np.random.default_rng(1).normal(size=model.layout.size)
    model.u.value = u
    np.testing.assert_allclose(
        grad(u), np.asarray(expr.grad[model.u].toarray()).ravel(), rtol=1e-9, atol=1e-9
    )


def test_zone_problem_is_dpp_and_compact(case14):
    model = SocModel(case14, own=[5, 9, 10, 11, 12], name="z")
    prob = cp.Problem(cp.Minimize(model.objective("balance")), model.constraints)
    assert prob.is_dcp(dpp=True)
    # own buses first, then the neighbours across cut lines
    assert case14.bus_number[model.layout.buses[:5]].tolist() == [6, 10, 11, 12, 13]
    assert set(case14.bus_number[model.layout.own].tolist()) == {6, 10, 11, 12, 13}
    assert {5, 9, 14}.issubset(set(case14.bus_number[model.layout.buses].tolist()))
    for sign in (1, -1):
        probe = cp.Problem(cp.Maximize(sign * cp.sum(model.u)), model.constraints)
        probe.solve(solver="CLARABEL")
        assert probe.status == cp.OPTIMAL


def test_unknown_objective(case14):
    with pytest.raises(ConfigError, match="must be one of 'balance', 'cost'"):
        solve_central(case14, "losses")
