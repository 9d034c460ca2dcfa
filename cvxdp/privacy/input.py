"""One-shot input perturbation: a party adds calibrated noise to its private data once, then computes freely.

Everything computed from the noisy data afterwards (e.g. exact, non-private ADMM on it) is post-processing,
so the whole run spends exactly the one release's (epsilon, delta): no composition over rounds (issue 39).
The neighbouring relation and the sensitivity are the caller's (the data owner's model declares them): the
sensitivity is the largest change of the released vector, in l1 (Laplace) or l2 (Gaussian), between two
neighbouring data sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
import numpy as np

from ..errors import InvalidParameterError, check_choice, check_float
from .accounting import composed_epsilon
from .calibration import NOISES, make_event, per_step_scale

__all__ = ["InputPerturbation", "InputRelease"]


@dataclass(frozen=True)
class InputRelease:
    """What one :meth:`InputPerturbation.perturb` call spent.

    Attributes
    ----------
    noise : str
        ``"laplace"`` or ``"gaussian"``.
    scale : float
        Laplace ``b`` or Gaussian ``sigma`` of every coordinate.
    sensitivity : float
        The l1 (Laplace) or l2 (Gaussian) sensitivity the scale was calibrated to.
    event : dp_accounting.DpEvent
        The release's DP event (noise multiplier ``scale / sensitivity``, add-or-remove-one with the
        sensitivity folded in, as every cvxdp event).
    epsilon, delta : float
        The release's guarantee (delta 0 for Laplace).
    """

    noise: str
    scale: float
    sensitivity: float
    event: dp_accounting.DpEvent
    epsilon: float
    delta: float


@dataclass(frozen=True)
class InputPerturbation:
    """Laplace or Gaussian noise added once to a data vector, calibrated to a whole-run (epsilon, delta).

    Parameters
    ----------
    noise : {"laplace", "gaussian"}
        Laplace: ``b = Delta_1 / epsilon`` (pure epsilon-DP). Gaussian: the analytic calibration (Balle & Wang
        2018) of ``sigma`` to (epsilon, delta) for ``Delta_2``, valid for every epsilon.
    epsilon : float
        The total epsilon of the release (> 0): the whole run's, since nothing else touches the data.
    delta : float, optional
        The total delta, in (0, 1); required for Gaussian noise, ignored (0) for Laplace.

    Notes
    -----
    Why it is DP: the release ``x + xi`` is the Laplace (resp. Gaussian) mechanism applied to the identity query
    ``x``, whose l1 (l2) sensitivity under the caller's neighbouring relation is ``Delta_1`` (``Delta_2``);
    any computation on the release alone is post-processing.
    """

    noise: str
    epsilon: float
    delta: float | None = None

    def __post_init__(self) -> None:
        owner = "InputPerturbation"
        check_choice(self.noise, "noise", owner, NOISES)
        check_float(self.epsilon, "epsilon", owner, 0.0, math.inf)
        if self.noise == "gaussian":
            if self.delta is None:
                raise InvalidParameterError("The 'delta' parameter of InputPerturbation must be a float in (0, 1) "
                                            "for Gaussian noise. Got None instead.")
            check_float(self.delta, "delta", owner, 0.0, 1.0)

    @property
    def name(self) -> str:
        """``"InL"`` or ``"InG"`` (the studies' label)."""
        return "InL" if self.noise == "laplace" else "InG"

    def scale(self, l1: float, l2: float) -> float:
        """The per-coordinate noise scale for a release of l1 / l2 sensitivity ``l1`` / ``l2``."""
        sens = l1 if self.noise == "laplace" else l2
        return per_step_scale(self.noise, sens, self.epsilon, self.delta)

    def perturb(self, values: np.ndarray, *, l1: float, l2: float,
                rng: np.random.Generator) -> tuple[np.ndarray, InputRelease]:
        """``values`` plus one draw of the calibrated noise, and what the release spent.

        Parameters
        ----------
        values : ndarray
            The private data vector (released only once, perturbed).
        l1, l2 : float
            Its l1 and l2 sensitivity under the caller's neighbouring relation (> 0).
        rng : numpy.random.Generator
            The party's own generator (one per agent, from a SeedSequence).

        Returns
        -------
        (ndarray, InputRelease)
        """
        x = np.asarray(values, dtype=float)
        check_float(l1, "l1", "InputPerturbation.perturb", 0.0, math.inf)
        check_float(l2, "l2", "InputPerturbation.perturb", 0.0, math.inf)
        scale = self.scale(l1, l2)
        sens = l1 if self.noise == "laplace" else l2
        xi = rng.laplace(0.0, scale, x.shape) if self.noise == "laplace" else rng.normal(0.0, scale, x.shape)
        event = make_event(self.noise, scale / sens)
        delta = 0.0 if self.noise == "laplace" else float(self.delta)
        return x + xi, InputRelease(self.noise, float(scale), float(sens), event, float(self.epsilon), delta)

    def pld_epsilon(self, l1: float, l2: float) -> float:
        """The PLD epsilon of one release at this delta (a check that the calibration meets the target)."""
        sens = l1 if self.noise == "laplace" else l2
        event = make_event(self.noise, self.scale(l1, l2) / sens)
        return composed_epsilon(((event, 1),), 0.0 if self.noise == "laplace" else float(self.delta), "pld")
