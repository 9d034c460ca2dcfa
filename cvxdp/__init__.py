"""cvxdp: constrained, differentially private, distributed convex optimization on CVXPY.

    import cvxdp
    agent = cvxdp.Agent(name, objective, constraints, shared={key: expr}, sensitivity=cvxdp.Sensitivity(l2=...))
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1, eta=1, local_updates=1, rounds=100),
                         privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=0)

The public names are loaded on first use (PEP 562): ``import cvxdp`` itself imports nothing heavy, and
``cvxdp.Agent`` imports :mod:`cvxdp.model.agent` (and CVXPY) the first time it is touched. ``__all__``,
``dir(cvxdp)`` and ``from cvxdp import *`` list every public name; type checkers see the imports below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the submodule that defines it (the submodule itself for ``errors``/``schedules``)
_LAZY: dict[str, str] = {
    "errors": ".errors", "schedules": ".schedules",
    "Agent": ".model.agent", "Sensitivity": ".model.declaration", "PerExample": ".model.declaration",
    "ADMM": ".families.consensus.params", "LinearizedADMM": ".families.consensus.params",
    "DVP": ".families.graph.params", "MADMM": ".families.graph.params", "MRADMM": ".families.graph.params",
    "RADMM": ".families.graph.params", "ADMMSharing": ".families.sharing.params",
    "SharingGaussian": ".families.sharing.params",
    "CentralResult": ".model.central", "solve_central": ".model.central", "solve_with_fallback": ".model.central",
    "solve": ".families.solve",
    "NoisePlan": ".privacy", "ObjectivePerturbation": ".privacy", "OutputPerturbation": ".privacy",
    "PrivacyLedger": ".privacy", "InputPerturbation": ".privacy", "InputRelease": ".privacy",
    "PenaltyPerturbation": ".families.graph.mechanism",
    "Result": ".run.results", "load_result": ".run.results",
    "VerticalParty": ".model.vertical",
    "SmoothObjective": ".model.agent",
    "ERMConstants": ".families.graph.mechanism", "attach_erm_constants": ".families.graph.mechanism",
    "build_model": ".templates", "register_template": ".templates", "template_names": ".templates",
    "Template": ".templates", "ModelKey": ".templates", "check_model_keys": ".templates",
    "check_declaration": ".model.probe",
    "Metric": ".templates.metrics", "TemplateMetrics": ".templates.metrics",
    "register_metrics": ".templates.metrics",
}
_SUBMODULES = frozenset({"errors", "schedules"})

__all__ = [
    "ADMM", "DVP", "MADMM", "MRADMM", "RADMM", "ADMMSharing", "Agent", "CentralResult", "LinearizedADMM",
    "NoisePlan", "ObjectivePerturbation", "OutputPerturbation", "PenaltyPerturbation", "PerExample", "PrivacyLedger",
    "Result",
    "Sensitivity", "SharingGaussian", "VerticalParty", "errors", "load_result", "schedules", "solve",
    "solve_central",
    "ERMConstants", "SmoothObjective", "attach_erm_constants", "build_model", "register_template", "template_names",
    "solve_with_fallback", "check_declaration", "InputPerturbation", "InputRelease",
    "Template", "ModelKey", "check_model_keys",
    "Metric", "TemplateMetrics", "register_metrics",
]  # a new public name goes here, in _LAZY and in the TYPE_CHECKING block (tests/test_startup.py checks all three)

if TYPE_CHECKING:  # what static type checkers and IDEs resolve; at run time __getattr__ does it lazily
    from . import errors, schedules
    from .families.consensus.params import ADMM, LinearizedADMM
    from .families.graph.mechanism import ERMConstants, PenaltyPerturbation, attach_erm_constants
    from .families.graph.params import DVP, MADMM, MRADMM, RADMM
    from .families.sharing.params import ADMMSharing, SharingGaussian
    from .families.solve import solve
    from .model.agent import Agent, SmoothObjective
    from .model.central import CentralResult, solve_central, solve_with_fallback
    from .model.declaration import PerExample, Sensitivity
    from .model.probe import check_declaration
    from .model.vertical import VerticalParty
    from .privacy import (
        InputPerturbation,
        InputRelease,
        NoisePlan,
        ObjectivePerturbation,
        OutputPerturbation,
        PrivacyLedger,
    )
    from .run.results import Result, load_result
    from .templates import (
        ModelKey,
        Template,
        build_model,
        check_model_keys,
        register_template,
        template_names,
    )
    from .templates.metrics import Metric, TemplateMetrics, register_metrics


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access and cache the name in the package namespace.

    Submodules that are not public names (``cvxdp.config.build``, ``cvxdp.privacy``, ...) also resolve as
    attributes, as they did when this package imported everything eagerly.
    """
    target = _LAZY.get(name)
    if target is None:
        if name.startswith("__"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists but one of its own imports is missing
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        module = importlib.import_module(target, __name__)
        value = module if name in _SUBMODULES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
