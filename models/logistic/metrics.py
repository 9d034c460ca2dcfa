"""What the logistic template's runs measure (:class:`cvxdp.TemplateMetrics`): the studies' tables, axis labels and
report sentences read these declarations and never the template's name."""

from __future__ import annotations

from cvxdp import Metric, TemplateMetrics

__all__ = ["METRICS"]

METRICS = TemplateMetrics(
    metrics=(
        Metric("objective", "training cost sum_p f_p (mean cross-entropy)", "nats"),
        Metric("train_cost", "training cost at the consensus w (mean cross-entropy)", "nats"),
        Metric("test_error", "test error", "fraction misclassified"),
        Metric("consensus_residual", "consensus residual sum_p ||w - z_p||_2", "parameter units"),
        Metric("noise_magnitude", "noise magnitude: mean ||xi||_2 per local update (eq. 32)", "parameter units"),
        Metric("max_violation", "max box violation of the sent z_p", "parameter units"),
    ),
    headline=("train_cost", "test_error"),
    definitions="Definitions: `train_cost` = sum_p f_p at the consensus w (mean cross-entropy over all training "
                "samples, nats); `test_error` = fraction of test samples misclassified by w; `consensus residual` = "
                "sum_p ||w - z_p||_2; `noise magnitude` = mean ||xi||_2 per local update. Privacy: eps_step is per "
                "local update; each agent's basic total is T x J x eps_step.",
    total_definitions="Definitions: as in the consensus study's report. Per-round mechanisms: calibrate = \"total\", "
                      "so each agent's whole run of T x J local updates spends the column's (epsilon, delta).",
)
