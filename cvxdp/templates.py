"""The template registry: a case file's ``[case] template = NAME`` -> a builder of its agents.

A template is a function ``build(model: dict, *, base_dir: Path) -> instance`` (an object with ``agents``
and optionally ``evaluate``, ``central``, ``info``, ``ac_check``; see ``cvxdp_models.ModelInstance``),
registered under a name with :func:`register_template`, as the function itself or as a lazily imported
``"package.module:function"`` target.

A template may also register a *settings hook* ``settings(model: dict) -> dict``: the
scalar settings it resolves from a ``[model]`` table, defaults included, computed without loading data or
building agents (and equal to the built instance's ``settings``). The resolved settings fingerprint every run
checkpoint and every study cell (:func:`cvxdp.config.build.settings_context`), so a default that changed between
versions is noticed; the hook lets a fully cached study check its cells without building the instance. A
template without a hook is built once instead (correct, only slower). A template that reads no data file (its
data is a network, or generated) registers with ``reads_data=False``; ``--data`` (which sets ``[model] path``) is
then refused for it with a clear message instead of the template's "unknown key". Template packages register
themselves when imported; the packages in :data:`TEMPLATE_PACKAGES` (the bundled ``cvxdp_models``) are imported
on the first lookup, by name, so the engine never imports a template package itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ConfigError, OptionalDependencyError, fail

__all__ = ["TEMPLATE_PACKAGES", "build_model", "register_template", "template_names", "template_reads_data",
           "template_settings"]

#: Packages imported (once, by name) before the first lookup so that they register their templates.
TEMPLATE_PACKAGES: list[str] = ["cvxdp_models"]

_TEMPLATES: dict[str, str | Callable[..., Any]] = {}
_SETTINGS: dict[str, str | Callable[..., Any]] = {}
_WITHOUT_DATA: set[str] = set()
_loaded: set[str] = set()


def _is_target(target: object) -> bool:
    return callable(target) or (isinstance(target, str) and target.count(":") == 1)


def register_template(name: str, target: str | Callable[..., Any], *,
                      settings: str | Callable[..., Any] | None = None, reads_data: bool = True) -> None:
    """Register template ``name``: a builder function or a ``"package.module:function"`` target, optionally
    its settings hook (same forms), and whether it reads a data file from ``[model] path`` (see the module
    docstring)."""
    if not isinstance(name, str) or not name:
        raise fail("name", "register_template", "a non-empty str", name)
    if not _is_target(target):
        raise fail("target", "register_template", "a callable or a 'package.module:function' str", target)
    if settings is not None and not _is_target(settings):
        raise fail("settings", "register_template", "a callable, a 'package.module:function' str or None", settings)
    if not isinstance(reads_data, bool):
        raise fail("reads_data", "register_template", "a bool", reads_data)
    _TEMPLATES[name] = target
    if reads_data:
        _WITHOUT_DATA.discard(name)
    else:
        _WITHOUT_DATA.add(name)
    if settings is None:
        _SETTINGS.pop(name, None)
    else:
        _SETTINGS[name] = settings


def _function(target: str | Callable[..., Any]) -> Callable[..., Any]:
    if isinstance(target, str):
        module_name, func_name = target.split(":")
        return getattr(importlib.import_module(module_name), func_name)
    return target


def _load_packages() -> None:
    for package in TEMPLATE_PACKAGES:
        if package not in _loaded:
            _loaded.add(package)
            try:
                importlib.import_module(package)
            except ModuleNotFoundError as exc:
                if exc.name != package:
                    raise
                _loaded.discard(package)


def template_names() -> list[str]:
    """The registered template names, sorted."""
    _load_packages()
    return sorted(_TEMPLATES)


def template_reads_data(template: str) -> bool:
    """Whether template ``template`` reads a data file from ``[model] path`` (True unless it registered with
    ``reads_data=False``; True for an unknown name, which :func:`build_model` then names)."""
    _load_packages()
    return template not in _WITHOUT_DATA


def build_model(template: str, model: dict, *, base_dir: str | Path) -> Any:
    """Build the agents of a case from its ``[model]`` table with the template registered as ``template``."""
    _load_packages()
    if not _TEMPLATES:
        raise OptionalDependencyError(
            "No case templates are registered: the templates package 'cvxdp_models' is not installed.")
    if template not in _TEMPLATES:
        raise ConfigError(f"The 'template' entry of [case] must be one of {', '.join(map(repr, template_names()))}. "
                          f"Got {template!r} instead.")
    return _function(_TEMPLATES[template])(dict(model), base_dir=Path(base_dir))


def template_settings(template: str, model: dict) -> dict[str, Any] | None:
    """The settings template ``template`` resolves from ``model`` (its settings hook), or None when the
    template registered no hook (or is unknown: :func:`build_model` then names the problem)."""
    _load_packages()
    hook = _SETTINGS.get(template)
    if hook is None or template not in _TEMPLATES:
        return None
    return dict(_function(hook)(dict(model)))
