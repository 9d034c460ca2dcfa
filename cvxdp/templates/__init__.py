"""The template registry: a case file's ``[case] template = NAME`` -> a builder of its agents.

A template is a function ``build(model: dict, *, base_dir: Path) -> instance`` (an object with ``agents``
and optionally ``evaluate``, ``central``, ``info``, ``ac_check``; see ``cvxdp_models.ModelInstance``),
declared by a :class:`Template`: its name, the builder (the function itself or a lazily imported
``"package.module:function"`` target), its settings hook, whether it reads a data file, and its ``[model]`` keys
(:class:`ModelKey`: name, type, default, meaning).

Any installed package declares its templates as entry points of the group ``cvxdp.templates``
(:data:`ENTRY_POINT_GROUP`), one per template, each naming a :class:`Template` object in a module that is cheap
to import (the builder itself is imported only when a case is built)::

    [project.entry-points."cvxdp.templates"]
    mytemplate = "mypackage.declaration:TEMPLATE"

The bundled ``cvxdp_models`` declares its five the same way. The names are read from the installed packages'
metadata on the first lookup; a declaration is imported when its template is looked up (``--help``, the schema
and the documentation import them all). The engine never imports a template package itself. A template may also
be registered in-process with :func:`register_template`, which takes precedence over an entry point of the
same name.

A template may also declare a *settings hook* ``settings(model: dict) -> dict``: the scalar settings it resolves
from a ``[model]`` table, defaults included, computed without loading data or building agents (and equal to the
built instance's ``settings``). The resolved settings fingerprint every run checkpoint and every study cell
(:func:`cvxdp.config.build.settings_context`), so a default that changed between versions is noticed; the hook
lets a fully cached study check its cells without building the instance. A template without a hook is built once
instead (correct, only slower). A template that reads no data file (its data is a network, or generated)
declares ``reads_data=False``; ``--data`` (which sets ``[model] path``) is then refused for it with a clear
message instead of the template's "unknown key". A template that declares its keys has a ``[model]`` table with
any other key refused before it is built (:func:`check_model_keys`, the message every bundled template gives).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, OptionalDependencyError, fail

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["ENTRY_POINT_GROUP", "ModelKey", "Template", "TemplatePackageError", "build_model", "check_model_keys",
           "declared_metrics",
           "model_keys", "register_template", "template_names", "template_reads_data", "template_settings"]

#: The entry-point group a package declares its templates in (one entry point per template).
ENTRY_POINT_GROUP = "cvxdp.templates"


class TemplatePackageError(ConfigError):
    """An installed package's template entry point is broken (it does not import, or it names no
    :class:`Template`), or two packages declare one template name."""


@dataclass(frozen=True)
class ModelKey:
    """One ``[model]`` key a template reads: its name, its type, its default and its meaning (all text: they are
    the case-file reference's row, ``cvxdp run --help``'s listing and the unknown-key error's list)."""

    name: str
    type: str
    default: str
    doc: str

    def __post_init__(self) -> None:
        for field in ("name", "type", "default", "doc"):
            value = getattr(self, field)
            if not isinstance(value, str) or (field == "name" and not value):
                raise fail(field, "ModelKey", "a non-empty str" if field == "name" else "a str", value)


def _is_target(target: object) -> bool:
    return callable(target) or (isinstance(target, str) and target.count(":") == 1)


@dataclass(frozen=True)
class Template:
    """A template's declaration: what a package's ``cvxdp.templates`` entry point names.

    Parameters
    ----------
    name : str
        The ``[case] template`` name (equal to the entry point's name).
    build : callable or str
        ``build(model: dict, *, base_dir: Path) -> instance``, or its ``"package.module:function"`` target
        (imported when a case is built).
    settings : callable, str or None
        The settings hook ``settings(model: dict) -> dict`` (same forms), or None.
    reads_data : bool
        Whether the template reads a data file from ``[model] path`` (``--data``).
    keys : tuple of ModelKey or None
        The ``[model]`` keys it reads; None leaves the table unchecked by the engine (and out of the schema).
    metrics : cvxdp.TemplateMetrics, str or None
        What its runs measure (:mod:`cvxdp.templates.metrics`), or its ``"package.module:NAME"`` target (imported when a
        study reads it); None: the generic declaration.
    """

    name: str
    build: str | Callable[..., Any]
    settings: str | Callable[..., Any] | None = None
    reads_data: bool = True
    keys: tuple[ModelKey, ...] | None = None
    metrics: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise fail("name", "Template", "a non-empty str", self.name)
        if not _is_target(self.build):
            raise fail("build", "Template", "a callable or a 'package.module:function' str", self.build)
        if self.settings is not None and not _is_target(self.settings):
            raise fail("settings", "Template", "a callable, a 'package.module:function' str or None", self.settings)
        if not isinstance(self.reads_data, bool):
            raise fail("reads_data", "Template", "a bool", self.reads_data)
        if isinstance(self.metrics, str) and self.metrics.count(":") != 1:
            raise fail("metrics", "Template", "a cvxdp.TemplateMetrics, a 'package.module:NAME' str or None",
                       self.metrics)
        if self.keys is not None:
            keys = tuple(self.keys)
            if not all(isinstance(k, ModelKey) for k in keys) or len({k.name for k in keys}) != len(keys):
                raise fail("keys", "Template", "a sequence of ModelKey with distinct names or None", self.keys)
            object.__setattr__(self, "keys", keys)


#: templates registered in-process (register_template), by name: they take precedence over entry points
_REGISTERED: dict[str, Template] = {}
#: the installed packages' entry points, by template name (read once, on the first lookup)
_ENTRY_POINTS: dict[str, EntryPoint] | None = None
#: the declarations loaded from those entry points, by name
_DECLARED: dict[str, Template] = {}


def register_template(name: str, target: str | Callable[..., Any], *,
                      settings: str | Callable[..., Any] | None = None, reads_data: bool = True,
                      keys: Iterable[ModelKey] | None = None) -> None:
    """Register template ``name`` in this process: a builder function or a ``"package.module:function"`` target,
    optionally its settings hook (same forms), whether it reads a data file from ``[model] path`` and its
    ``[model]`` keys (see :class:`Template`). Registered again, the new declaration replaces the old."""
    if not isinstance(name, str) or not name:
        raise fail("name", "register_template", "a non-empty str", name)
    if not _is_target(target):
        raise fail("target", "register_template", "a callable or a 'package.module:function' str", target)
    if settings is not None and not _is_target(settings):
        raise fail("settings", "register_template", "a callable, a 'package.module:function' str or None", settings)
    if not isinstance(reads_data, bool):
        raise fail("reads_data", "register_template", "a bool", reads_data)
    _REGISTERED[name] = Template(name, target, settings, reads_data, None if keys is None else tuple(keys))


def _where(entry_point: EntryPoint) -> str:
    package = entry_point.dist.name if entry_point.dist is not None else "an unknown package"
    return f"entry point {entry_point.name} = {entry_point.value!r} of package {package!r}"


def _entry_points() -> dict[str, EntryPoint]:
    """The installed packages' template entry points by name; two packages declaring one name are refused."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        # start-up: importlib.metadata costs ~15 ms to import; only the commands that look a template up pay it
        from importlib.metadata import entry_points

        found: dict[str, EntryPoint] = {}
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            other = found.get(entry_point.name)
            if other is not None and other.value != entry_point.value:
                raise TemplatePackageError(f"Two installed packages declare the template {entry_point.name!r}: "
                                  f"the {_where(other)} and the {_where(entry_point)}. Uninstall one of them.")
            found[entry_point.name] = entry_point
        _ENTRY_POINTS = found
    return _ENTRY_POINTS


def _declared(name: str) -> Template | None:
    """The declaration of template ``name`` (registered in-process, else loaded from its entry point), or None."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in _DECLARED:
        entry_point = _entry_points().get(name)
        if entry_point is None:
            return None
        try:
            declaration = entry_point.load()
        except Exception as exc:  # noqa: BLE001 - any failure of a third-party import is reported as its own
            raise TemplatePackageError(f"The template {name!r} could not be loaded from the {_where(entry_point)}: "
                              f"{type(exc).__name__}: {exc}") from None
        if not isinstance(declaration, Template) or declaration.name != name:
            raise TemplatePackageError(f"The {_where(entry_point)} must name a "
                              f"cvxdp.Template declaration with name {name!r}. Got {declaration!r} instead.")
        _DECLARED[name] = declaration
    return _DECLARED[name]


def _function(target: str | Callable[..., Any]) -> Callable[..., Any]:
    if isinstance(target, str):
        module_name, func_name = target.split(":")
        return getattr(importlib.import_module(module_name), func_name)
    return target


def template_names() -> list[str]:
    """The names of the installed and registered templates, sorted (no declaration is imported)."""
    return sorted(set(_entry_points()) | set(_REGISTERED))


def template_reads_data(template: str) -> bool:
    """Whether template ``template`` reads a data file from ``[model] path`` (True unless it declared
    ``reads_data=False``; True for an unknown name, which :func:`build_model` then names)."""
    declaration = _declared(template)
    return declaration is None or declaration.reads_data


def declared_metrics(template: str) -> Any:
    """What template ``template``'s declaration says its runs measure (a ``cvxdp.TemplateMetrics`` or its
    ``"package.module:NAME"`` target), or None (no declaration, or none declared)."""
    declaration = _declared(template)
    return None if declaration is None else declaration.metrics


def model_keys(template: str) -> tuple[ModelKey, ...] | None:
    """The ``[model]`` keys template ``template`` declares (None: it declares none, or it is unknown)."""
    declaration = _declared(template)
    return None if declaration is None else declaration.keys


def check_model_keys(model: Any, allowed: Iterable[str], template: str) -> None:
    """Refuse a ``[model]`` that is not a table, or that has keys template ``template`` does not read, naming them
    and the allowed ones (the one message of every template)."""
    if not isinstance(model, dict):
        raise ConfigError(f"[model] must be a table. Got {type(model).__name__} instead.")
    unknown = sorted(set(model) - set(allowed))
    if unknown:
        raise ConfigError(f"Unknown key(s) {', '.join(map(repr, unknown))} in [model] of the {template} template. "
                          f"Allowed: {', '.join(sorted(allowed))}.")


def _checked(template: str, model: dict) -> Template:
    """Template ``template``'s declaration, with ``model`` checked against its declared keys."""
    declaration = _declared(template)
    if declaration is None:
        names = template_names()
        if not names:
            raise OptionalDependencyError(
                "No case templates are installed: the templates package 'cvxdp_models' is not installed (or "
                "cvxdp was installed before its templates became entry points: reinstall it).")
        raise ConfigError(f"The 'template' entry of [case] must be one of {', '.join(map(repr, names))}. "
                          f"Got {template!r} instead.")
    if declaration.keys is not None:
        check_model_keys(model, [k.name for k in declaration.keys], template)
    return declaration


def build_model(template: str, model: dict, *, base_dir: str | Path) -> Any:
    """Build the agents of a case from its ``[model]`` table with the template declared as ``template``."""
    declaration = _checked(template, model)
    return _function(declaration.build)(dict(model), base_dir=Path(base_dir))


def template_settings(template: str, model: dict) -> dict[str, Any] | None:
    """The settings template ``template`` resolves from ``model`` (its settings hook), or None when the
    template declared no hook (or is unknown: :func:`build_model` then names the problem)."""
    declaration = _declared(template)
    if declaration is None or declaration.settings is None:
        return None
    _checked(template, model)
    return dict(_function(declaration.settings)(dict(model)))
