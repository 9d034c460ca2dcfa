"""cvxdp_models: templates built only on cvxdp's public API (power flow, logistic regression, loaders).

Installed under the import name ``cvxdp_models`` (the source folder is ``models/``). Its templates are declared
in :mod:`cvxdp_models.declarations`, named by this package's ``cvxdp.templates`` entry points (pyproject.toml).
Importing the package is cheap (``cvxdp run --help`` imports the declarations): :class:`ModelInstance` and
the re-exported registry functions load on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["ModelInstance", "build_model", "register_template", "template_names"]

if TYPE_CHECKING:
    from .base import ModelInstance, build_model, register_template, template_names


def __getattr__(name: str) -> Any:
    """Load :mod:`cvxdp_models.base` (and with it CVXPY) the first time one of its names is used."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".base", __name__), name)
    globals()[name] = value
    return value
