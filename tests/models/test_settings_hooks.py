"""Every bundled template's settings hook (registered next to its builder in cvxdp_models.base) resolves a
shipped case file exactly as the built instance does, defaults included, without loading data."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvxdp.config.build import (
    build_instance,
    load_case,
    resolved_settings,
    settings_components,
    settings_context,
)
from cvxdp.templates import template_names, template_settings

CASES = Path(__file__).resolve().parents[2] / "cases"
FEMNIST = Path(__file__).resolve().parents[3] / "shared" / "data" / "femnist_leaf"

# case file, a default the case does not set -> the value the template resolves for it
SHIPPED = [
    ("digits_fl.toml", "classes_per_agent", 2),
    ("femnist_fl.toml", "split", "writer"),
    ("toy.toml", "radius", 1.5),
    ("case14_3zones.toml", "cost_scale", 1000.0),
    ("erm_madmm.toml", "positive_digits", [5, 6, 7, 8, 9]),
    ("sharing_breast_cancer.toml", "max_samples", None),
]
# entries that `info` reports as resolved from the data (the settings keep them as written)
FROM_DATA = {"vertical": {"blocks"}}


def _case(name: str):
    case = load_case(CASES / name)
    if case.model.get("dataset") == "femnist":
        if not FEMNIST.exists():
            pytest.skip("the FEMNIST LEAF sample (../shared/data/femnist_leaf) is not present")
        case.model["path"] = str(FEMNIST)
    return case


def test_every_bundled_template_is_covered():
    assert {load_case(CASES / name).template for name, _, _ in SHIPPED} == set(template_names())


@pytest.mark.parametrize(("name", "default", "value"), SHIPPED)
def test_hook_agrees_with_the_built_instance(name, default, value):
    case = _case(name)
    hook = template_settings(case.template, case.model)
    instance = build_instance(case)

    assert default not in case.model and hook[default] == value
    assert settings_components(hook) == resolved_settings(instance)
    assert instance.settings == hook
    shown = {k for k in hook if k in instance.info} - FROM_DATA.get(case.template, set())
    assert shown and {k: instance.info[k] for k in shown} == {k: hook[k] for k in shown}
    assert settings_context(case)[0] == settings_context(case, instance)[0]  # hook path == built path


def test_hook_checks_the_table_like_the_builder():
    case = load_case(CASES / "digits_fl.toml")
    with pytest.raises(Exception, match="'dtype' entry of \\[model\\]"):
        template_settings(case.template, {**case.model, "dtype": "float16"})
