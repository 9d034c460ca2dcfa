"""What every consensus ADMM variant shares: parameters, the global update and the dual update (SPEC §2)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...params import check_float, check_int
from ...schedules import Schedule, as_schedule, describe


class Algorithm:
    """Base class: constructors only store parameters; :meth:`validate` checks them."""

    name = "base"
    private_ok = False
    #: The algorithm family that runs it on the round loop (:func:`cvxdp.families.family_class`):
    #: "consensus" (SPEC §2), "graph" (SPEC §3-§4) or "sharing" (SPEC §5).
    family = "consensus"

    def __init__(self, *, rho: float | Schedule = 1.0, rounds: int = 100, tol_primal: float | None = None,
                 tol_dual: float | None = None, tol_mismatch: float | None = None) -> None:
        self.rho = rho
        self.rounds = rounds
        self.tol_primal = tol_primal
        self.tol_dual = tol_dual
        self.tol_mismatch = tol_mismatch  # the consensus family's copies' mismatch (ADMM, LinearizedADMM)

    @property
    def local_updates(self) -> int:
        return 1

    def validate(self) -> None:
        owner = type(self).__name__
        auto = getattr(self, "auto_rho", None)  # issue 12: each algorithm's own rho="auto"
        use_auto = auto is not None and isinstance(self.rho, str) and self.rho == "auto"
        self.rho_schedule = as_schedule(auto if use_auto else self.rho, "rho", owner)
        self.rho_is_auto = use_auto
        check_int(self.rounds, "rounds", owner, 1)
        for name in ("tol_primal", "tol_dual", "tol_mismatch"):
            value = getattr(self, name, None)
            if value is not None:
                check_float(value, name, owner, 0.0, math.inf)

    def describe(self) -> dict:
        self.validate()
        out = {"name": self.name, "rho": describe(self.rho_schedule), "rounds": self.rounds,
               "tol_primal": self.tol_primal, "tol_dual": self.tol_dual}
        if getattr(self, "tol_mismatch", None) is not None:  # only when set: older fingerprints stay valid
            out["tol_mismatch"] = self.tol_mismatch
        return out

    def eta_at(self, t: int) -> float:
        return 0.0

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.endswith("_schedule"))
        return f"{type(self).__name__}({args})"


def global_update(shared: Sequence[np.ndarray], duals: Sequence[np.ndarray], gidx: Sequence[np.ndarray],
                  size: int, rho: float | np.ndarray) -> np.ndarray:
    """``w_k = mean over holders p of ((E_p z_p)_k - lambda_{p,k}/rho_k)`` for every global coordinate k
    (``rho``: a scalar, or one value per global coordinate)."""
    total = np.zeros(size)
    count = np.zeros(size)
    per_coordinate = np.ndim(rho) > 0
    for ez, lam, idx in zip(shared, duals, gidx):
        np.add.at(total, idx, ez - lam / (rho[idx] if per_coordinate else rho))
        np.add.at(count, idx, 1.0)
    return total / np.maximum(count, 1.0)


def dual_update(lam: np.ndarray, rho: float, bw: np.ndarray, ez: np.ndarray) -> np.ndarray:
    """``lambda_p + rho (B_p w - E_p z_p)`` (server and agents run it identically)."""
    return lam + rho * (bw - ez)
