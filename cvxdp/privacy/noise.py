"""A calibrated noise distribution and its privacy claim: :class:`NoisePlan` (SPEC §2.1).

A plan is what a mechanism hands the engine for one agent: how to draw the noise of one local update and
which ``dp_accounting`` event one such draw is. With the default ``noise_source="numpy"`` sampling always
uses the caller's generator (one per agent, from a SeedSequence, never reseeded; SPEC §7): fast, same-seed
reproducible, research-grade. ``noise_source="opendp"`` draws from OpenDP's vetted samplers and the
operating system's secure randomness instead (not reproducible by seed); see :mod:`cvxdp.privacy.noise`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

import dp_accounting
import numpy as np

from ..errors import OptionalDependencyError, PartyRefusedError, check_choice, check_float, check_int, fail
from .distributions import Noise


@dataclass(frozen=True)
class NoisePlan:
    """Laplace or Gaussian noise of a given scale, calibrated to a sensitivity, with its per-step claim.

    Parameters
    ----------
    noise : {"laplace", "gaussian"}
        I.i.d. Laplace(0, scale) or N(0, scale^2) coordinates: the name of a registered
        :class:`~cvxdp.privacy.distributions.Noise` (:attr:`distribution`).
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
        discretized Laplace / Gaussian samplers (:mod:`cvxdp.privacy.noise`), which ignore ``rng`` and
        are not reproducible by seed. A plan built by a mechanism with ``noise_source="opendp"`` has its
        scale raised until OpenDP's own privacy map certifies ``epsilon`` (see
        :meth:`opendp_epsilon`); a plan built by hand is not re-checked.
    sampling_rate : float
        Poisson subsampling rate q in (0, 1] of the perturbed quantity (1: every record, no sampling). Below 1 the
        party computes each local gradient on a Poisson sample of its records (each in independently with
        probability q, drawn from its own generator), clips every per-example gradient to ``clip_norm`` and
        divides the sum by ``q N``; :meth:`dp_event` is then ``PoissonSampledDpEvent(q, event)``.
    clip_norm : float or None
        The per-example l2 clip of a subsampled plan (required when ``sampling_rate < 1``, else None).
    """

    noise: str
    scale: float
    sensitivity: float
    epsilon: float
    delta: float = 0.0
    relation: str = "unspecified"
    noise_source: str = "numpy"
    sampling_rate: float = 1.0
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        dist = Noise.from_name(self.noise, "NoisePlan")
        check_choice(self.noise_source, "noise_source", "NoisePlan", NOISE_SOURCES)
        for name in ("scale", "sensitivity", "epsilon"):
            v = check_float(getattr(self, name), name, "NoisePlan", 0.0, math.inf)
            object.__setattr__(self, name, v)
        dl = check_float(self.delta, "delta", "NoisePlan", 0.0, 1.0, closed="left")
        if not dist.pure and dl == 0.0:
            raise fail("delta", "NoisePlan", f"a float in (0, 1) for {type(dist).__name__} noise", self.delta)
        object.__setattr__(self, "delta", dl)
        q = check_float(self.sampling_rate, "sampling_rate", "NoisePlan", 0.0, 1.0, closed="right")
        object.__setattr__(self, "sampling_rate", q)
        if q < 1.0:
            if self.clip_norm is None:
                raise fail("clip_norm", "NoisePlan", "a float in (0, inf) when sampling_rate < 1", None)
            object.__setattr__(self, "clip_norm", check_float(self.clip_norm, "clip_norm", "NoisePlan", 0.0, math.inf))
        elif self.clip_norm is not None:
            raise fail("clip_norm", "NoisePlan", "None when sampling_rate = 1 (no subsampling)", self.clip_norm)

    @property
    def distribution(self) -> Noise:
        """The noise distribution called :attr:`noise`."""
        return Noise.from_name(self.noise, "NoisePlan")

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
            return sample(self.noise, self.scale, n)
        return self.distribution.sample(rng, self.scale, n)

    def perturb(self, rng: np.random.Generator, value: np.ndarray) -> np.ndarray:
        """``value`` plus one draw of this noise (same distribution as ``value + sample(rng, len(value))``).

        With ``noise_source="opendp"`` the addition happens inside OpenDP, which first rounds ``value`` to
        its noise lattice (:func:`cvxdp.privacy.noise.perturb`), so the released floats carry no rounding
        artefact of ``value``. The noise is symmetric, so ``value - xi`` (objective perturbation) has the
        same distribution.
        """
        v = np.asarray(value, dtype=float).ravel()
        if self.noise_source == "opendp":
            if not isinstance(rng, np.random.Generator):
                raise fail("rng", "NoisePlan.perturb", "a numpy.random.Generator", type(rng).__name__)
            return perturb(self.noise, self.scale, v)
        return v + self.sample(rng, v.size)

    def opendp_epsilon(self, n: int = 1) -> float:
        """The per-step epsilon OpenDP's own privacy map certifies for this plan's scale and sensitivity.

        Laplace: ``make_laplace(...).map(sensitivity)``; Gaussian: ``make_zCDP_to_approxDP`` of
        ``make_gaussian(...)`` at ``sensitivity``, evaluated at ``delta``. ``n`` is the number of noise
        coordinates per draw (it enters OpenDP's lattice-rounding slack only). Needs OpenDP installed;
        meaningful for either noise source (for "numpy" it is what the secure sampler would certify).
        """
        return opendp_epsilon(self.noise, self.scale, self.sensitivity, n, self.delta)

    @property
    def sampled(self) -> bool:
        """Whether the perturbed quantity is computed on a Poisson sample (``sampling_rate < 1``)."""
        return self.sampling_rate < 1.0

    def dp_event(self) -> dp_accounting.DpEvent:
        """The ``dp_accounting`` event of one draw (ADD_OR_REMOVE_ONE, multiplier scale / sensitivity), wrapped in
        ``PoissonSampledDpEvent(sampling_rate, ...)`` when the plan is subsampled."""
        event = self.distribution.event(self.noise_multiplier)
        if self.sampled:
            return dp_accounting.PoissonSampledDpEvent(sampling_probability=self.sampling_rate, event=event)
        return event

    def expected_norm(self, n: int) -> float:
        """``E ||xi||_2`` approximated by ``sqrt(E ||xi||^2)`` (variance 2 b^2 or sigma^2 per coordinate)."""
        return math.sqrt(n * self.distribution.variance(self.scale))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields."""
        d = asdict(self)
        if not self.sampled:  # plans without sampling keep their former form (checkpoints, fingerprints)
            d.pop("sampling_rate"), d.pop("clip_norm")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NoisePlan:
        """Inverse of :meth:`to_dict` (a dict without ``noise_source`` means "numpy")."""
        return cls(**d)


#: the fields a coordinator's noise plan must share with a party's own (relative tolerance of the floats)
PLAN_FIELDS = ("noise", "noise_source", "scale", "sensitivity", "epsilon", "delta", "sampling_rate", "clip_norm")
PLAN_TOLERANCE = 1e-9


def plan_mismatch(own: NoisePlan | None, theirs: NoisePlan | None) -> tuple[str, Any, Any] | None:
    """The first field in which a coordinator's plan ``theirs`` differs from a party's ``own`` (as ``(field, theirs,
    own)``), or None when they agree (floats up to :data:`PLAN_TOLERANCE`, relative). ``None`` plans: the field is
    ``"plan"``."""
    if own is None or theirs is None:
        return None if own is None and theirs is None else ("plan", theirs, own)
    for name in PLAN_FIELDS:
        a, b = getattr(theirs, name), getattr(own, name)
        if isinstance(b, float) and isinstance(a, float):
            if not abs(a - b) <= PLAN_TOLERANCE * max(abs(a), abs(b)):
                return name, a, b
        elif a != b:
            return name, a, b
    return None


def check_plan_matches(own: NoisePlan | None, theirs: NoisePlan | None, *, agent: str, round: int) -> None:
    """Refuse (:class:`~cvxdp.errors.PartyRefusedError`, reason ``"plan"``) a round whose message carries another
    noise plan than the party's own: no plan where the party adds noise (a non-private step), a plan where it adds
    none, or any field of :data:`PLAN_FIELDS` that differs (less noise, another mechanism, another claim). The party
    always draws its own plan's noise; the check keeps the coordinator's copy of the ledger honest."""
    diff = plan_mismatch(own, theirs)
    if diff is None:
        return
    field, given, mine = diff
    if field == "plan":
        what = ("asks for a non-private step (no noise plan)" if given is None
                else "sends a noise plan, but this party's policy is non-private")
    else:
        what = f"sends a noise plan with {field} = {given!r}; this party's own is {mine!r}"
    raise PartyRefusedError(f"Agent {agent!r} refuses round {round}: the coordinator {what} (field 'plan').",
                            party=agent, round=round, reason="plan", field="plan" if field == "plan"
                            else f"plan.{field}")


#: Where noise comes from: numpy's seeded generators (default) or OpenDP's vetted samplers (this module).
NOISE_SOURCES = ("numpy", "opendp")


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
    Noise.from_name(noise, owner)
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
    return Noise.from_name(noise, "measurement").opendp_measurement(dp, domain, scale, granularity(scale))


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
    if Noise.from_name(noise, owner).pure:
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

    ulps = Noise.from_name(noise, owner).secure_ulps
    if ulps:
        for _ in range(ulps):
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
