"""AC feasibility check of a SOC solution (pure metrics; the power flow itself runs in :mod:`.network`).

The generator set-points of a relaxed solution (active power of every non-reference generator, voltage
magnitude ``sqrt(w)`` at every generator bus) are handed to pandapower's Newton-Raphson power flow. The
mismatch says how far the relaxation is from a physically realisable operating point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .network import AcFlow, PowerCase, run_ac_power_flow

__all__ = ["AC_TOLERANCES", "ac_mismatch", "ac_verdict", "explain_setpoints", "run_ac_check"]

#: What "AC feasible" means in :func:`ac_verdict`. The slack tolerance is relative to the total load because
#: a SOC solution under-estimates losses (case118: +8.3 MW at the SOC optimum, 0.2 % of 4242 MW).
AC_TOLERANCES = {
    "slack_p_rel_load": 0.01,       # |slack_p_mw| <= 1 % of the total active load (and at least 1 MW)
    "slack_p_min_mw": 1.0,
    "max_v_violation_pu": 0.005,    # bus voltages within [vmin - 0.005, vmax + 0.005] p.u.
    "max_q_violation_mvar": 1.0,    # generator reactive output within its limits +- 1 MVAr
    "max_overload_frac": 0.01,           # branch apparent power <= 101 % of rate_a
}


def _reference_generators(case: PowerCase) -> np.ndarray:
    """Which generators the power flow balances: pandapower's ``ext_grid`` elements of a built-in case; for a
    case from MATPOWER data, the first generator at each reference bus (``from_ppc``'s choice)."""
    if case.gen_element:
        return np.array([kind == "ext_grid" for kind, _ in case.gen_element], dtype=bool)
    first = np.zeros(case.n_gen, dtype=bool)
    first[np.unique(case.gen_bus, return_index=True)[1]] = True
    return first & (case.bus_type[case.gen_bus] == 3)


def explain_setpoints(case: PowerCase, pg: np.ndarray, vm: np.ndarray | None) -> list[str]:
    """What in the set-points ``(pg, vm)`` can keep a power flow from converging (empty if nothing stands out).

    Looks for non-finite values, voltage set-points outside the generator buses' limits, and the power the
    reference generators must supply (total load and shunts minus the fixed generation, before losses)
    outside their ``[pmin, pmax]``.
    """
    pg = np.asarray(pg, dtype=float)
    on = np.asarray(case.gen_status, dtype=bool)
    numbers = case.bus_number[case.gen_bus]
    out = []
    bad = np.flatnonzero(on & ~np.isfinite(pg))
    if len(bad):
        out.append(f"{len(bad)} generator set-points are not finite (generators at buses "
                   f"{', '.join(str(int(n)) for n in numbers[bad][:8])}{', ...' if len(bad) > 8 else ''})")
    if vm is not None:
        v = np.asarray(vm, dtype=float)[case.gen_bus]
        lo, hi = case.vmin[case.gen_bus], case.vmax[case.gen_bus]
        off = np.flatnonzero(on & (~np.isfinite(v) | (v < lo - 1e-6) | (v > hi + 1e-6)))
        if len(off):
            k = off[0]
            out.append(f"{len(off)} voltage set-points are outside their bus limits or not finite (e.g. bus "
                       f"{int(numbers[k])}: {v[k]:.4g} p.u., limits [{lo[k]:.3g}, {hi[k]:.3g}])")
    ref = _reference_generators(case) & on
    if ref.any() and np.all(np.isfinite(pg[on & ~ref])):
        need = float(np.sum(case.pd) + np.sum(case.gs) - np.sum(pg[on & ~ref]))
        lo, hi = float(np.sum(case.pmin[ref])), float(np.sum(case.pmax[ref]))
        if not lo - 1e-6 <= need <= hi + 1e-6:
            out.append(f"the reference generator(s) must supply {need * case.base_mva:.1f} MW before losses, "
                       f"outside their limits [{lo * case.base_mva:.1f}, {hi * case.base_mva:.1f}] MW")
    return out


def ac_mismatch(case: PowerCase, pg: np.ndarray, vm: np.ndarray, flow: AcFlow) -> dict[str, Any]:
    """Compare a relaxed solution ``(pg, vm)`` with the AC power flow ``flow`` run from its set-points.

    Returns
    -------
    dict
        ``converged``; ``slack_p_mw`` (AC minus relaxed active generation summed over the generators whose
        output the power flow chose, i.e. the losses the relaxation under-estimated); ``max_vm_dev_pu`` (largest
        ``|V_ac - sqrt(w)|``, p.u.); ``max_v_violation_pu`` (largest voltage-limit violation of the AC
        point, p.u.); ``max_q_violation_mvar`` (largest reactive-limit violation of the generators) and
        ``max_overload_frac`` (largest ``|S| / rate_a - 1`` over the limited branches, 0 if none);
        ``reason``: empty if the flow converged, else why not (the attempts and pandapower's error, and what
        :func:`explain_setpoints` finds in the set-points) — the numbers are then NaN.
    """
    if not flow.converged:
        nan = float("nan")
        hints = explain_setpoints(case, pg, vm)
        reason = (flow.message or "the AC power flow did not converge") + (
            "; in the set-points: " + "; ".join(hints) if hints else
            "; the set-points themselves look sound (finite, within limits), so the operating point they "
            "describe is likely not reachable by an AC power flow (e.g. a relaxation far from AC feasibility)")
        return {
            "converged": False,
            "reason": reason,
            "slack_p_mw": nan,
            "max_vm_dev_pu": nan,
            "max_v_violation_pu": nan,
            "max_q_violation_mvar": nan,
            "max_overload_frac": nan,
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
        "reason": "",
        "slack_p_mw": slack,
        "max_vm_dev_pu": float(np.max(np.abs(flow.vm - vm))),
        "max_v_violation_pu": v_viol,
        "max_q_violation_mvar": q_viol * case.base_mva,
        "max_overload_frac": overload,
    }


def ac_verdict(case: PowerCase, mismatch: dict[str, Any], tol: dict[str, float] | None = None) -> dict[str, Any]:
    """``feasible`` (bool) and the ``violations`` (list of str, with units) of an :func:`ac_mismatch` result.

    Feasible means: the power flow converged and every number is within :data:`AC_TOLERANCES` (stated in
    the returned ``tolerances``, with the slack tolerance in MW for this case).
    """
    tol = {**AC_TOLERANCES, **(tol or {})}
    load_mw = float(np.sum(case.pd) * case.base_mva)
    slack_tol = max(tol["slack_p_min_mw"], tol["slack_p_rel_load"] * load_mw)
    if not mismatch.get("converged"):
        violations = [mismatch.get("reason") or "the AC power flow did not converge from these set-points"]
    else:
        checks = [(abs(mismatch["slack_p_mw"]), slack_tol, "slack active power mismatch {:.3g} MW > {:.3g} MW"),
                  (mismatch["max_v_violation_pu"], tol["max_v_violation_pu"], "voltage-limit violation {:.3g} p.u. > {:.3g} p.u."),
                  (mismatch["max_q_violation_mvar"], tol["max_q_violation_mvar"],
                   "generator reactive-limit violation {:.3g} MVAr > {:.3g} MVAr"),
                  (mismatch["max_overload_frac"], tol["max_overload_frac"], "branch overload {:.3g} (fraction of rate_a) > {:.3g}")]
        violations = [msg.format(v, lim) for v, lim, msg in checks if v > lim]
    return {"feasible": not violations, "violations": violations,
            "tolerances": {"slack_p_mw": slack_tol, "max_v_violation_pu": tol["max_v_violation_pu"],
                           "max_q_violation_mvar": tol["max_q_violation_mvar"], "max_overload_frac": tol["max_overload_frac"]}}


def run_ac_check(case: PowerCase, pg: np.ndarray, vm: np.ndarray | None = None) -> dict[str, Any]:
    """Run pandapower's AC power flow from the set-points ``pg`` (p.u.) and ``vm`` (p.u., per bus).

    ``vm`` defaults to the case's generator set-points (then ``max_vm_dev_pu`` compares with them at the
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
