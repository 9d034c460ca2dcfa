"""cvxdp_models: templates built only on cvxdp's public API (power flow, logistic regression, loaders).

Installed under the import name ``cvxdp_models`` (the source folder is ``models/``).
"""

from cvxdp import build_model, register_template, template_names

from .base import ModelInstance

__all__ = ["ModelInstance", "build_model", "register_template", "template_names"]
