"""Statistical audits of the Gamma-norm mechanism (penalty perturbation, MR-ADMM; SPEC §3-§4).

:func:`audit_gamma_mechanism` audits one PP primal update in closed form; :func:`audit_penalty_perturbation`
audits the first iteration of M-ADMM / MR-ADMM through :func:`cvxdp.solve` against the run's own ledger. Each
has broken twins the audit must catch. They sit above the mechanism (:mod:`cvxdp.families.graph.mechanism`) and the
generic audit machinery (:mod:`cvxdp.audits.statistics`), which never import them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import check_choice, check_float, check_int
from ..families.graph import (
    MADMM,
    MRADMM,
    ERMConstants,
    PenaltyPerturbation,
    attach_erm_constants,
    inexact_solve_note,
    madmm_step_epsilon,
    sample_gamma_norm,
)
from ..families.solve import solve
from ..model import Agent, SmoothObjective
from .statistics import empirical_epsilon, two_statistics

__all__ = ["AUDIT_BROKEN", "AUDIT_LOSSES", "AUDIT_SOLVE_BROKEN", "audit_gamma_mechanism", "audit_penalty_perturbation"]


AUDIT_BROKEN = ("none", "double-alpha", "unscaled")


def audit_gamma_mechanism(alpha: float = 2.0, *, dim: int = 1, C: float = 1.0, B: int = 10, eta: float = 0.5,
                          degree: int = 2, reg: float = 0.1, trials: int = 200_000, seed: int = 0,
                          broken: str | None = None, alpha_level: float = 0.05):
    """Audit one PP primal update (eq. 24-25) with the Gamma-norm noise against its claimed epsilon.

    Node i with ``V = degree`` neighbours solves
    ``argmin_f O(f, D) + 2 lambda^T f + eta sum_j ||f + eps - m_j||^2`` with the ERM of linear loss
    ``L(z) = -z`` (``|L'| = 1``, ``L'' = 0``, so ``c1 = 0`` and the Jacobian is data-free), i.e.
    ``O(f, D) = -C/B sum_n y_n x_n^T f + reg/2 ||f||^2``; the update has the closed form
    ``f = (C/B sum y x - 2 lambda + eta sum_j (f_i + f_j) - 2 eta V eps) / (reg + 2 eta V)``.
    D and D' differ in one sample: ``(x, y) = (e_1, +1)`` is replaced by ``(e_1, -1)``, which moves
    grad O by exactly the sensitivity ``2C/B``, so the claim of eq. (26) (``C alpha / (eta V B)`` with c1 = 0)
    is tight. The statistic is the first coordinate of the released f (post-processing).

    The noise is drawn by :func:`sample_gamma_norm` (the sampler the algorithms use) and the claim is
    :func:`madmm_step_epsilon` (what the ledger records). Broken twins: ``"double-alpha"`` draws the noise
    with ``2 alpha`` (half the noise) but claims ``alpha``; ``"unscaled"`` forgets the ``2 eta V`` factor of
    the penalty perturbation (adds ``eps^T f``), which leaks more whenever ``2 eta V > 1``.

    Returns
    -------
    cvxdp.audits.release.AuditResult
        From :func:`cvxdp.audits.release.empirical_epsilon`; ``violated`` flags a refuted claim.
    """
    owner = "audit_gamma_mechanism"
    a = check_float(alpha, "alpha", owner, 0.0, math.inf)
    d = check_int(dim, "dim", owner, 1)
    n = check_int(trials, "trials", owner, 10)
    b = check_choice("none" if broken is None else broken, "broken", owner, AUDIT_BROKEN)
    V = check_int(degree, "degree", owner, 1)
    claim = madmm_step_epsilon(C, 0.0, a, eta, V, B)
    draw_alpha = 2.0 * a if b == "double-alpha" else a
    scale = 1.0 if b == "unscaled" else 2.0 * eta * V
    rng_data = np.random.default_rng(seed)
    X = rng_data.normal(size=(B - 1, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = rng_data.choice([-1.0, 1.0], size=B - 1)
    lam = rng_data.normal(size=d) * 0.1
    anchor = rng_data.normal(size=d) * 0.1  # eta sum_j (f_i + f_j), public to node i
    e1 = np.zeros(d)
    e1[0] = 1.0
    base = C / B * (y[:, None] * X).sum(axis=0) - 2.0 * lam + anchor

    def release(y1: float) -> Any:
        def sampler(rng: np.random.Generator, m: int) -> np.ndarray:
            lin = base + C / B * y1 * e1
            out = np.empty(m)
            for k in range(m):
                eps = sample_gamma_norm(rng, draw_alpha, d)
                out[k] = (lin[0] - scale * eps[0]) / (reg + 2.0 * eta * V)
            return out
        return sampler

    return empirical_epsilon(release(1.0), release(-1.0), trials=n, alpha=alpha_level,
                             rng=np.random.default_rng([seed, 1]), claimed=claim)




AUDIT_SOLVE_BROKEN = ("none", "overclaimed-B", "reused-seed")


AUDIT_LOSSES = ("logistic", "linear")


def audit_penalty_perturbation(algorithm: str = "madmm", *, alpha: float = 1.0, C: float = 1.0, B: int = 4,
                               reg: float = 0.1, eta: float = 0.5, nodes: int = 2_000, seed: int = 0,
                               broken: str | None = None, level: float = 0.05, loss: str = "logistic") -> Any:
    """Audit penalty perturbation (PP / MR-ADMM) through :func:`cvxdp.solve`, against the run's own ledger.

    ``nodes`` one-dimensional logistic-ERM nodes on a ring, each a replica: node i holds ``B`` samples
    ``x = 1`` with labels ``+1`` except the first, ``+1`` in D and ``-1`` in D' (replace one sample, which
    moves grad O by the full ``2C/B``). The first iteration of M-ADMM (PP) or MR-ADMM (an odd, perturbed
    iteration) starts from ``f(0) = 0`` and ``lambda(0) = 0``, so node i's release ``f_i(1)`` depends only
    on its own data and its own noise: the replicas are independent. Three runs (D, D', a reference on D,
    distinct seeds) each release all nodes' ``f_i(1)``; the claim is the ledger's per-node epsilon (the
    summand of bound (26) or (32)), tested with the output and the output-minus-reference statistics (each
    at ``level / 2``, Clopper-Pearson, Bonferroni over thresholds). The run's local solves are inexact
    (Newton to its stationarity tolerance), so this audits the guarantee as the code computes it.

    ``loss="linear"``: the ERM loss ``L(z) = -z`` instead (``|L'| = 1``, ``L'' = 0``, declared ``c1 = 0``), so
    replacing the label moves the gradient by exactly ``2C/B`` at every f and the local solve is exact (a quadratic):
    the release is Laplace-like with exactly the claimed epsilon ``C alpha / (eta V B)`` (M-ADMM; MR-ADMM
    ``2 C alpha / B``). The logistic loss moves its gradient by at most ``C/B`` in one dimension, half the bound's
    ``2C/B``, so it can only refute claims that are at least twice too small; the linear loss is tight and catches a
    mechanism whose noise is half what it claims (tests/audits/test_mutations.py).

    Broken twins: ``"overclaimed-B"`` declares ``B_i = 4 B`` in the ERM constants (the ledger claims a
    quarter of its epsilon; in one dimension the logistic gradient moves by at most ``C/B``, half the
    bound's ``2C/B``, so the release costs about half the honest claim and the twin under-reports it); ``"reused-seed"`` runs D, D' and the reference with one seed.

    Returns
    -------
    cvxdp.audits.release.AuditResult
    """
    import cvxpy as cp

    owner = "audit_penalty_perturbation"
    kind = check_choice(algorithm, "algorithm", owner, ("madmm", "mradmm"))
    b = check_choice("none" if broken is None else broken, "broken", owner, AUDIT_SOLVE_BROKEN)
    n = check_int(nodes, "nodes", owner, 10)
    Bi = check_int(B, "B", owner, 2)
    s = check_int(seed, "seed", owner, 0)
    kind_loss = check_choice(loss, "loss", owner, AUDIT_LOSSES)
    declared = ERMConstants(C=C, B=4 * Bi if b == "overclaimed-B" else Bi, reg=reg,
                            c1=0.25 if kind_loss == "logistic" else 0.0)
    labels = cp.Parameter(Bi, name="y", value=np.ones(Bi))

    def node(i: int) -> Any:
        f = cp.Variable(1, name="f")
        make = _linear_node if kind_loss == "linear" else _logistic_node
        return attach_erm_constants(make(i, f, labels, C, Bi, reg), declared)

    agents = [node(i) for i in range(n)]
    if kind == "madmm":
        algo: Any = MADMM("ring", eta=eta, theta=eta, rounds=1, init_scale=0.0, local_solver="newton")
    else:
        algo = MRADMM("ring", eta=eta, rounds=1, init_scale=0.0, local_solver="newton")
    privacy = PenaltyPerturbation(alpha=alpha)
    seeds = [s] * 3 if b == "reused-seed" else \
        [int(c.generate_state(1)[0]) for c in np.random.SeedSequence(s).spawn(3)]
    outs, claims = [], []
    for first, run_seed in zip((1.0, -1.0, 1.0), seeds):
        y = np.ones(Bi)
        y[0] = first
        labels.value = y
        res = solve(agents, algorithm=algo, privacy=privacy, seed=run_seed)
        outs.append(np.array([res.local[a.name][0] for a in agents]))
        claims.append(res.privacy["worst"]["basic"][0])
    details = {"mechanism": "gamma-norm", "mode": "solve", "algorithm": kind, "broken": b, "nodes": n, "loss": kind_loss,
               "alpha": alpha, "C": C, "B": Bi, "declared_B": declared.B, "eta": eta, "seed": s,
               "run_seeds": seeds, "note": _solve_note(res.privacy)}
    return two_statistics(outs[0], outs[1], outs[2], delta=0.0, alpha=level, claimed=max(claims), seed=s,
                           details=details)


def _solve_note(privacy: dict[str, Any]) -> str:
    """The run's own note on its inexact local solves (with the tolerance it used), from its ledger's summary."""
    prefix = inexact_solve_note([]).split(";")[0]
    return next((n["reason"] for n in privacy.get("notes", []) if n["reason"].startswith(prefix)),
                inexact_solve_note([]))


def _logistic_node(i: int, f: Any, labels: Any, C: float, B: int, reg: float) -> Agent:
    """An audit node with the logistic ERM loss on ``B`` samples ``x = 1``:
    ``O(f) = C/B sum_n log(1 + exp(-y_n f)) + reg/2 f^2``."""
    import cvxpy as cp

    def value(u: np.ndarray) -> float:
        return float(C / B * np.logaddexp(0.0, -labels.value * u[0]).sum() + 0.5 * reg * u[0] ** 2)

    def gradient(u: np.ndarray) -> np.ndarray:
        return np.array([-C / B * float(labels.value @ (1.0 / (1.0 + np.exp(labels.value * u[0]))))
                         + reg * u[0]])

    def hessian(u: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-labels.value * u[0]))
        return np.array([[C / B * float(np.sum(p * (1.0 - p))) + reg]])

    objective = C / B * cp.sum(cp.logistic(-cp.multiply(labels, f[0]))) + 0.5 * reg * cp.sum_squares(f)
    return Agent(f"n{i}", objective, [], shared={"f": f}, value=value,
                 gradient=SmoothObjective(value, gradient, hessian))


def _linear_node(i: int, f: Any, labels: Any, C: float, B: int, reg: float) -> Agent:
    """An audit node with the linear ERM loss ``L(z) = -z`` on ``B`` samples ``x = 1``:
    ``O(f) = -C/B sum_n y_n f + reg/2 f^2`` (its gradient moves by ``2C/B`` when one label flips)."""
    import cvxpy as cp

    def value(u: np.ndarray) -> float:
        return float(-C / B * labels.value.sum() * u[0] + 0.5 * reg * u[0] ** 2)

    def gradient(u: np.ndarray) -> np.ndarray:
        return np.array([-C / B * float(labels.value.sum()) + reg * u[0]])

    def hessian(u: np.ndarray) -> np.ndarray:
        return np.array([[reg]])

    objective = -C / B * cp.sum(labels) * f[0] + 0.5 * reg * cp.sum_squares(f)
    return Agent(f"n{i}", objective, [], shared={"f": f}, value=value,
                 gradient=SmoothObjective(value, gradient, hessian))
