"""The consensus family (SPEC §2): LinearizedADMM and exact ADMM over agents with shared blocks.

``ladmm.py`` / ``admm.py`` (parameters), ``updates.py`` (the global, dual and linearized updates), ``node.py``
(the party), ``server.py`` (the coordinator), ``step_sizes.py`` and ``noise_eta.py`` (rho and eta rules read from
released values and public bounds).
"""

from .params import ADMM, LinearizedADMM
from .server import ConsensusFamily

__all__ = ["ADMM", "ConsensusFamily", "LinearizedADMM"]
