"""The template protocol: a case file's ``[model]`` table -> agents plus template-specific evaluation.

A template is a function ``build(model: dict, *, base_dir: Path) -> ModelInstance``, registered under a
name by :func:`register_template`. The CLI reads ``[case] template = NAME`` and calls it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cvxdp
from cvxdp.errors import ConfigError


@dataclass
class ModelInstance:
    """What a template hands to the engine and the CLI.

    Attributes
    ----------
    agents : list of cvxdp.Agent
    evaluate : callable(result) -> dict of float, optional
        Template metrics of a finished run (e.g. ``test_error``, ``train_cost``), merged into summaries.
    central : callable(**options) -> dict, optional
        Centralized reference solve; returns at least ``{"objective": float, "solver": str, "time_s": float}``.
    info : dict
        Free-form description (sizes, data source) saved with results.
    ac_check : callable(result) -> dict, optional
        Power templates: an AC power-flow check of a finished run's dispatch (``cvxdp run --ac-check``).
    """

    agents: list[cvxdp.Agent]
    evaluate: Callable[[Any], dict[str, float]] | None = None
    central: Callable[..., dict[str, Any]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    ac_check: Callable[[Any], dict[str, Any]] | None = None


_TEMPLATES: dict[str, str] = {
    "power": "cvxdp_models.power.template:build",
    "logistic": "cvxdp_models.logistic.template:build",
    "toy": "cvxdp_models.toy:build",
    "erm": "cvxdp_models.erm:build",
    "vertical": "cvxdp_models.vertical:build",
}


def register_template(name: str, target: str) -> None:
    """Register ``"package.module:function"`` as template ``name``."""
    _TEMPLATES[name] = target


def template_names() -> list[str]:
    return sorted(_TEMPLATES)


def build_model(template: str, model: dict, *, base_dir: Path) -> ModelInstance:
    """Build the agents of a case from its ``[model]`` table."""
    if template not in _TEMPLATES:
        raise ConfigError(f"The 'template' entry of [case] must be one of {', '.join(map(repr, template_names()))}. "
                          f"Got {template!r} instead.")
    module_name, func_name = _TEMPLATES[template].split(":")
    builder = getattr(importlib.import_module(module_name), func_name)
    return builder(dict(model), base_dir=Path(base_dir))
