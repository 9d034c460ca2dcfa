"""The template protocol: a case file's ``[model]`` table -> agents plus template-specific evaluation.

A template is a function ``build(model: dict, *, base_dir: Path) -> ModelInstance``, registered under a
name in cvxdp's template registry (:func:`cvxdp.register_template`, re-exported here) when this package is
imported. The CLI reads ``[case] template = NAME`` and calls it. Every bundled template also registers its
settings hook ``settings(model) -> dict``: the scalar settings it resolves from the table,
defaults included, without loading data (the same dict as the built instance's ``settings``); run
checkpoints and study cells are fingerprinted with it, so a changed default is never silently reused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cvxdp import Agent, build_model, register_metrics, register_template, template_names
from cvxdp.errors import ConfigError

__all__ = ["ModelInstance", "build_model", "register_template", "template_names"]


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
    settings : dict, optional
        The ``[model]`` settings as the template resolved them (defaults included; what its settings hook
        returns). Fingerprints checkpoints and study cells; None = the scalars of ``info`` instead.
    perturbed_inputs : callable(mechanism, seed) -> context manager, optional
        One-shot input perturbation (issue 39): inside the ``with`` block the agents read their private data
        perturbed once by a :class:`cvxdp.privacy.InputPerturbation`; it yields each agent's release
        (:class:`cvxdp.privacy.InputRelease`) and restores the true data on exit. The power template has it.
    central_private : callable(epsilon, delta, seed) -> dict, optional
        A centralized private anchor (issue 39): the model a trusted curator holding every party's data could
        release at the same total ``(epsilon, delta)`` and neighbouring relation. Returns the template's metrics
        (e.g. ``train_cost``, ``test_error``), ``event`` (the dp-accounting event of one step), ``steps`` and
        ``solution``. The logistic template's models have it (DP-SGD on the pooled data; multiclass and binary).
    """

    agents: list[Agent]
    evaluate: Callable[[Any], dict[str, float]] | None = None
    central: Callable[..., dict[str, Any]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    ac_check: Callable[[Any], dict[str, Any]] | None = None
    settings: dict[str, Any] | None = None
    perturbed_inputs: Callable[..., Any] | None = None
    central_private: Callable[..., dict[str, Any]] | None = None


def check_model_keys(model: Any, allowed: Iterable[str], template: str) -> None:
    """Refuse a ``[model]`` that is not a table, or that has keys the template does not read, naming them and the
    allowed ones (one message for every bundled template)."""
    if not isinstance(model, dict):
        raise ConfigError(f"[model] must be a table. Got {type(model).__name__} instead.")
    unknown = sorted(set(model) - set(allowed))
    if unknown:
        raise ConfigError(f"Unknown key(s) {', '.join(map(repr, unknown))} in [model] of the {template} template. "
                          f"Allowed: {', '.join(sorted(allowed))}.")


#: name -> module holding its ``build`` and ``settings`` (imported on first use)
_TEMPLATES: dict[str, str] = {
    "power": "cvxdp_models.power.template",
    "logistic": "cvxdp_models.logistic.template",
    "toy": "cvxdp_models.toy",
    "erm": "cvxdp_models.erm",
    "vertical": "cvxdp_models.vertical",
}
#: the templates whose data is the network (power) or generated (toy): ``--data`` is refused for them
_WITHOUT_DATA = ("power", "toy")
for _name, _module in _TEMPLATES.items():
    register_template(_name, f"{_module}:build", settings=f"{_module}:settings", reads_data=_name not in _WITHOUT_DATA)
#: the templates that declare what their runs measure (cvxdp.register_metrics; imported on first use)
for _name in ("power", "logistic"):
    register_metrics(_name, f"cvxdp_models.{_name}.metrics:METRICS")
