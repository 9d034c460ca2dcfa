"""The schedules of the penalty rho^t and the proximal weight eta^t, by their public name.

They live beside the consensus family that reads them, in :mod:`cvxdp.families.consensus.schedules`; this module
keeps ``cvxdp.schedules`` (and ``from cvxdp.schedules import AutoEta``) working.
"""

from __future__ import annotations

from .families.consensus.schedules import (
    AdaptiveRho,
    AutoEta,
    BlockBalance,
    Constant,
    FunctionSchedule,
    GeometricCapped,
    LinearCapped,
    ResidualBalancing,
    Schedule,
    StepSchedule,
    as_schedule,
    describe,
)

__all__ = ["AdaptiveRho", "AutoEta", "BlockBalance", "Constant", "FunctionSchedule", "GeometricCapped", "LinearCapped",
           "ResidualBalancing", "Schedule", "StepSchedule", "as_schedule", "describe"]
