"""A calibrated noise distribution and its privacy claim: :class:`NoisePlan` (SPEC §2.1).

A plan is what a mechanism hands the engine for one agent: how to draw the noise of one local update and
which ``dp_accounting`` event one such draw is. Sampling always uses the caller's generator (one per agent,
from a SeedSequence, never reseeded; SPEC §7).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import dp_accounting
import numpy as np

from .._validation import check_choice, check_float, check_int, fail


@dataclass(frozen=True)
class NoisePlan:
    """Laplace or Gaussian noise of a given scale, calibrated to a sensitivity, with its per-step claim.

    Parameters
    ----------
    noise : {"laplace", "gaussian"}
        I.i.d. Laplace(0, scale) or N(0, scale^2) coordinates.
    scale : float
        Laplace parameter ``b`` or Gaussian standard deviation ``sigma``, > 0.
    sensitivity : float
        The l1 (Laplace) or l2 (Gaussian) sensitivity of the perturbed quantity the scale is calibrated
        to (gradient sensitivity for ObjPert, output sensitivity for OutPert), > 0.
    epsilon, delta : float
        The per-step (one local update) privacy claim of this plan; Laplace plans have ``delta == 0``.
    relation : str
        The neighbouring relation the sensitivity holds for (as declared by the model).
    """

    noise: str
    scale: float
    sensitivity: float
    epsilon: float
    delta: float = 0.0
    relation: str = "unspecified"

    def __post_init__(self) -> None:
        check_choice(self.noise, "noise", "NoisePlan", ("laplace", "gaussian"))
        for name in ("scale", "sensitivity", "epsilon"):
            v = check_float(getattr(self, name), name, "NoisePlan", 0.0, math.inf)
            object.__setattr__(self, name, v)
        dl = check_float(self.delta, "delta", "NoisePlan", 0.0, 1.0, closed="left")
        if self.noise == "gaussian" and dl == 0.0:
            raise fail("delta", "NoisePlan", "a float in (0, 1) for Gaussian noise", self.delta)
        object.__setattr__(self, "delta", dl)

    @property
    def noise_multiplier(self) -> float:
        """``scale / sensitivity``: the parameter of the ``dp_accounting`` event."""
        return self.scale / self.sensitivity

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` i.i.d. noise coordinates with the caller's generator.

        Parameters
        ----------
        rng : numpy.random.Generator
            The agent's generator (never created or reseeded here).
        n : int
            Number of coordinates (>= 0).

        Returns
        -------
        ndarray of shape (n,)
        """
        if not isinstance(rng, np.random.Generator):
            raise fail("rng", "NoisePlan.sample", "a numpy.random.Generator", type(rng).__name__)
        n = check_int(n, "n", "NoisePlan.sample", 0)
        if self.noise == "laplace":
            return rng.laplace(0.0, self.scale, n)
        return rng.normal(0.0, self.scale, n)

    def dp_event(self) -> dp_accounting.DpEvent:
        """The ``dp_accounting`` event of one draw (ADD_OR_REMOVE_ONE, multiplier scale / sensitivity)."""
        if self.noise == "laplace":
            return dp_accounting.LaplaceDpEvent(noise_multiplier=self.noise_multiplier)
        return dp_accounting.GaussianDpEvent(noise_multiplier=self.noise_multiplier)

    def expected_norm(self, n: int) -> float:
        """``E ||xi||_2`` approximated by ``sqrt(E ||xi||^2)`` (variance 2 b^2 or sigma^2 per coordinate)."""
        var = 2.0 * self.scale ** 2 if self.noise == "laplace" else self.scale ** 2
        return math.sqrt(n * var)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NoisePlan:
        """Inverse of :meth:`to_dict`."""
        return cls(**d)
