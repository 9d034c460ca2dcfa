"""Distributed ADMM variants: parameters plus pure update math over arrays."""

from .admm import ADMM
from .base import Algorithm, dual_update, global_update
from .ladmm import LinearizedADMM

__all__ = ["ADMM", "Algorithm", "LinearizedADMM", "dual_update", "global_update"]
