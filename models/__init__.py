"""cvxdp_models: templates built only on cvxdp's public API (power flow, logistic regression, loaders).

Installed under the import name ``cvxdp_models`` (the source folder is ``models/``).
"""

from .base import ModelInstance, build_model, register_template, template_names

__all__ = ["ModelInstance", "build_model", "register_template", "template_names"]
