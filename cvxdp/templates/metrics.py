"""What a template's runs measure, declared by the template, so that studies and figures never name a template.

A template registers a :class:`TemplateMetrics` under its name with :func:`register_metrics` (the declaration itself
or a lazily imported ``"package.module:NAME"`` target, as templates register their builders). It declares

* its metrics (:class:`Metric`: name, definition, unit, whether lower is better, and how a study reads it from a
  cell's summary), from which every axis label of the studies' figures comes;
* the headline metrics of an equal-total study's table (the first decides the winner of a column);
* the sentences of the reports that define them;
* whether the non-private line of an equal-total study is exact ADMM on the true data (a template whose private
  data are inputs of a feasibility problem, such as the power template's loads) or the case's own algorithm
  without noise.

:func:`template_metrics` gives a template's declaration; a template that declares none gets :data:`UNDECLARED`
(its metrics labelled by their names, no units).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import fail
from . import declared_metrics

__all__ = ["Metric", "TemplateMetrics", "UNDECLARED", "register_metrics", "template_metrics"]


@dataclass(frozen=True)
class Metric:
    """One metric a template's runs report.

    Attributes
    ----------
    name : str
        Its column in a run's summary and a study's tables.
    definition : str
        What it is, in words (an axis label's text).
    unit : str
        Its unit (empty: none).
    lower_is_better : bool
        Its direction: the studies rank methods by the lowest mean.
    from_summary : callable(row) -> float, optional
        How a study reads it from a cell's summary row when it is not a column of its own (default: ``row[name]``).
    """

    name: str
    definition: str
    unit: str = ""
    lower_is_better: bool = True
    from_summary: Callable[[Mapping[str, Any]], Any] | None = None

    def read(self, row: Mapping[str, Any]) -> Any:
        """The metric's value in a cell's summary ``row`` (None when absent)."""
        return row.get(self.name) if self.from_summary is None else self.from_summary(row)


@dataclass(frozen=True)
class TemplateMetrics:
    """A template's metrics and the reports' sentences about them (see the module docstring).

    Attributes
    ----------
    metrics : tuple of Metric
        Every metric with a definition and unit (axis labels).
    headline : tuple of str
        The metrics of an equal-total study's table, the first one ("the" headline metric) decides the winner.
    definitions : str
        The consensus grid report's paragraph defining the metrics and the privacy columns.
    total_definitions : str
        The equal-total report's paragraph defining its metrics, mechanisms and anchors.
    exact_baseline : bool
        The non-private line of an equal-total study: exact ADMM on the true data (True), else the case's own
        algorithm without noise.
    """

    metrics: tuple[Metric, ...] = ()
    headline: tuple[str, ...] = ()
    definitions: str = ""
    total_definitions: str = ""
    exact_baseline: bool = False
    _by_name: dict[str, Metric] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({m.name: m for m in self.metrics})

    def labels(self) -> dict[str, tuple[str, str]]:
        """Metric name -> (definition, unit): what the figures' axis labels say (picklable, for worker processes)."""
        return {m.name: (m.definition, m.unit) for m in self.metrics}

    def metric(self, name: str) -> Metric:
        """The declared metric ``name`` (one labelled by its name when undeclared)."""
        return self._by_name.get(name, Metric(name, name.replace("_", " ")))

    def headline_values(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The headline metrics' values in a cell's summary ``row``."""
        return {name: self.metric(name).read(row) for name in self.headline}


#: the declaration of a template that declares none
UNDECLARED = TemplateMetrics(definitions="Definitions: the metrics are those of the template's runs (it declares no "
                                         "definitions). Privacy: eps_step is per local update; each agent's basic "
                                         "total is T x J x eps_step.")

_DECLARED: dict[str, TemplateMetrics | str] = {}


def register_metrics(template: str, declaration: TemplateMetrics | str) -> None:
    """Declare what template ``template``'s runs measure: a :class:`TemplateMetrics`, or a
    ``"package.module:NAME"`` target imported on first use."""
    if not isinstance(template, str) or not template:
        raise fail("template", "register_metrics", "a non-empty str", template)
    if not isinstance(declaration, TemplateMetrics) and not (isinstance(declaration, str)
                                                             and declaration.count(":") == 1):
        raise fail("declaration", "register_metrics", "a TemplateMetrics or a 'package.module:NAME' str", declaration)
    _DECLARED[template] = declaration


def template_metrics(template: str) -> TemplateMetrics:
    """What template ``template``'s runs measure (:data:`UNDECLARED` when it declares nothing)."""
    declared = _DECLARED.get(template) or declared_metrics(template) or UNDECLARED
    if isinstance(declared, str):
        module, name = declared.split(":")
        declared = _DECLARED[template] = getattr(importlib.import_module(module), name)
    return declared
