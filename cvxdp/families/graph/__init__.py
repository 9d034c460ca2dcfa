"""The graph family (SPEC §3-§4): M-ADMM, PP, DVP, R-ADMM and MR-ADMM over a networkx graph.

``madmm.py`` / ``radmm.py`` (parameters), ``topology.py`` (graphs), ``mechanism.py`` (Gamma-norm penalty
perturbation and the papers' bounds (26)/(32)), ``node.py`` (the party), ``server.py`` (the coordinator).
"""

from .mechanism import (
    ERMConstants,
    PenaltyPerturbation,
    attach_erm_constants,
    inexact_solve_note,
    madmm_step_epsilon,
    sample_gamma_norm,
)
from .params import DVP, MADMM, MRADMM, RADMM
from .server import GraphFamily

__all__ = ["DVP", "ERMConstants", "GraphFamily", "MADMM", "MRADMM", "PenaltyPerturbation", "RADMM", "attach_erm_constants",
           "inexact_solve_note", "madmm_step_epsilon", "sample_gamma_norm"]
