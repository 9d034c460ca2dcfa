"""Noise calibration: from a sensitivity and a privacy target to a noise scale (SPEC §2.1, §2.2).

All functions are pure; :class:`InputPerturbation` (one-shot input perturbation, issue 39: noise added once to a
party's data vector, whatever is computed from it afterwards being post-processing) applies them to a data vector. Scales are the Laplace parameter ``b`` (density ``exp(-|x|/b) / (2b)``) or the
Gaussian standard deviation ``sigma``; a *noise multiplier* is ``scale / sensitivity``, the quantity
``dp_accounting``'s events carry. Accounting always uses ``NeighboringRelation.ADD_OR_REMOVE_ONE`` with the
model's own sensitivity folded into the noise multiplier: the model declares its neighbouring relation and
bounds the gradient change under it, so the mechanism seen by the accountant is a plain Laplace/Gaussian
mechanism with sensitivity 1 (SPEC §2.2, "known pitfalls").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import dp_accounting
import numpy as np

from ..errors import InvalidParameterError, check_choice, check_float, check_int
from .composition import ACCOUNTANTS, accountant_factory, composed_epsilon
from .distributions import (  # the closed forms of each distribution, re-exported where they were defined before
    CALIBRATIONS,
    Noise,
    _analytic_log_ratio,  # noqa: F401 - tests solve it uncached through this module
    gaussian_epsilon,
    gaussian_log_delta,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_scale,
)
from .distributions import names as noise_names
from .events import sampled_event

__all__ = ["CALIBRATIONS", "InputPerturbation", "InputRelease", "calibrate_to_total", "gaussian_epsilon",
           "gaussian_log_delta", "gaussian_sigma_analytic", "gaussian_sigma_classic", "laplace_scale", "make_event",
           "noise_names", "per_step_scale", "step_epsilon", "total_epsilon"]


def step_epsilon(noise: str, sensitivity: float, scale: float, delta: float,
                 sampling_rate: float | None = None) -> float:
    """The epsilon one call of ``noise`` of ``scale`` gives a query of ``sensitivity``: ``sensitivity / scale`` for
    Laplace (pure), :func:`gaussian_epsilon` at ``delta`` for Gaussian. With a ``sampling_rate`` q < 1 (the query
    runs on a Poisson sample of the records, each in with probability q): the PLD epsilon at ``delta`` of
    ``PoissonSampledDpEvent(q, event)`` (amplification by sampling, add/remove one record)."""
    if sampling_rate is not None and float(sampling_rate) < 1.0:
        event = sampled_event(make_event(noise, scale / sensitivity), sampling_rate)
        return composed_epsilon(((event, 1),), delta, "pld")
    return Noise.from_name(noise, "step_epsilon").epsilon(sensitivity, scale, delta)


def per_step_scale(noise: str, sensitivity: float, epsilon: float, delta: float | None,
                   calibration: str = "analytic") -> float:
    """Scale of one ``noise`` mechanism call that is (epsilon, delta)-DP for the given sensitivity.

    Laplace ignores ``delta`` (pure DP); Gaussian uses ``calibration`` ("analytic" or "classic").
    """
    return Noise.from_name(noise, "per_step_scale").scale(sensitivity, epsilon, delta, calibration)


def make_event(noise: str, noise_multiplier: float, sampling_rate: float | None = None) -> dp_accounting.DpEvent:
    """The ``dp_accounting`` event of one call of the ``noise`` mechanism (:meth:`Noise.event`); with a
    ``sampling_rate`` q < 1, of one call on a Poisson sample (``PoissonSampledDpEvent(q, event)``)."""
    return sampled_event(Noise.from_name(noise, "make_event").event(noise_multiplier), sampling_rate)


def _check_total(owner: str, noise: str, sensitivity: float, delta: float | None, steps: int,
                 accountant: str) -> tuple[float, float, int]:
    dist = Noise.from_name(noise, owner)
    d = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    st = check_int(steps, "steps", owner, 1)
    check_choice(accountant, "accountant", owner, ACCOUNTANTS)
    if delta is None:
        delta = 0.0
    dl = check_float(delta, "delta", owner, 0.0, 1.0, closed="left")
    if not dist.pure and dl == 0.0:
        raise InvalidParameterError(f"The 'delta' parameter of {owner} must be a float in (0, 1) for "
                                    f"{type(dist).__name__} noise. Got {delta!r} instead.")
    if dist.pure and accountant == "rdp" and dl == 0.0:
        raise InvalidParameterError(
            f"{owner}: the RDP accountant cannot certify delta = 0 (its epsilon is infinite); give a "
            f"delta in (0, 1) or use accountant=\"basic\" or \"pld\" for pure {type(dist).__name__} DP.")
    return d, dl, st


def _sampling_rate(sampling_rate: float | None, accountant: str, owner: str) -> float | None:
    """A checked Poisson sampling rate below 1, or None (no sampling; 1 is no sampling either)."""
    if sampling_rate is None:
        return None
    q = check_float(sampling_rate, "sampling_rate", owner, 0.0, 1.0, closed="right")
    if accountant == "basic" and q < 1.0:
        raise InvalidParameterError(f"{owner}: basic composition has no amplification by sampling; use "
                                    "accountant=\"rdp\" or \"pld\" with a sampling_rate below 1.")
    return None if q == 1.0 else q


def total_epsilon(noise: str, scale: float, sensitivity: float, steps: int, delta: float | None,
                  accountant: str, sampling_rate: float | None = None) -> tuple[float, float]:
    """Total (epsilon, delta) of ``steps`` adaptive calls of a mechanism with this noise ``scale``.

    Parameters
    ----------
    noise : {"laplace", "gaussian"}
    scale : float
        Laplace ``b`` or Gaussian ``sigma``.
    sensitivity : float
        The l1 (Laplace) or l2 (Gaussian) sensitivity the noise protects.
    steps : int
        Number of composed calls.
    delta : float or None
        Total delta (None or 0 for pure Laplace DP under "basic"/"pld").
    accountant : {"basic", "rdp", "pld"}
        "basic" splits ``delta`` evenly over the steps (Gaussian) and sums the per-step epsilons
        (paper Thm 4.8); "rdp" and "pld" report the epsilon of the composition at ``delta``.
    sampling_rate : float, optional
        Poisson subsampling rate q in (0, 1] of every call, as in :func:`calibrate_to_total` (the calls are
        ``PoissonSampledDpEvent(q, event)``; "rdp" or "pld" only): the inverse of that calibration.

    Returns
    -------
    (float, float)
        Total epsilon (``inf`` when none is certified) and total delta.
    """
    owner = "total_epsilon"
    d, dl, st = _check_total(owner, noise, sensitivity, delta, steps, accountant)
    s = check_float(scale, "scale", owner, 0.0, math.inf)
    q = _sampling_rate(sampling_rate, accountant, owner)
    if q is not None:
        return composed_epsilon(((make_event(noise, s / d, q), st),), dl, accountant), dl
    if accountant == "basic":
        dist = Noise.from_name(noise, owner)
        return dist.basic_epsilon(d, s, st, dl), dist.claim_delta(dl)
    event = make_event(noise, s / d)
    return composed_epsilon(((event, st),), dl, accountant), dl


def calibrate_to_total(noise: str, sensitivity: float, epsilon: float, delta: float | None, steps: int,
                       accountant: str, calibration: str = "analytic", sampling_rate: float | None = None) -> float:
    """Per-step noise scale such that ``steps`` adaptive calls meet a total (epsilon, delta).

    Parameters
    ----------
    noise : {"laplace", "gaussian"}
    sensitivity : float
        The l1 (Laplace) or l2 (Gaussian) sensitivity of one call.
    epsilon : float
        Total epsilon over all ``steps`` calls.
    delta : float or None
        Total delta. Required (in (0, 1)) for Gaussian noise and for Laplace noise under "rdp";
        None means 0 (pure DP) for Laplace under "basic" or "pld".
    steps : int
        Number of composed calls (rounds x local updates).
    accountant : {"basic", "rdp", "pld"}
        "basic": per-step (epsilon/steps, delta/steps) and the per-step calibration ``calibration``.
        "rdp"/"pld": ``dp_accounting.calibrate_dp_mechanism`` on ``SelfComposedDpEvent(event, steps)``
        (the PLD accountant is cvxdp's own adaptive-discretisation wrapper, so the ledger reproduces the
        same number and a run calibrated to a budget never trips it).
    calibration : {"analytic", "classic"}
        Per-step Gaussian formula for the "basic" accountant.
    sampling_rate : float, optional
        Poisson subsampling rate q in (0, 1] of every call (each record in independently with probability q):
        the calls are ``PoissonSampledDpEvent(q, event)`` (amplification by sampling; "rdp" or "pld" only).

    Returns
    -------
    float
        The per-step scale (Laplace ``b`` or Gaussian ``sigma``); ``total_epsilon`` of it is at most
        ``epsilon``.
    """
    owner = "calibrate_to_total"
    d, dl, st = _check_total(owner, noise, sensitivity, delta, steps, accountant)
    e = check_float(epsilon, "epsilon", owner, 0.0, math.inf)
    q = _sampling_rate(sampling_rate, accountant, owner)
    if accountant == "basic":
        return per_step_scale(noise, d, e / st, dl / st, calibration)

    nm = _calibrated_multiplier(noise, e, dl, st, accountant, q)
    scale = nm * d
    # scale / d may differ from nm in the last bit: check the plan the engine will actually record.
    while composed_epsilon(((make_event(noise, scale / d, q), st),), dl, accountant) > e:
        scale *= 1.0 + 1e-12
    return float(scale)


@functools.lru_cache(maxsize=256)
def _calibrated_multiplier(noise: str, e: float, dl: float, st: int, accountant: str,
                           q: float | None = None) -> float:
    """The noise multiplier of :func:`calibrate_to_total` for "rdp"/"pld" (cached: engines ask every round)."""
    owner = "calibrate_to_total"

    def epsilon_of(nm: float) -> float:
        return composed_epsilon(((make_event(noise, nm, q), st),), dl, accountant)

    guess = Noise.from_name(noise, owner).multiplier_guess(e, dl, st)  # a starting point in multiplier space
    lo = hi = guess
    for _ in range(200):
        if epsilon_of(hi) <= e:
            break
        hi *= 2.0
    else:  # pragma: no cover - every finite target is met by enough noise
        raise InvalidParameterError(f"{owner}: no noise scale meets epsilon={e!r} at delta={dl!r} under "
                                    f"the {accountant!r} accountant.")
    while epsilon_of(lo) <= e:
        lo /= 2.0
    bracket = dp_accounting.ExplicitBracketInterval(lo, hi)
    return float(dp_accounting.calibrate_dp_mechanism(
        accountant_factory(accountant), lambda m: dp_accounting.SelfComposedDpEvent(make_event(noise, m, q), st),
        e, dl, bracket_interval=bracket, tol=guess * (1e-6 if q else 1e-8)))


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
        dist = Noise.from_name(self.noise, owner)
        check_float(self.epsilon, "epsilon", owner, 0.0, math.inf)
        if not dist.pure:
            if self.delta is None:
                raise InvalidParameterError("The 'delta' parameter of InputPerturbation must be a float in (0, 1) "
                                            f"for {type(dist).__name__} noise. Got None instead.")
            check_float(self.delta, "delta", owner, 0.0, 1.0)

    @property
    def distribution(self) -> Noise:
        """The noise distribution (:class:`~cvxdp.privacy.distributions.Noise`) called :attr:`noise`."""
        return Noise.from_name(self.noise, "InputPerturbation")

    @property
    def name(self) -> str:
        """``"InL"`` or ``"InG"`` (the studies' label: ``"In"`` and the distribution's letter)."""
        return "In" + self.distribution.letter

    def _sensitivity(self, l1: float, l2: float) -> float:
        return l1 if self.distribution.norm == 1 else l2

    def scale(self, l1: float, l2: float) -> float:
        """The per-coordinate noise scale for a release of l1 / l2 sensitivity ``l1`` / ``l2``."""
        return per_step_scale(self.noise, self._sensitivity(l1, l2), self.epsilon, self.delta)

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
        sens = self._sensitivity(l1, l2)
        xi = self.distribution.sample(rng, scale, x.shape)
        event = make_event(self.noise, scale / sens)
        delta = self.distribution.claim_delta(self.delta)
        return x + xi, InputRelease(self.noise, float(scale), float(sens), event, float(self.epsilon), delta)

    def pld_epsilon(self, l1: float, l2: float) -> float:
        """The PLD epsilon of one release at this delta (a check that the calibration meets the target)."""
        event = make_event(self.noise, self.scale(l1, l2) / self._sensitivity(l1, l2))
        return composed_epsilon(((event, 1),), self.distribution.claim_delta(self.delta), "pld")
