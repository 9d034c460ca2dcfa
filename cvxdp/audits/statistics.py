"""The statistics of the empirical privacy audits: a lower bound on epsilon from samples (Clopper-Pearson).

Given samplers of a mechanism's scalar output on two neighbouring inputs D and D', :func:`empirical_epsilon` counts
threshold events ``{out > t}`` and ``{out < t}`` and turns the counts into a high-confidence lower bound on epsilon
with one-sided Clopper-Pearson intervals. A correct (epsilon, delta)-DP mechanism satisfies
``P[M(D) in S] <= e^eps P[M(D') in S] + delta`` for every S, so ``log((p_lo - delta) / p'_hi)`` is, with probability
at least ``1 - alpha``, at most epsilon; a value above the claimed epsilon flags a bug. :func:`two_statistics` tests
several statistics of one set of runs (Bonferroni); :func:`transcript_statistic`, :func:`rounds_direction` and
:func:`rounds_ratio` reduce a node's whole release to one number per run. The audits built on them are in
:mod:`cvxdp.audits.release`, :mod:`cvxdp.audits.gamma` and :mod:`cvxdp.audits.sharing`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ..errors import check_float, check_int, fail

Sampler = Callable[[np.random.Generator, int], np.ndarray]


#: Default threshold quantiles of the pooled outputs: dense in the tails, where the loss ratio is largest.
DEFAULT_QUANTILES = np.unique(np.concatenate([
    [1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.02, 0.05], np.linspace(0.1, 0.9, 17),
    1.0 - np.array([1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.02, 0.05])]))


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`empirical_epsilon`.

    Attributes
    ----------
    epsilon_lower : float
        ``max(0, max_S log((p_lo - delta) / p'_hi))``: with confidence ``1 - alpha`` the mechanism is not
        (eps, delta)-DP for any eps below it.
    claimed : float or None
        The epsilon the mechanism claims, if given.
    best_threshold : float or None
        The threshold of the best event (None if no event gave a positive bound).
    counts : dict
        The best event: ``{"event": ">" or "<", "direction": "D,D'" or "D',D", "k": hits in the first
        sample, "k_prime": hits in the second, "trials": n, "p_lo": ..., "p_prime_hi": ...}``.
    trials, delta, alpha : as given.
    statistic : str or None
        For :func:`audit_mechanism` / :func:`audit_local_update`: the statistic of the best bound,
        ``"output"`` or ``"difference"`` (output minus the reference run's); None for
        :func:`empirical_epsilon`.
    details : dict
        What was audited (mechanism, mode, broken twin, sensitivity, noise scale and source, seeds, the
        bound of each statistic, and for the solve audit the box and ``boundary_fraction``, the share of
        the D run's outputs on or beyond the box bound); JSON-able.
    """

    epsilon_lower: float
    claimed: float | None
    best_threshold: float | None
    counts: dict[str, Any] = field(default_factory=dict)
    trials: int = 0
    delta: float = 0.0
    alpha: float = 0.05
    statistic: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def violated(self) -> bool:
        """True when the lower bound exceeds the claimed epsilon (the claim is refuted)."""
        return self.claimed is not None and self.epsilon_lower > self.claimed

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, plus ``violated``."""
        return {"epsilon_lower": self.epsilon_lower, "claimed": self.claimed, "violated": self.violated,
                "best_threshold": self.best_threshold, "counts": dict(self.counts), "trials": self.trials,
                "delta": self.delta, "alpha": self.alpha, "statistic": self.statistic,
                "details": dict(self.details)}


def clopper_pearson_lower(k: np.ndarray, n: int, level: float) -> np.ndarray:
    """One-sided lower confidence bound on a binomial p from ``k`` hits in ``n`` (holds w.p. 1 - level)."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        lo = stats.beta.ppf(level, k, n - k + 1)
    return np.where(k > 0, lo, 0.0)


def clopper_pearson_upper(k: np.ndarray, n: int, level: float) -> np.ndarray:
    """One-sided upper confidence bound on a binomial p from ``k`` hits in ``n`` (holds w.p. 1 - level)."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        hi = stats.beta.ppf(1.0 - level, k + 1, n - k)
    return np.where(k < n, hi, 1.0)


def _draw(sampler: Sampler, rng: np.random.Generator, n: int, name: str) -> np.ndarray:
    out = np.asarray(sampler(rng, n), dtype=float).ravel()
    if out.shape != (n,):
        raise fail(name, "empirical_epsilon", f"a sampler returning {n} scalar outputs",
                   f"an array of shape {out.shape}")
    return np.sort(out)


def empirical_epsilon(sample: Sampler, sample_prime: Sampler, *, trials: int, delta: float = 0.0,
                      alpha: float = 0.05, thresholds: np.ndarray | None = None,
                      rng: np.random.Generator, claimed: float | None = None) -> AuditResult:
    """High-confidence lower bound on the epsilon of a mechanism from neighbouring-input samples.

    Parameters
    ----------
    sample, sample_prime : callable ``(rng, n) -> ndarray``
        Draw ``n`` scalar outputs of the mechanism on D and on a neighbour D'.
    trials : int
        Samples drawn from each.
    delta : float
        The mechanism's claimed delta, subtracted from the lower bound on ``p``.
    alpha : float
        Overall failure probability; each of the ``2 x 2 x len(thresholds)`` tests uses two
        Clopper-Pearson bounds at level ``alpha / (4 len(thresholds))`` (Bonferroni).
    thresholds : array, optional
        Thresholds t of the events; default: the :data:`DEFAULT_QUANTILES` of the pooled outputs.
    rng : numpy.random.Generator
        The generator passed to both samplers.
    claimed : float, optional
        The claimed epsilon, stored in the result.

    Returns
    -------
    AuditResult
    """
    owner = "empirical_epsilon"
    n = check_int(trials, "trials", owner, 1)
    dl = check_float(delta, "delta", owner, 0.0, 1.0, closed="left")
    a = check_float(alpha, "alpha", owner, 0.0, 1.0)
    if not isinstance(rng, np.random.Generator):
        raise fail("rng", owner, "a numpy.random.Generator", type(rng).__name__)
    if claimed is not None:
        claimed = check_float(claimed, "claimed", owner, 0.0, math.inf, closed="left")
    x = _draw(sample, rng, n, "sample")
    y = _draw(sample_prime, rng, n, "sample_prime")
    if thresholds is None:
        t = np.unique(np.quantile(np.concatenate([x, y]), DEFAULT_QUANTILES))
    else:
        t = np.unique(np.asarray(thresholds, dtype=float).ravel())
        if t.size == 0 or not np.all(np.isfinite(t)):
            raise fail("thresholds", owner, "a non-empty array of finite floats", thresholds)
    level = a / (4 * t.size)
    # hits of {out > t} and {out < t} in each (sorted) sample, all thresholds at once
    above = {"x": n - np.searchsorted(x, t, side="right"), "y": n - np.searchsorted(y, t, side="right")}
    below = {"x": np.searchsorted(x, t, side="left"), "y": np.searchsorted(y, t, side="left")}
    best = (-math.inf, None, {})
    for event, hits in ((">", above), ("<", below)):
        for direction, (p, q) in (("D,D'", ("x", "y")), ("D',D", ("y", "x"))):
            p_lo = clopper_pearson_lower(hits[p], n, level)
            q_hi = clopper_pearson_upper(hits[q], n, level)
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = np.where(p_lo > dl, np.log(np.maximum(p_lo - dl, 1e-300) / q_hi), -math.inf)
            i = int(np.argmax(bound))
            if bound[i] > best[0]:
                best = (float(bound[i]), float(t[i]),
                        {"event": event, "direction": direction, "k": int(hits[p][i]),
                         "k_prime": int(hits[q][i]), "trials": n, "p_lo": float(p_lo[i]),
                         "p_prime_hi": float(q_hi[i])})
    eps_lo, thr, counts = best
    if eps_lo <= 0.0:
        return AuditResult(0.0, claimed, None, {}, n, dl, a)
    return AuditResult(eps_lo, claimed, thr, counts, n, dl, a)



def fixed_sampler(values: np.ndarray) -> Sampler:
    """A sampler returning ``values`` whatever it is asked (outputs drawn beforehand, e.g. by whole runs)."""
    def sampler(rng: np.random.Generator, n: int) -> np.ndarray:
        return values
    return sampler


def two_statistics(out: np.ndarray, out_prime: np.ndarray, ref: np.ndarray, *, delta: float, alpha: float,
                   claimed: float, seed: int, details: dict[str, Any],
                   extra: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> AuditResult:
    """The largest of the bounds from the output and from output minus reference (and from the ``extra`` named
    statistics ``(on D, on D')``, each post-processing of the release), each at ``alpha / k`` (Bonferroni)."""
    n = out.size
    rng = np.random.default_rng(seed)  # unused by the fixed samplers; empirical_epsilon requires one
    pairs = {"output": (out, out_prime), "difference": (out - ref, out_prime - ref), **(extra or {})}
    results = {name: empirical_epsilon(fixed_sampler(x), fixed_sampler(y), trials=n, delta=delta, alpha=alpha / len(pairs),
                                       rng=rng, claimed=claimed)
               for name, (x, y) in pairs.items()}
    name = max(results, key=lambda k: results[k].epsilon_lower)
    best = results[name]
    details = {**details, "statistics": {k: r.epsilon_lower for k, r in results.items()}}
    return AuditResult(best.epsilon_lower, claimed, best.best_threshold, best.counts, n, best.delta, alpha,
                       name if best.epsilon_lower > 0 else None, details)



def transcript_statistic(transcript: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Linear statistic of a node's whole release: ``sum_r <w, release_r>`` per replica.

    ``transcript`` has shape (rounds, replicas, k) (every released coordinate of every round); ``direction``
    (k,) is the shift of the neighbour's data. For a Gaussian release whose mean moves along ``w`` this is
    the likelihood-ratio (Neyman-Pearson) direction; for any mechanism it is post-processing of everything
    the node sent, so a correct mechanism keeps it within its composed claim.
    """
    return np.einsum("rik,k->i", np.asarray(transcript, dtype=float), np.asarray(direction, dtype=float))


def rounds_direction(profiles: np.ndarray) -> np.ndarray:
    """The unit combination ``u`` of rounds along which ``profiles`` (rounds x replicas) vary least: the eigenvector
    of the smallest eigenvalue of their covariance over replicas.

    Estimated on the reference run only (independent of the audited runs' noise under a correct mechanism), so
    ``u @ profile`` of an audited run is post-processing of its release. Independent noise every round leaves every
    combination noisy; one draw reused every round lies (up to clipping) on one direction of the rounds, and ``u``
    cancels it.
    """
    values, vectors = np.linalg.eigh(np.atleast_2d(np.cov(np.asarray(profiles, dtype=float))))
    return vectors[:, int(np.argmin(values))]


def rounds_ratio(profiles: np.ndarray) -> np.ndarray:
    """Each replica's second round's release over its first's, ``release_2 / release_1`` (0 where
    ``release_1 = 0``).

    A fixed function of the release (post-processing: nothing is estimated). On the curvature problem of
    :func:`audit_release` the start is 0, so round 1 releases noise only and round 2 maps it through the
    data-dependent curvature. With fresh noise in round 2 the ratio is noisy; with round 1's draw reused, the ratio
    of every replica away from the box's bounds is one data-dependent constant (``(2c - 1 - s) / c`` for objective
    perturbation, ``c`` the update's weight ``eta + rho``), so D and D' no longer overlap. Unlike
    :func:`rounds_direction` it is not pulled off course by the replicas clipped at the box (which kept the rounds
    combination from refuting objective perturbation's Gaussian twin).

    Parameters
    ----------
    profiles : ndarray
        Shape (rounds, replicas), rounds >= 2: each replica's per-round release.

    Returns
    -------
    ndarray
        Shape (replicas,).
    """
    p = np.asarray(profiles, dtype=float)
    first, second = p[0], p[1]
    safe = np.where(first == 0.0, 1.0, first)
    return np.where(first == 0.0, 0.0, second / safe)

