"""Secure noise: OpenDP's vetted Laplace and Gaussian samplers (``noise_source="opendp"``; issue 5 item 2).

The default noise source, ``"numpy"``, draws ``rng.laplace`` / ``rng.normal`` from the agent's seeded
generator. That is fast and same-seed reproducible, but it is **research-grade**: textbook floating-point
samplers have gaps and irregular probabilities in the low-order bits of their outputs, and an attacker who
sees exact floats can sometimes tell neighbouring inputs apart from those bits alone (Mironov, "On
significance of the least significant bits for differential privacy", CCS 2012). Numpy's generators are
also not cryptographically secure.

``noise_source="opendp"`` draws every coordinate with OpenDP's ``make_laplace`` / ``make_gaussian``
(``pip install 'cvxdp[secure]'``; tested with OpenDP 0.16). What that means:

* **Sampler.** OpenDP's float Laplace and Gaussian are *discretized* mechanisms: the noise is an exact
  discrete Laplace / discrete Gaussian sample (Canonne, Kamath & Steinke 2020) on the lattice
  ``2^k Z``, drawn with exact arithmetic from the operating system's cryptographically secure randomness,
  then rounded to the nearest float. cvxdp picks ``k = floor(log2(scale)) - 100`` (:func:`granularity`),
  a lattice about 2^-48 times finer than the float spacing of a typical draw (OpenDP's default
  ``k = -1074`` is several times slower and changes no decision here).
* **Not reproducible by seed.** OpenDP ignores the run's seed and the agent's generator: two runs with the
  same ``seed`` draw different noise, and a checkpointed run resumed under this source does not replay the
  interrupted run's noise. ``describe()`` of the mechanism and therefore the saved run config record
  ``noise_source``. (As a side effect a secure run cannot suffer from a reused seed.)
* **Accounting.** The plan keeps the claim the numpy calibration would make, and its scale is then raised,
  if needed, until **OpenDP's own privacy map at the plan's sensitivity certifies that claim**
  (:func:`secure_scale`):

  - Laplace: OpenDP's map is ``epsilon = (Delta + n 2^k) / scale`` (the ``n 2^k`` term pays for rounding
    the input to the lattice; with cvxdp's ``k`` it is below float resolution). The scale moves by at most
    a few ulps.
  - Gaussian: OpenDP certifies ``rho``-zCDP with ``rho = (Delta + sqrt(n) 2^k)^2 / (2 scale^2)`` (the
    discrete Gaussian has the Renyi curve of the continuous one) and converts it to (epsilon, delta) with
    ``make_zCDP_to_approxDP``. That conversion is looser than the analytic Gaussian calibration the numpy
    plan uses, so a secure Gaussian plan carries about 5-20 % more noise for the same claim
    (8 % at epsilon = 1, delta = 1e-5; 13 % at delta = 1e-3; 6 % at delta = 1e-8). The classic
    calibration (epsilon < 1) is already conservative enough and keeps its scale.

  The plan's ``dp_event()`` is still the continuous ``LaplaceDpEvent`` / ``GaussianDpEvent`` of
  ``scale / sensitivity`` (the ledger only knows those). Basic composition of the claims is exactly what
  OpenDP certifies; RDP accounting of the Gaussian is rigorous (same Renyi curve); PLD accounting, and RDP
  of the Laplace, treat the lattice mechanism as its continuous limit, which differs from it only at the
  lattice scale ``2^k``, some 2^-100 of the noise scale.
* **What is still float arithmetic.** :meth:`NoisePlan.sample` returns the noise vector (OpenDP applied to
  the zero vector) and the engine adds it to the gradient or the projection in float arithmetic. The noise
  itself has no sampler artefacts, but the final rounding of ``value + noise`` is the engine's. For a
  release in which OpenDP also rounds the input to its lattice before adding the noise, use
  :func:`perturb` (``NoisePlan.perturb``).
* **Speed.** About 5-8 microseconds per Laplace coordinate and 13-16 per Gaussian coordinate (one CPU
  core): 1,000 coordinates take about 6 / 15 ms; numpy takes microseconds.
"""

from __future__ import annotations

import functools
import math
from importlib import metadata
from typing import Any

import numpy as np

from ..errors import OptionalDependencyError
from ..params import check_choice, check_float, check_int

#: Where noise comes from: numpy's seeded generators (default) or OpenDP's vetted samplers (this module).
NOISE_SOURCES = ("numpy", "opendp")

__all__ = ["GRANULARITY_BITS", "NOISE_SOURCES", "available", "granularity", "measurement", "opendp_epsilon",
           "opendp_rho", "opendp_version", "perturb", "require_opendp", "sample", "secure_scale"]

#: Bits between the noise scale and the lattice spacing 2^k of OpenDP's discretized samplers.
GRANULARITY_BITS = 100

_INSTALL = "pip install 'cvxdp[secure]'"


@functools.lru_cache(maxsize=1)
def require_opendp() -> Any:
    """Import ``opendp.prelude`` with the ``contrib`` feature enabled, or raise OptionalDependencyError."""
    try:
        import opendp.prelude as dp
    except ImportError as err:
        raise OptionalDependencyError(
            "noise_source=\"opendp\" needs the OpenDP library (>= 0.10), which is not installed; "
            f"run: {_INSTALL}") from err
    dp.enable_features("contrib")
    return dp


def opendp_version() -> str | None:
    """The installed OpenDP version string, or None when it is not installed."""
    try:
        return metadata.version("opendp")
    except metadata.PackageNotFoundError:
        return None


def available() -> bool:
    """Whether OpenDP can be imported."""
    try:
        require_opendp()
    except OptionalDependencyError:
        return False
    return True


def granularity(scale: float) -> int:
    """The exponent ``k`` of OpenDP's noise lattice ``2^k Z`` for a noise of this scale."""
    return math.floor(math.log2(scale)) - GRANULARITY_BITS


def _check(noise: str, scale: float, n: int, owner: str) -> tuple[str, float, int]:
    check_choice(noise, "noise", owner, ("laplace", "gaussian"))
    s = check_float(scale, "scale", owner, 0.0, math.inf)
    m = check_int(n, "n", owner, 1)
    return noise, s, m


@functools.lru_cache(maxsize=128)
def _measurement(noise: str, scale: float, n: int) -> Any:
    dp = require_opendp()
    try:
        atom = dp.atom_domain(T=float, nan=False)
    except TypeError:  # pragma: no cover - OpenDP releases without the ``nan`` flag
        atom = dp.atom_domain(T=float)
    domain = dp.vector_domain(atom, size=n)
    if noise == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale, k=granularity(scale))
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale, k=granularity(scale))


def measurement(noise: str, scale: float, n: int) -> Any:
    """OpenDP's measurement adding ``noise`` of this ``scale`` to a float vector of length ``n`` (cached).

    Laplace: ``make_laplace`` over ``vector_domain(atom_domain(T=float), size=n)`` with ``l1_distance``
    (privacy measure MaxDivergence, i.e. pure epsilon). Gaussian: ``make_gaussian`` with ``l2_distance``
    (privacy measure ZeroConcentratedDivergence, i.e. rho-zCDP). Both with ``k = granularity(scale)``.
    """
    return _measurement(*_check(noise, scale, n, "measurement"))


def sample(noise: str, scale: float, n: int) -> np.ndarray:
    """``n`` i.i.d. noise coordinates from OpenDP (its measurement applied to the zero vector).

    Draws from the operating system's secure randomness; not reproducible, no seed is involved.
    """
    check_int(n, "n", "sample", 0)
    if n == 0:
        return np.zeros(0)
    return np.asarray(measurement(noise, scale, n)([0.0] * n), dtype=float)


def perturb(noise: str, scale: float, x: np.ndarray) -> np.ndarray:
    """OpenDP's release of ``x``: ``x`` rounded to the noise lattice, plus lattice noise, as floats.

    Unlike ``x + sample(...)`` the addition happens inside OpenDP, so the output carries no float artefact
    of ``x`` either. The privacy map is that of :func:`measurement` for ``len(x)`` coordinates.
    """
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        return arr.copy()
    return np.asarray(measurement(noise, scale, arr.size)(arr.tolist()), dtype=float)


def opendp_rho(scale: float, sensitivity: float, n: int = 1) -> float:
    """OpenDP's zCDP ``rho`` of its Gaussian measurement at l2 ``sensitivity`` (its own privacy map)."""
    d = check_float(sensitivity, "sensitivity", "opendp_rho", 0.0, math.inf)
    return float(measurement("gaussian", scale, n).map(d))


def opendp_epsilon(noise: str, scale: float, sensitivity: float, n: int = 1, delta: float = 0.0) -> float:
    """The epsilon OpenDP's own privacy map certifies for its measurement at ``sensitivity``.

    Laplace: ``meas.map(sensitivity)`` (pure DP; ``delta`` unused). Gaussian: the approximate-DP profile
    of ``make_zCDP_to_approxDP(meas)`` at ``sensitivity``, evaluated at ``delta`` (in (0, 1)).
    """
    owner = "opendp_epsilon"
    noise, s, m = _check(noise, scale, n, owner)
    d = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    meas = _measurement(noise, s, m)
    if noise == "laplace":
        return float(meas.map(d))
    dl = check_float(delta, "delta", owner, 0.0, 1.0)
    return float(_approx(noise, s, m).map(d).epsilon(dl))


@functools.lru_cache(maxsize=128)
def _approx(noise: str, scale: float, n: int) -> Any:
    return require_opendp().c.make_zCDP_to_approxDP(_measurement(noise, scale, n))


@functools.lru_cache(maxsize=512)
def secure_scale(noise: str, sensitivity: float, scale: float, epsilon: float, delta: float = 0.0,
                 n: int = 1) -> float:
    """The smallest scale (to about 1e-10 relative) ``>= scale`` at which OpenDP certifies ``epsilon``.

    Returns ``s >= scale`` with ``opendp_epsilon(noise, s, sensitivity, n, delta) <= epsilon``. For
    Laplace this moves ``scale`` by a few ulps at most; for Gaussian it pays for the zCDP -> (eps, delta)
    conversion (see the module docstring).
    """
    owner = "secure_scale"
    noise, s, m = _check(noise, scale, n, owner)
    d = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    e = check_float(epsilon, "epsilon", owner, 0.0, math.inf)

    def ok(x: float) -> bool:
        return opendp_epsilon(noise, x, d, m, delta) <= e

    if noise == "laplace":
        for _ in range(64):
            if ok(s):
                return s
            s = float(np.nextafter(s, math.inf))
        s *= 1.0 + 1e-12
    lo, hi = s, s
    while not ok(hi):
        lo, hi = hi, hi * 1.25
    if hi == s:
        return s
    while hi / lo - 1.0 > 1e-10:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
