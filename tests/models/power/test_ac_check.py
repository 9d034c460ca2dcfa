"""The AC check: a power flow that does not converge comes with the reason, never bare NaNs."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

from cvxdp_models.power.ac_check import ac_mismatch, ac_verdict, explain_setpoints, run_ac_check  # noqa: E402
from cvxdp_models.power.network import AC_ATTEMPTS, AcFlow, load_case  # noqa: E402
from cvxdp_models.power.soc import solve_central  # noqa: E402


@pytest.fixture(scope="module")
def case14():
    return load_case("case14")


@pytest.fixture(scope="module")
def dispatch14(case14):
    res = solve_central(case14, "cost")
    return res["pg"], res["vm"]


def _failed_flow(case, message="pandapower's Newton-Raphson power flow did not converge (dc start)"):
    nan_b, nan_g, nan_l = (np.full(n, np.nan) for n in (case.n_bus, case.n_gen, case.n_branch))
    return AcFlow(False, nan_b, nan_b, nan_g, nan_g, nan_l, nan_l, message=message)


def test_sound_setpoints_have_nothing_to_explain(case14, dispatch14):
    assert explain_setpoints(case14, *dispatch14) == []


def test_explains_non_finite_setpoints(case14, dispatch14):
    pg = dispatch14[0].copy()
    pg[1] = np.nan
    hints = explain_setpoints(case14, pg, dispatch14[1])
    assert len(hints) == 1 and "1 generator set-points are not finite (generators at buses 2)" in hints[0]


def test_explains_voltage_setpoints_outside_limits(case14, dispatch14):
    vm = dispatch14[1].copy()
    vm[case14.gen_bus[2]] = 1.3
    (hint,) = explain_setpoints(case14, dispatch14[0], vm)
    assert "voltage set-points are outside their bus limits" in hint and "1.3 p.u." in hint


def test_explains_a_reference_generator_pushed_past_its_limits(case14, dispatch14):
    heavy = case14.with_loads(case14.pd * 5, case14.qd * 5)
    (hint,) = explain_setpoints(heavy, *dispatch14)
    assert "reference generator(s) must supply" in hint and "outside their limits" in hint


def test_non_converged_mismatch_carries_the_reason_into_the_verdict(case14, dispatch14):
    pg = dispatch14[0].copy()
    pg[2] = np.inf
    mismatch = ac_mismatch(case14, pg, dispatch14[1], _failed_flow(case14))
    assert mismatch["converged"] is False and math.isnan(mismatch["slack_p_mw"])
    assert mismatch["reason"].startswith("pandapower's Newton-Raphson power flow did not converge (dc start)")
    assert "not finite" in mismatch["reason"]
    verdict = ac_verdict(case14, mismatch)
    assert not verdict["feasible"] and verdict["violations"] == [mismatch["reason"]]
    sound = ac_mismatch(case14, *dispatch14, _failed_flow(case14))
    assert "set-points themselves look sound" in sound["reason"]


def test_a_deliberately_non_converging_power_flow_is_explained(case14, dispatch14):
    """Five times case14's load on the nominal dispatch: no power flow exists; the check says so and why."""
    heavy = case14.with_loads(case14.pd * 5, case14.qd * 5)
    out = run_ac_check(heavy, *dispatch14)
    assert out["converged"] is False and math.isnan(out["max_vm_dev_pu"])
    for init, iterations in AC_ATTEMPTS:
        assert f"{init} start, {iterations} iterations" in out["reason"]
    assert "did not converge" in out["reason"] and "reference generator(s) must supply" in out["reason"]
