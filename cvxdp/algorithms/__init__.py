"""Distributed ADMM variants: parameters plus pure update math over arrays."""

from .admm import ADMM
from .base import Algorithm, dual_update, global_update
from .ladmm import LinearizedADMM
from .madmm import DVP, MADMM, GraphADMM
from .radmm import MRADMM, RADMM
from .sharing import ADMMSharing, SharingGaussian

__all__ = ["DVP", "GraphADMM", "MADMM", "MRADMM", "RADMM", "ADMM", "ADMMSharing", "Algorithm", "LinearizedADMM", "SharingGaussian", "dual_update", "global_update"]
