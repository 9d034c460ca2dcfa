"""Noise distributions as types (SPEC §2.1), the way ``dp_accounting`` makes its events types.

A :class:`Noise` is an immutable description of one additive noise distribution with what cvxdp needs of it: the
norm its sensitivity is measured in, the scale that meets a claim (epsilon, delta) for a sensitivity, the claim of a
scale, the ``dp_accounting`` event of one draw, its samples from a numpy generator, its OpenDP measurement (the
hardened source, :mod:`cvxdp.privacy.noise`) and the statistic its release audit uses. :class:`Laplace` and
:class:`Gaussian` are registered by name, so the names in case files, on the wire and in ledgers keep working:
``Noise.from_name("laplace")``. Adding a distribution is a subclass registered with :func:`register` (see
docs/architecture.md, "Adding a noise distribution").

The closed-form calibrations of the two distributions live here too (Laplace ``b = Delta_1 / epsilon``; the classic
and the analytic Gaussian mechanism); :mod:`cvxdp.privacy.calibration` composes them over steps and re-exports them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import dp_accounting
import numpy as np
from scipy import optimize, special

from ..errors import InvalidParameterError, check_choice, check_float

CALIBRATIONS = ("analytic", "classic")


def _check_common(sensitivity: float, epsilon: float, owner: str) -> tuple[float, float]:
    d = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    e = check_float(epsilon, "epsilon", owner, 0.0, math.inf)
    return d, e


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace parameter ``b = sensitivity / epsilon`` giving pure ``epsilon``-DP.

    Parameters
    ----------
    sensitivity : float
        The l1 sensitivity of the perturbed quantity, > 0.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    float
        The Laplace scale ``b``.
    """
    d, e = _check_common(sensitivity, epsilon, "laplace_scale")
    return d / e


def gaussian_sigma_classic(sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian calibration ``sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon`` (Dwork & Roth Thm A.1).

    Parameters
    ----------
    sensitivity : float
        The l2 sensitivity, > 0.
    epsilon : float
        Privacy parameter in (0, 1); the classic bound does not hold for ``epsilon >= 1``.
    delta : float
        Privacy parameter in (0, 1).

    Returns
    -------
    float
        The standard deviation ``sigma``.

    Raises
    ------
    InvalidParameterError
        If ``epsilon >= 1`` (use ``calibration="analytic"``), or any parameter is out of range.
    """
    d, e = _check_common(sensitivity, epsilon, "gaussian_sigma_classic")
    dl = check_float(delta, "delta", "gaussian_sigma_classic", 0.0, 1.0)
    if e >= 1.0:
        raise InvalidParameterError(
            f"The classic Gaussian calibration is only valid for epsilon < 1 (got epsilon={e!r}); "
            "use calibration=\"analytic\" (Balle & Wang 2018), which is valid for every epsilon.")
    return d * math.sqrt(2.0 * math.log(1.25 / dl)) / e


def gaussian_log_delta(ratio: float, epsilon: float) -> float:
    """``log delta`` of the Gaussian mechanism with ``sigma / sensitivity = ratio`` at ``epsilon``.

    The exact (Balle & Wang 2018, Thm 8) privacy profile
    ``delta = Phi(1/(2r) - eps r) - e^eps Phi(-1/(2r) - eps r)``, evaluated in log space for stability.
    """
    a = 0.5 / ratio - epsilon * ratio
    b = -0.5 / ratio - epsilon * ratio
    log_a = float(special.log_ndtr(a))
    log_b = epsilon + float(special.log_ndtr(b))
    if log_b >= log_a:
        return -math.inf
    return log_a + math.log1p(-math.exp(log_b - log_a))


def gaussian_sigma_analytic(sensitivity: float, epsilon: float, delta: float) -> float:
    """Analytic Gaussian mechanism (Balle & Wang 2018): the smallest ``sigma`` that gives (eps, delta)-DP.

    Solves ``Phi(D/(2s) - e s/D) - e^e Phi(-D/(2s) - e s/D) = delta`` for ``s`` with Brent's method on a
    log-scale bracket (relative accuracy better than 1e-12); the result is nudged up, if needed, so that
    the privacy profile at the returned ``sigma`` is at most ``delta``. Valid for every ``epsilon > 0``.

    Parameters
    ----------
    sensitivity : float
        The l2 sensitivity ``D``, > 0.
    epsilon : float
        Privacy parameter, > 0.
    delta : float
        Privacy parameter in (0, 1).

    Returns
    -------
    float
        The standard deviation ``sigma``.
    """
    d, e = _check_common(sensitivity, epsilon, "gaussian_sigma_analytic")
    dl = check_float(delta, "delta", "gaussian_sigma_analytic", 0.0, 1.0)
    return d * math.exp(_analytic_log_ratio(e, dl))


@functools.lru_cache(maxsize=256)
def _analytic_log_ratio(epsilon: float, delta: float) -> float:
    """``log(sigma / D)`` of :func:`gaussian_sigma_analytic`: a function of (epsilon, delta) only (the profile depends
    on ``sigma / D``), so it is solved once per pair (cached: a run asks for every agent, and agents usually share
    the pair)."""
    target = math.log(delta)

    def gap(log_r: float) -> float:
        return gaussian_log_delta(math.exp(log_r), epsilon) - target

    guess = math.log(math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
    lo = hi = guess
    while gap(lo) <= 0.0:  # the profile decreases in sigma: move down until delta(lo) > delta
        lo -= 1.0
    while gap(hi) > 0.0:
        hi += 1.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    while gap(root) > 0.0:
        root = np.nextafter(root, math.inf)
    return float(root)


def gaussian_epsilon(sensitivity: float, sigma: float, delta: float) -> float:
    """The smallest epsilon for which N(0, sigma^2) noise on an l2-``sensitivity`` query is (eps, delta)-DP.

    The inverse of :func:`gaussian_sigma_analytic` (via ``dp_accounting.get_epsilon_gaussian``).
    """
    d = check_float(sensitivity, "sensitivity", "gaussian_epsilon", 0.0, math.inf)
    s = check_float(sigma, "sigma", "gaussian_epsilon", 0.0, math.inf)
    dl = check_float(delta, "delta", "gaussian_epsilon", 0.0, 1.0)
    return float(dp_accounting.get_epsilon_gaussian(s / d, dl))


# --------------------------------------------------------------------------- the type and its registry
_REGISTRY: dict[str, Noise] = {}


@dataclass(frozen=True)
class Noise:
    """An additive noise distribution: i.i.d. coordinates of a given scale, calibrated to a sensitivity.

    Subclasses set the class attributes and implement the methods that raise ``NotImplementedError``; an instance
    holds no state (equal instances of a class are interchangeable) and is found by its :attr:`name`.

    Attributes
    ----------
    name : str
        The name in case files, noise plans, messages and ledgers (``"laplace"``).
    letter : str
        The last letter of a mechanism's short name (``"L"``: ObjL, OutL, InL).
    norm : int
        The norm ``q`` of the sensitivity the scale is calibrated to (1: l1, 2: l2).
    pure : bool
        Whether one draw is pure epsilon-DP (its claims have delta 0; it needs no delta). OpenDP's measurement of
        a pure distribution maps to epsilon directly; that of another one is zCDP, converted at delta.
    subsampled : bool
        Whether the engine accounts amplification by Poisson sampling of its draws (``sampling_rate``).
    secure_ulps : int
        How many next floats :func:`~cvxdp.privacy.noise.secure_scale` tries before it searches: OpenDP's map of a
        distribution whose float calibration it matches up to rounding is met within a few ulps.
    statistic : str
        What the release audit's statistic is (the likelihood ratio of the distribution or one monotone in it).
    event_class : type
        The ``dp_accounting`` event class of one draw (it takes ``noise_multiplier``).
    """

    name: ClassVar[str] = ""
    letter: ClassVar[str] = ""
    norm: ClassVar[int] = 0
    pure: ClassVar[bool] = False
    subsampled: ClassVar[bool] = False
    secure_ulps: ClassVar[int] = 0
    statistic: ClassVar[str] = ""
    event_class: ClassVar[type] = dp_accounting.UnsupportedDpEvent

    @staticmethod
    def from_name(name: object, owner: str = "Noise", parameter: str = "noise") -> Noise:
        """The registered distribution called ``name``; else the error names ``owner``, ``parameter`` and the
        registered names."""
        noise = _REGISTRY.get(name) if isinstance(name, str) else None  # the hot path: a plan's noise every draw
        return noise if noise is not None else _REGISTRY[check_choice(name, parameter, owner, names())]

    def __str__(self) -> str:
        return self.name

    def scale(self, sensitivity: float, epsilon: float, delta: float | None, calibration: str = "analytic") -> float:
        """The scale of one draw that is (epsilon, delta)-DP for a query of this ``sensitivity``."""
        raise NotImplementedError

    def epsilon(self, sensitivity: float, scale: float, delta: float) -> float:
        """The epsilon one draw of this ``scale`` gives a query of this ``sensitivity`` (at ``delta``)."""
        raise NotImplementedError

    def basic_epsilon(self, sensitivity: float, scale: float, steps: int, delta: float) -> float:
        """Basic composition: the sum of ``steps`` per-step epsilons, the total ``delta`` split evenly."""
        return steps * self.epsilon(sensitivity, scale, delta / steps)

    def claim_delta(self, delta: float | None) -> float:
        """The delta of a claim: 0 for a pure distribution, else ``delta``."""
        return 0.0 if self.pure else float(delta)  # type: ignore[arg-type]

    def event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
        """The ``dp_accounting`` event of one draw of multiplier ``scale / sensitivity`` (add or remove one, the
        sensitivity folded into the multiplier)."""
        return self.event_class(noise_multiplier=float(noise_multiplier))

    def multiplier_guess(self, epsilon: float, delta: float, steps: int) -> float:
        """A noise multiplier from which the search of :func:`~cvxdp.privacy.calibration.calibrate_to_total` starts
        (``steps`` draws meeting ``(epsilon, delta)``)."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
        """I.i.d. draws of this ``scale`` from the caller's generator."""
        raise NotImplementedError

    def variance(self, scale: float) -> float:
        """The variance of one coordinate."""
        raise NotImplementedError

    def std(self, scale: float) -> float:
        """The standard deviation of one coordinate."""
        raise NotImplementedError

    def audit_statistic(self, y: np.ndarray, x: np.ndarray, x_prime: np.ndarray) -> float:
        """The release audit's statistic of an output ``y`` (of ``x`` or ``x_prime`` plus noise): the log-likelihood
        ratio of ``y`` under ``x`` against ``x_prime``, or a statistic monotone in it."""
        raise NotImplementedError

    def opendp_measurement(self, dp: Any, domain: Any, scale: float, k: int) -> Any:
        """OpenDP's measurement adding this noise to a vector of ``domain`` (``dp`` is ``opendp.prelude``, ``k``
        the lattice exponent)."""
        raise NotImplementedError

    def step_refusal(self, epsilon: float, calibration: str) -> str | None:
        """Why a per-step claim of ``epsilon`` cannot be calibrated with ``calibration`` (None: it can)."""
        return None


def names() -> tuple[str, ...]:
    """The registered distributions' names, in the order they were registered."""
    return tuple(_REGISTRY)


def registered() -> tuple[Noise, ...]:
    """The registered distributions, in the order they were registered."""
    return tuple(_REGISTRY.values())


def register(noise: Noise) -> Noise:
    """Register ``noise`` under its name (and return it); a name or a letter already taken is refused."""
    if not isinstance(noise, Noise) or not noise.name or not noise.letter or noise.norm not in (1, 2):
        raise InvalidParameterError(f"register: a Noise instance with a name, a letter and a norm of 1 or 2 is "
                                    f"needed. Got {noise!r} instead.")
    for other in _REGISTRY.values():
        if noise.name == other.name or noise.letter == other.letter:
            raise InvalidParameterError(f"register: the name {noise.name!r} or the letter {noise.letter!r} is "
                                        f"already registered ({type(other).__name__}).")
    _REGISTRY[noise.name] = noise
    return noise


def unregister(name: str) -> None:
    """Remove the distribution called ``name`` from the registry (tests registering a toy one)."""
    _REGISTRY.pop(Noise.from_name(name, "unregister", "name").name)


def with_norm_other_than(noise: Noise) -> Noise | None:
    """The first registered distribution whose sensitivity norm differs from ``noise``'s (None if there is none)."""
    return next((other for other in _REGISTRY.values() if other.norm != noise.norm), None)


@dataclass(frozen=True)
class Laplace(Noise):
    """Laplace(0, b) coordinates: pure ``Delta_1 / b``-DP for an l1 sensitivity ``Delta_1``."""

    name: ClassVar[str] = "laplace"
    letter: ClassVar[str] = "L"
    norm: ClassVar[int] = 1
    pure: ClassVar[bool] = True
    secure_ulps: ClassVar[int] = 64
    statistic: ClassVar[str] = "log-likelihood ratio"
    event_class: ClassVar[type] = dp_accounting.LaplaceDpEvent

    def scale(self, sensitivity: float, epsilon: float, delta: float | None, calibration: str = "analytic") -> float:
        """``b = sensitivity / epsilon`` (``delta`` and ``calibration`` unused)."""
        return laplace_scale(sensitivity, epsilon)

    def epsilon(self, sensitivity: float, scale: float, delta: float) -> float:
        """``sensitivity / scale`` (pure)."""
        return sensitivity / scale

    def basic_epsilon(self, sensitivity: float, scale: float, steps: int, delta: float) -> float:
        """``steps sensitivity / scale``."""
        return steps * sensitivity / scale

    def multiplier_guess(self, epsilon: float, delta: float, steps: int) -> float:
        """The basic split ``steps / epsilon`` (an upper end)."""
        return steps / epsilon

    def sample(self, rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
        """``rng.laplace(0, scale, size)``."""
        return rng.laplace(0.0, scale, size)

    def variance(self, scale: float) -> float:
        """``2 b^2``."""
        return 2.0 * scale ** 2

    def std(self, scale: float) -> float:
        """``sqrt(2) b``."""
        return scale * math.sqrt(2.0)

    def audit_statistic(self, y: np.ndarray, x: np.ndarray, x_prime: np.ndarray) -> float:
        """``sum |y - x'| - |y - x|``, the log-likelihood ratio times ``b``."""
        return float(np.sum(np.abs(y - x_prime) - np.abs(y - x)))

    def opendp_measurement(self, dp: Any, domain: Any, scale: float, k: int) -> Any:
        """``make_laplace`` with ``l1_distance`` (privacy measure MaxDivergence: pure epsilon)."""
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale, k=k)


@dataclass(frozen=True)
class Gaussian(Noise):
    """N(0, sigma^2) coordinates: (epsilon, delta)-DP for an l2 sensitivity (analytic or classic calibration)."""

    name: ClassVar[str] = "gaussian"
    letter: ClassVar[str] = "G"
    norm: ClassVar[int] = 2
    pure: ClassVar[bool] = False
    subsampled: ClassVar[bool] = True
    statistic: ClassVar[str] = "projection on x - x'"
    event_class: ClassVar[type] = dp_accounting.GaussianDpEvent

    def scale(self, sensitivity: float, epsilon: float, delta: float | None, calibration: str = "analytic") -> float:
        """:func:`gaussian_sigma_analytic` or :func:`gaussian_sigma_classic` (``calibration``); ``delta`` needed."""
        check_choice(calibration, "calibration", "per_step_scale", CALIBRATIONS)
        if delta is None:
            raise InvalidParameterError("Gaussian noise needs a delta in (0, 1). Got None instead.")
        if calibration == "classic":
            return gaussian_sigma_classic(sensitivity, epsilon, delta)
        return gaussian_sigma_analytic(sensitivity, epsilon, delta)

    def epsilon(self, sensitivity: float, scale: float, delta: float) -> float:
        """:func:`gaussian_epsilon` at ``delta``."""
        return gaussian_epsilon(sensitivity, scale, delta)

    def multiplier_guess(self, epsilon: float, delta: float, steps: int) -> float:
        """Exact under PLD: ``steps`` Gaussian draws of multiplier m compose to one of ``m / sqrt(steps)``."""
        return gaussian_sigma_analytic(1.0, epsilon, delta) * math.sqrt(steps)

    def sample(self, rng: np.random.Generator, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
        """``rng.normal(0, scale, size)``."""
        return rng.normal(0.0, scale, size)

    def variance(self, scale: float) -> float:
        """``sigma^2``."""
        return scale ** 2

    def std(self, scale: float) -> float:
        """``sigma``."""
        return scale * 1.0

    def audit_statistic(self, y: np.ndarray, x: np.ndarray, x_prime: np.ndarray) -> float:
        """``<y, x - x'>``, monotone in the log-likelihood ratio."""
        return float(y @ (x - x_prime))

    def opendp_measurement(self, dp: Any, domain: Any, scale: float, k: int) -> Any:
        """``make_gaussian`` with ``l2_distance`` (privacy measure ZeroConcentratedDivergence: rho-zCDP)."""
        return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale, k=k)

    def step_refusal(self, epsilon: float, calibration: str) -> str | None:
        """The classic calibration refuses an epsilon of 1 or more."""
        if calibration == "classic" and epsilon >= 1.0:
            return (f"the classic Gaussian calibration is only valid for epsilon < 1 (got epsilon={epsilon!r}); use "
                    "calibration=\"analytic\".")
        return None


LAPLACE = register(Laplace())
GAUSSIAN = register(Gaussian())
