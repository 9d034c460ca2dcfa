"""A calibrated noise distribution and its privacy claim: :class:`NoisePlan` (SPEC §2.1).

A plan is what a mechanism hands the engine for one agent: how to draw the noise of one local update and
which ``dp_accounting`` event one such draw is. With the default ``noise_source="numpy"`` sampling always
uses the caller's generator (one per agent, from a SeedSequence, never reseeded; SPEC §7): fast, same-seed
reproducible, research-grade. ``noise_source="opendp"`` draws from OpenDP's vetted samplers and the
operating system's secure randomness instead (not reproducible by seed); see :mod:`cvxdp.privacy.secure`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import dp_accounting
import numpy as np

from ..params import check_choice, check_float, check_int, fail
from . import secure
from .secure import NOISE_SOURCES


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
    noise_source : {"numpy", "opendp"}
        "numpy" (default): ``rng.laplace`` / ``rng.normal`` with the caller's generator. "opendp": OpenDP's
        discretized Laplace / Gaussian samplers (:mod:`cvxdp.privacy.secure`), which ignore ``rng`` and
        are not reproducible by seed. A plan built by a mechanism with ``noise_source="opendp"`` has its
        scale raised until OpenDP's own privacy map certifies ``epsilon`` (see
        :meth:`opendp_epsilon`); a plan built by hand is not re-checked.
    """

    noise: str
    scale: float
    sensitivity: float
    epsilon: float
    delta: float = 0.0
    relation: str = "unspecified"
    noise_source: str = "numpy"

    def __post_init__(self) -> None:
        check_choice(self.noise, "noise", "NoisePlan", ("laplace", "gaussian"))
        check_choice(self.noise_source, "noise_source", "NoisePlan", NOISE_SOURCES)
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
            The agent's generator (never created or reseeded here). Ignored (but still type-checked) when
            ``noise_source == "opendp"``: OpenDP draws from the operating system's secure randomness.
        n : int
            Number of coordinates (>= 0).

        Returns
        -------
        ndarray of shape (n,)
        """
        if not isinstance(rng, np.random.Generator):
            raise fail("rng", "NoisePlan.sample", "a numpy.random.Generator", type(rng).__name__)
        n = check_int(n, "n", "NoisePlan.sample", 0)
        if self.noise_source == "opendp":
            return secure.sample(self.noise, self.scale, n)
        if self.noise == "laplace":
            return rng.laplace(0.0, self.scale, n)
        return rng.normal(0.0, self.scale, n)

    def perturb(self, rng: np.random.Generator, value: np.ndarray) -> np.ndarray:
        """``value`` plus one draw of this noise (same distribution as ``value + sample(rng, len(value))``).

        With ``noise_source="opendp"`` the addition happens inside OpenDP, which first rounds ``value`` to
        its noise lattice (:func:`cvxdp.privacy.secure.perturb`), so the released floats carry no rounding
        artefact of ``value``. The noise is symmetric, so ``value - xi`` (objective perturbation) has the
        same distribution.
        """
        v = np.asarray(value, dtype=float).ravel()
        if self.noise_source == "opendp":
            if not isinstance(rng, np.random.Generator):
                raise fail("rng", "NoisePlan.perturb", "a numpy.random.Generator", type(rng).__name__)
            return secure.perturb(self.noise, self.scale, v)
        return v + self.sample(rng, v.size)

    def opendp_epsilon(self, n: int = 1) -> float:
        """The per-step epsilon OpenDP's own privacy map certifies for this plan's scale and sensitivity.

        Laplace: ``make_laplace(...).map(sensitivity)``; Gaussian: ``make_zCDP_to_approxDP`` of
        ``make_gaussian(...)`` at ``sensitivity``, evaluated at ``delta``. ``n`` is the number of noise
        coordinates per draw (it enters OpenDP's lattice-rounding slack only). Needs OpenDP installed;
        meaningful for either noise source (for "numpy" it is what the secure sampler would certify).
        """
        return secure.opendp_epsilon(self.noise, self.scale, self.sensitivity, n, self.delta)

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
        """Inverse of :meth:`to_dict` (a dict without ``noise_source`` means "numpy")."""
        return cls(**d)
