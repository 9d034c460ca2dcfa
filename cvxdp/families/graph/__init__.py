"""The graph family (SPEC §3-§4): M-ADMM, PP, DVP, R-ADMM and MR-ADMM over a networkx graph.

``madmm.py`` / ``radmm.py`` (parameters), ``topology.py`` (graphs), ``mechanism.py`` (Gamma-norm penalty
perturbation and the papers' bounds (26)/(32)), ``node.py`` (the party), ``server.py`` (the coordinator).
"""

from .mechanism import PenaltyPerturbation
from .params import DVP, MADMM, MRADMM, RADMM
from .server import GraphFamily

__all__ = ["DVP", "GraphFamily", "MADMM", "MRADMM", "PenaltyPerturbation", "RADMM"]
