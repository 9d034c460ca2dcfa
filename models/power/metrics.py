"""What the power template's runs measure (:class:`cvxdp.TemplateMetrics`): the studies' tables, axis labels and
report sentences read these declarations and never the template's name."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cvxdp import Metric, TemplateMetrics

__all__ = ["METRICS"]


def _cost_error(row: Mapping[str, Any]) -> float:
    """|generation cost - the central optimum's cost| ($/h) from a run's ``cost_gap`` (NaN when it has none)."""
    gap = row.get("cost_gap")
    return abs(gap) if gap is not None and math.isfinite(gap) else float("nan")


METRICS = TemplateMetrics(
    metrics=(
        Metric("objective", "objective = sum of squared P/Q balance deviations", "p.u.^2"),
        Metric("consensus_residual", "consensus residual sum_p ||B_p w - E_p z_p||_2", "p.u."),
        Metric("noise_magnitude", "noise magnitude: mean ||xi||_2 per local update (eq. 29)", "p.u."),
        Metric("max_violation", "max constraint violation of the sent z_p", "p.u."),
        Metric("balance_deviation", "balance deviation at the true loads: sum of squared P/Q mismatches", "p.u.^2"),
        Metric("cost_error", "dispatch-cost error |cost - central cost|", "$/h", from_summary=_cost_error),
    ),
    headline=("balance_deviation", "cost_error"),
    definitions="Definitions: `objective` = sum over zones of the squared active and reactive power-balance "
                "deviations (p.u.^2, paper eq. 28; loads are the private data); `consensus residual` = "
                "sum_p ||B_p w - E_p z_p||_2 (p.u.); `max violation` = largest constraint violation of a sent z_p "
                "(p.u.); `noise magnitude` = mean ||xi||_2 per local update (eq. 29). Privacy: eps_step is per "
                "local update; each agent's basic total is T x J x eps_step.",
    total_definitions="Definitions: `balance_deviation` = sum over buses of the squared P and Q mismatches at the "
                      "TRUE loads (p.u.^2); `cost_error` = |generation cost - the central optimum's cost| ($/h, for "
                      "the cost objective). Per-round mechanisms: calibrate = \"total\" (PLD), so each agent's whole "
                      "run of T x J local updates spends the column's (epsilon, delta). Anchors: InL / InG perturb "
                      "each zone's own loads once (Laplace / analytic Gaussian; alpha-adjacent loads: Delta_1 = 2 "
                      "alpha, Delta_2 = sqrt(2) alpha) and run exact ADMM on them: post-processing, so the release "
                      "is the whole run's cost.",
    exact_baseline=True,
)
