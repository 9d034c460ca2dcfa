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


def test_settings_hook_is_registered_beside_the_builder(registry):
    T.register_template("t", lambda model, base_dir: model, settings=lambda model: {"k": model.get("k", 1)})
    assert T.template_settings("t", {}) == {"k": 1}
    T.register_template("t", lambda model, base_dir: model)  # registered again without a hook: none
    assert T.template_settings("t", {}) is None
    assert T.template_settings("no such template", {}) is None  # build_model names the problem instead


def test_settings_target_is_validated(registry):
    with pytest.raises(InvalidParameterError, match="'settings' parameter of register_template must be a callable"):
        T.register_template("t", lambda model, base_dir: model, settings=3)
