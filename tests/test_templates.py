"""The template registry (cvxdp.templates): builders and their optional settings hooks."""

from __future__ import annotations

import pytest

import cvxdp.templates as T
from cvxdp.errors import InvalidParameterError


@pytest.fixture
def registry(monkeypatch):
    T.template_names()  # the bundled templates registered before the copy (restored afterwards)
    monkeypatch.setattr(T, "_TEMPLATES", dict(T._TEMPLATES))
    monkeypatch.setattr(T, "_SETTINGS", dict(T._SETTINGS))
    monkeypatch.setattr(T, "_WITHOUT_DATA", set(T._WITHOUT_DATA))


def test_settings_hook_is_registered_beside_the_builder(registry):
    T.register_template("t", lambda model, base_dir: model, settings=lambda model: {"k": model.get("k", 1)})
    assert T.template_settings("t", {}) == {"k": 1}
    T.register_template("t", lambda model, base_dir: model)  # registered again without a hook: none
    assert T.template_settings("t", {}) is None
    assert T.template_settings("no such template", {}) is None  # build_model names the problem instead


def test_settings_target_is_validated(registry):
    with pytest.raises(InvalidParameterError, match="'settings' parameter of register_template must be a callable"):
        T.register_template("t", lambda model, base_dir: model, settings=3)


def test_a_template_declares_whether_it_reads_a_data_file(registry):
    assert not T.template_reads_data("power") and not T.template_reads_data("toy")
    assert T.template_reads_data("logistic")
    T.register_template("t", lambda model, base_dir: model, reads_data=False)
    assert not T.template_reads_data("t")
    T.register_template("t", lambda model, base_dir: model)  # registered again with the default: reads data
    assert T.template_reads_data("t")
    with pytest.raises(InvalidParameterError, match="'reads_data' parameter of register_template must be a bool"):
        T.register_template("t", lambda model, base_dir: model, reads_data="no")
