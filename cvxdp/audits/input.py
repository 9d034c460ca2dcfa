"""Audit of one-shot input perturbation (issue 39): a lower bound on the epsilon of a release ``x + xi`` from
releases on two neighbouring data vectors, beside the mechanism's claim.

The attacker sees one release ``y`` (the perturbed data vector; everything computed from it afterwards is
post-processing, so it is the strongest view) and tests the statistic that is optimal for the honest mechanism:
the log-likelihood ratio of ``D`` against ``D'`` at the honest noise scale, ``sum_i |y_i - x'_i| - |y_i - x_i|``
for Laplace noise and the projection ``<y, x - x'>`` for Gaussian noise. Threshold events on it give a
Clopper-Pearson lower bound (:func:`cvxdp.audits.release.empirical_epsilon`); a bound above the claim refutes it.
``release`` is the code path under audit (default: the mechanism's own :meth:`~cvxdp.privacy.InputPerturbation.perturb`;
a template passes its own, e.g. the power template's perturbed loads), so a mutation of that path is what the audit
sees.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import check_int, fail
from ..privacy import InputPerturbation
from .release import AuditResult, empirical_epsilon

__all__ = ["audit_input_perturbation"]

#: ``release(values, rng) -> noisy values``: one perturbed release of a data vector
Release = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def audit_input_perturbation(mechanism: InputPerturbation, values: np.ndarray, values_prime: np.ndarray, *,
                             l1: float, l2: float, release: Release | None = None, trials: int = 50_000,
                             seed: int = 0, alpha: float = 0.05) -> AuditResult:
    """Empirical epsilon of one input-perturbation release on neighbouring vectors ``values`` / ``values_prime``.

    Parameters
    ----------
    mechanism : InputPerturbation
        The mechanism whose claim (epsilon, delta) is audited.
    values, values_prime : ndarray
        Neighbouring data vectors (their difference within the declared sensitivity ``l1`` / ``l2``).
    l1, l2 : float
        The declared sensitivities (the honest noise scale of the statistic comes from them).
    release : callable(values, rng) -> ndarray, optional
        The release under audit; default ``mechanism.perturb(values, l1=l1, l2=l2, rng=rng)[0]``.
    trials : int
        Releases drawn on each side.
    seed : int
        Seed of the audit's generator.
    alpha : float
        Failure probability of the lower bound.

    Returns
    -------
    AuditResult
        ``claimed`` is the mechanism's epsilon; ``details`` names the statistic, the sensitivities and the scale.
    """
    n = check_int(trials, "trials", "audit_input_perturbation", 1)
    x, xp = np.asarray(values, dtype=float), np.asarray(values_prime, dtype=float)
    if x.shape != xp.shape or x.ndim != 1:
        raise fail("values_prime", "audit_input_perturbation", f"a 1-D vector of the shape of values {x.shape}",
                   f"shape {xp.shape}")
    if release is None:
        def release(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return mechanism.perturb(v, l1=l1, l2=l2, rng=rng)[0]
    diff = x - xp

    def statistic(y: np.ndarray) -> float:
        # rounded: the Laplace ratio has atoms (at +-||x - x'||_1) that rounding errors would split into events
        if mechanism.noise == "laplace":
            return round(float(np.sum(np.abs(y - xp) - np.abs(y - x))), 12)
        return round(float(y @ diff), 12)

    def sampler(v: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
        return lambda rng, k: np.array([statistic(np.asarray(release(v, rng), dtype=float)) for _ in range(k)])

    delta = 0.0 if mechanism.noise == "laplace" else float(mechanism.delta)
    res = empirical_epsilon(sampler(x), sampler(xp), trials=n, delta=delta, alpha=alpha,
                            rng=np.random.default_rng(seed), claimed=mechanism.epsilon)
    details = {"mechanism": mechanism.name, "statistic": "log-likelihood ratio" if mechanism.noise == "laplace"
               else "projection on x - x'", "l1": float(l1), "l2": float(l2), "scale": mechanism.scale(l1, l2),
               "seed": seed}
    return AuditResult(res.epsilon_lower, res.claimed, res.best_threshold, res.counts, res.trials, res.delta,
                       res.alpha, statistic="output", details=details)
