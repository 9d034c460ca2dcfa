"""AC feasibility check of a SOC solution (pure metrics; the power flow itself runs in :mod:`.network`).

The generator set-points of a relaxed solution (active power of every non-reference generator, voltage
magnitude ``sqrt(w)`` at every generator bus) are handed to pandapower's Newton-Raphson power flow. The
mismatch says how far the relaxation is from a physically realisable operating point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .network import AcFlow, PowerCase, run_ac_power_flow

__all__ = ["ac_mismatch", "run_ac_check"]


def ac_mismatch(case: PowerCase, pg: np.ndarray, vm: np.ndarray, flow: AcFlow) -> dict[str, Any]:
    """Compare a relaxed solution ``(pg, vm)`` with the AC power flow ``flow`` run from its set-points.

    Returns
    -------
    dict
        ``converged``; ``slack_p_mw`` (AC minus relaxed active generation summed over the generators whose
        output the power flow chose, i.e. the losses the relaxation under-estimated); ``max_vm_dev`` (largest
        ``|V_ac - sqrt(w)|``, p.u.); ``max_v_violation`` (largest voltage-limit violation of the AC
        point, p.u.); ``max_q_violation_mvar`` (largest reactive-limit violation of the generators) and
        ``max_overload`` (largest ``|S| / rate_a - 1`` over the limited branches, 0 if none).
    """
    if not flow.converged:
        nan = float("nan")
        return {
            "converged": False,
            "slack_p_mw": nan,
            "max_vm_dev": nan,
            "max_v_violation": nan,
            "max_q_violation_mvar": nan,
            "max_overload": nan,
        }
    pg = np.asarray(pg, dtype=float)
    vm = np.asarray(vm, dtype=float)
    on = case.gen_status
    slack = float(np.sum(flow.pg[on] - pg[on]) * case.base_mva)
    v_viol = float(np.max(np.maximum(0.0, np.maximum(flow.vm - case.vmax, case.vmin - flow.vm))))
    q_viol = float(
        np.max(np.maximum(0.0, np.maximum(flow.qg - case.qmax, case.qmin - flow.qg))[on], initial=0.0)
    )
    lim = case.branch_status & (case.rate_a > 0)
    s = np.maximum(flow.branch_s_from, flow.branch_s_to)
    overload = float(np.max(np.maximum(0.0, s[lim] / case.rate_a[lim] - 1.0), initial=0.0))
    return {
        "converged": True,
        "slack_p_mw": slack,
        "max_vm_dev": float(np.max(np.abs(flow.vm - vm))),
        "max_v_violation": v_viol,
        "max_q_violation_mvar": q_viol * case.base_mva,
        "max_overload": overload,
    }


def run_ac_check(case: PowerCase, pg: np.ndarray, vm: np.ndarray | None = None) -> dict[str, Any]:
    """Run pandapower's AC power flow from the set-points ``pg`` (p.u.) and ``vm`` (p.u., per bus).

    ``vm`` defaults to the case's generator set-points (then ``max_vm_dev`` compares with them at the
    generator buses only). See :func:`ac_mismatch` for the returned numbers.
    """
    flow = run_ac_power_flow(case, pg, vm)
    if vm is None:
        ref = np.full(case.n_bus, np.nan)
        ref[case.gen_bus] = case.vg
        out = ac_mismatch(case, pg, np.where(np.isnan(ref), flow.vm, ref), flow)
    else:
        out = ac_mismatch(case, pg, vm, flow)
    return out
