"""Constrained logistic regression over agents (SPEC §6.2): multiclass eq. (30) and binary l2 ERM.

Modules: :mod:`.data` (loaders, preprocessing, splits), :mod:`.multiclass`, :mod:`.binary`,
:mod:`.baselines` (centralized optimum, scikit-learn references), :mod:`.template` (``build`` for case files).
"""

from .binary import BinaryLogistic, binary_agents, binary_sensitivity
from .multiclass import MulticlassLogistic, multiclass_agents, multiclass_sensitivity

__all__ = ["BinaryLogistic", "MulticlassLogistic", "binary_agents", "binary_sensitivity", "multiclass_agents",
           "multiclass_sensitivity"]
