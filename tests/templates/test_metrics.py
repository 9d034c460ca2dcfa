"""Templates declare what their runs measure (cvxdp.templates.metrics): the studies and figures read the declarations and name
no template."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import cvxdp
from cvxdp.errors import InvalidParameterError
from cvxdp.templates.metrics import UNDECLARED, TemplateMetrics, register_metrics, template_metrics

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_templates_declare_their_headline_metrics():
    power, logistic = template_metrics("power"), template_metrics("logistic")
    assert power.headline == ("balance_deviation", "cost_error") and power.exact_baseline
    assert logistic.headline == ("train_cost", "test_error") and not logistic.exact_baseline
    assert power.labels()["cost_error"] == ("dispatch-cost error |cost - central cost|", "$/h")
    assert all(m.lower_is_better for m in (*power.metrics, *logistic.metrics))


def test_a_metric_is_read_from_a_cell_summary_as_declared():
    power = template_metrics("power")
    assert power.headline_values({"balance_deviation": 0.5, "cost_gap": -3.0}) == {"balance_deviation": 0.5,
                                                                                   "cost_error": 3.0}
    assert math.isnan(power.headline_values({"cost_gap": None})["cost_error"])
    assert template_metrics("logistic").headline_values({"train_cost": 0.7}) == {"train_cost": 0.7,
                                                                                 "test_error": None}


def test_a_template_without_a_declaration_gets_its_metrics_labelled_by_name():
    assert template_metrics("toy") is UNDECLARED
    assert UNDECLARED.labels() == {} and UNDECLARED.metric("consensus_residual").definition == "consensus residual"


def test_a_registered_declaration_is_used_and_bad_ones_are_refused_by_name():
    own = TemplateMetrics(metrics=(cvxdp.Metric("loss", "my loss", "nats"),), headline=("loss",))
    register_metrics("my-template", own)
    assert template_metrics("my-template") is own
    with pytest.raises(InvalidParameterError, match="'declaration' parameter of register_metrics"):
        register_metrics("my-template", {"loss": "nats"})
    with pytest.raises(InvalidParameterError, match="'template' parameter of register_metrics"):
        register_metrics("", own)


def test_the_studies_and_figures_name_no_template():
    template = re.compile(r"(?<!loss=)\"(power|fl|logistic)\"")  # a loss may be logistic
    named = [(f.name, n) for f in sorted((ROOT / "cvxdp" / "studies").glob("*.py"))
             for n, line in enumerate(f.read_text().splitlines(), 1) if template.search(line)]
    assert named == []
