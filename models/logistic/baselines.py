"""Non-private references: the centralized constrained optimum, and scikit-learn on pooled / one agent's data.

- :func:`central_reference` — ``min sum_p f_p s.t. W`` on the pooled data, through CVXPY (Clarabel) or, for data
  sets too large for an interior-point method, SciPy's L-BFGS-B on the hand-coded gradient (the model's
  feasible set is a box); both are exact up to their tolerance.
- :func:`pooled_baseline`, :func:`single_agent_baseline` — scikit-learn's ``LogisticRegression`` (unconstrained,
  l2-penalised); they bracket the federated model: what a server with all the data would get, and what an
  agent gets on its own.
- :func:`central_private_anchor` — a *private* model on the pooled data (DP-SGD: Poisson-subsampled, per-example
  clipped, projected noisy gradient steps accounted with dp-accounting), the anchor that says what distribution
  costs at the same total budget. (diffprivlib's ``LogisticRegression`` was the first choice; its 0.6.6, the
  index's newest, fails to import with scikit-learn 1.9 — ``sklearn.tree._tree.DOUBLE`` is gone.)
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy.optimize import Bounds, minimize
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

import cvxdp

__all__ = ["central_private_anchor", "central_reference", "fit_logreg", "lbfgsb_box", "pooled_baseline",
           "single_agent_baseline"]

# Above this many exponential cones (samples x classes) "auto" uses L-BFGS-B instead of Clarabel.
CLARABEL_MAX_CONES = 20_000


def lbfgsb_box(value: Callable[[np.ndarray], float], grad: Callable[[np.ndarray], np.ndarray], x0: np.ndarray,
               lo: float, hi: float, *, tol: float = 1e-9, max_iter: int = 50_000, restarts: int = 10,
               time_limit: float | None = None) -> tuple[np.ndarray, float, int, str]:
    """Minimise a smooth convex function over the box ``[lo, hi]^n`` with SciPy's L-BFGS-B.

    Parameters
    ----------
    value, grad : callable
        ``f(x)`` and ``grad f(x)``.
    x0 : ndarray
    lo, hi : float
        Box bounds (may be infinite).
    tol : float
        Stop when the projected gradient's largest entry falls below ``tol`` (L-BFGS-B's ``gtol``); the relative
        decrease test is switched off, so the answer is as accurate as asked.
    max_iter : int
        Iterations over all starts.
    restarts : int
        L-BFGS-B stops early when its line search stalls on an ill-conditioned problem (a box with few samples per
        parameter); it starts again from where it stopped, with a fresh curvature memory, up to this many times
        while the objective still decreases.
    time_limit : float, optional
        Seconds (wall clock) the whole solve may take: checked after every iteration, so it stops within one
        iteration of the limit with the current iterate (in the box). None: no limit.

    Returns
    -------
    x, f(x), iterations, status ("optimal"; "time limit (T s): projected gradient G > tol" when the limit stopped it
    short; else "inaccurate: " and L-BFGS-B's message)
    """
    start = time.perf_counter()
    n = int(np.size(x0))
    bounds = Bounds(np.full(n, lo), np.full(n, hi))
    options = {"gtol": tol, "ftol": 0.0, "maxiter": max_iter, "maxfun": 2 * max_iter, "maxcor": 20}
    x, iterations, fx, message = np.clip(np.asarray(x0, dtype=float), lo, hi), 0, math.inf, ""
    timed_out = False

    def deadline(intermediate_result: Any) -> None:  # SciPy ends the solve, keeping the iterate, on StopIteration
        nonlocal timed_out
        if time_limit is not None and time.perf_counter() - start > time_limit:
            timed_out = True
            raise StopIteration

    for _ in range(restarts + 1):  # a fresh start drops a curvature memory that stalls the line search
        res = minimize(value, x, jac=grad, method="L-BFGS-B", bounds=bounds, options=options, callback=deadline)
        x, iterations, message = res.x, iterations + int(res.nit), str(res.message)  # L-BFGS-B stays in the box
        pg = float(np.max(np.abs(x - np.clip(x - grad(x), lo, hi)))) if n else 0.0  # the projected gradient
        improved, fx = float(res.fun) < fx, min(fx, float(res.fun))
        if pg <= tol or not improved or iterations >= max_iter or timed_out:
            break
    if pg <= tol:
        status = "optimal"
    elif timed_out:
        status = f"time limit ({time_limit:g} s): projected gradient {pg:.3g} > tol {tol:g}"
    else:
        status = f"inaccurate: {message}"
    return x, float(res.fun), iterations, status  # f at res.x (in the box)


def central_reference(pooled: Any, *, solver: str = "auto", tol: float = 1e-9, time_limit: float = 300.0,
                      progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Centralized constrained optimum of the pooled model (a ``MulticlassLogistic`` / ``BinaryLogistic``
    built with ``.pooled(models)``, whose value is ``sum_p f_p``).

    Parameters
    ----------
    pooled : model with ``constant_problem()``, ``value``, ``gradient``, ``box``, ``lipschitz``
    solver : {"auto", "CLARABEL", "ECOS", "SCS", "L-BFGS-B"}
        "auto": Clarabel through CVXPY up to :data:`CLARABEL_MAX_CONES` samples x classes, L-BFGS-B above.
    tol : float
        L-BFGS-B's tolerance on the projected gradient.
    time_limit : float
        Seconds the solve may take: L-BFGS-B stops at it with its current iterate (the status says so); a conic
        solver runs under :func:`cvxdp.solve_with_fallback` (each solver of the chain capped at it, a fallback
        announced).
    progress : callable(str), optional
        Receives one line per step.

    Returns
    -------
    dict
        ``objective``, ``solver``, ``status``, ``time_s``, ``solution`` (flat, column-major).
    """
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise ValueError(f"The 'time_limit' parameter of central_reference must be a float in (0, inf). "
                         f"Got {time_limit!r} instead.")
    classes = getattr(pooled, "classes", 1)
    if solver == "auto":
        solver = "CLARABEL" if len(pooled.X) * classes <= CLARABEL_MAX_CONES else "L-BFGS-B"
    t0 = time.perf_counter()
    if solver == "L-BFGS-B":
        lo, hi = pooled.box
        size = int(np.prod(pooled.shape))
        if progress is not None:
            progress(f"the centralized solve: L-BFGS-B to a projected gradient of {tol:g} ({time_limit:g} s)")
        with threadpool_limits(limits=1, user_api="blas"):  # see cvxdp.run.loop.one_blas_thread
            x, fx, iters, status = lbfgsb_box(pooled.value, pooled.gradient, np.zeros(size), lo, hi, tol=tol,
                                              time_limit=time_limit)
        if progress is not None:
            progress(f"the centralized solve: L-BFGS-B status {status!r} after {time.perf_counter() - t0:.1f} s")
        return {"objective": fx, "solver": solver, "status": status, "iterations": iters,
                "time_s": time.perf_counter() - t0, "solution": x}
    prob, var = pooled.constant_problem()
    solver = cvxdp.solve_with_fallback(prob, solver, time_limit=float(time_limit), progress=progress)
    u = np.clip(np.ravel(var.value, order="F"), *pooled.box)
    return {"objective": pooled.value(u), "solver": solver, "status": prob.status,
            "time_s": time.perf_counter() - t0, "solution": u}


def fit_logreg(X: np.ndarray, y: np.ndarray, *, C: float = 1.0, fit_intercept: bool = False,
               max_iter: int = 1000) -> LogisticRegression:
    """Fit an l2-penalised (multinomial when > 2 classes) logistic regression with lbfgs."""
    return LogisticRegression(C=C, fit_intercept=fit_intercept, max_iter=max_iter).fit(X, y)


def _errors(clf: LogisticRegression, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray,
            y_test: np.ndarray) -> dict[str, float]:
    out = {"train_error": float(np.mean(clf.predict(X_train) != y_train))}
    out["test_error"] = float(np.mean(clf.predict(X_test) != y_test)) if len(y_test) else float("nan")
    return out


def pooled_baseline(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, *,
                    C: float = 1.0, fit_intercept: bool = False) -> dict[str, float]:
    """Train on all training data pooled; return ``train_error``, ``test_error``, ``time_s``."""
    t0 = time.perf_counter()
    clf = fit_logreg(X_train, y_train, C=C, fit_intercept=fit_intercept)
    return {**_errors(clf, X_train, y_train, X_test, y_test), "time_s": time.perf_counter() - t0}


def single_agent_baseline(parts: Sequence[tuple[np.ndarray, np.ndarray]], X_test: np.ndarray,
                          y_test: np.ndarray, *, agent: int = 0, C: float = 1.0,
                          fit_intercept: bool = False) -> dict[str, float]:
    """Train on one agent's data alone (``parts[agent]``); errors on that agent's data and the test set.

    An agent that holds a single class cannot fit a classifier; it then predicts that class.
    """
    X, y = parts[agent]
    t0 = time.perf_counter()
    if len(np.unique(y)) < 2:
        pred_test = np.full(len(y_test), y[0])
        return {"train_error": 0.0, "test_error": float(np.mean(pred_test != y_test)) if len(y_test) else
                float("nan"), "time_s": time.perf_counter() - t0}
    clf = fit_logreg(X, y, C=C, fit_intercept=fit_intercept)
    return {**_errors(clf, X, y, X_test, y_test), "time_s": time.perf_counter() - t0}


def central_private_anchor(pooled: Any, X_test: np.ndarray, y_test: np.ndarray, *, epsilon: float, delta: float,
                           steps: int = 200, sampling_rate: float = 0.05, clip_norm: float = 1.0, lr: float = 1.0,
                           seed: int | None = None, accountant: str = "pld", noise_scale: float = 1.0
                           ) -> dict[str, Any]:
    """A centralized private anchor: DP-SGD on the pooled training data at a total ``(epsilon, delta)``.

    What a trusted curator holding every party's data could release at the same total budget, with the same
    features, model, box ``W`` and neighbouring relation as the federated run, so a study can say what
    distribution costs. ``steps`` projected stochastic gradient steps
    ``theta <- Proj_W(theta - lr (g_B + xi))``, ``g_B = (1/(q N)) sum_{i in B} clip(grad l_i(theta), C)`` on a
    Poisson sample ``B`` (each record in independently with probability ``q``), ``xi ~ N(0, sigma^2 I)``.

    Neighbouring relation: add/remove one record of the pooled data (``N`` the public normaliser, fixed).
    Sensitivity of ``g_B``: ``C / (q N)`` in l2. Each step is ``PoissonSampledDpEvent(q, GaussianDpEvent(m))``
    with ``m = sigma q N / C``, calibrated (``cvxdp.ObjectivePerturbation(..., calibrate="total", sampling_rate=q)``,
    the federated runs' own calibration) so that ``steps`` of them meet ``(epsilon, delta)`` under ``accountant``;
    the released model is the last iterate (post-processing).
    The hyperparameters (``steps``, ``q``, ``C``, ``lr``) are fixed in advance, not tuned on the data.

    Parameters
    ----------
    pooled : MulticlassLogistic
        The pooled model (``MulticlassLogistic.pooled(models)``: its ``total`` is the public ``N``).
    X_test, y_test : test data
    epsilon, delta : float
        The total budget of the whole run.
    steps, sampling_rate, clip_norm, lr : the DP-SGD schedule (public)
    seed : int, optional
        Seed of the sample and noise generator (research reproducibility; None: fresh OS entropy).
    accountant : {"rdp", "pld"}
    noise_scale : float
        Multiplies the calibrated noise (>= 1). ``sqrt(P)`` gives the noise that the sum of ``P`` parties'
        independently noised gradients carries at the same per-party budget (what a federated average pays
        without secure aggregation): a diagnostic, private at the smaller ``epsilon`` it returns.

    Returns
    -------
    dict
        ``test_error``, ``train_error``, ``train_cost`` (the pooled objective, ``sum_p f_p``), ``epsilon`` (with
        ``noise_scale`` > 1 the smaller total it spends),
        ``delta``, ``noise_multiplier``, ``sampling_rate``, ``steps``, ``method`` ("dp-sgd"), ``time_s``, ``event``
        (the dp-accounting event of one step, composed ``steps`` times) and ``solution`` (the released flat theta).
    """
    t0 = time.perf_counter()
    q, C = float(sampling_rate), float(clip_norm)
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=epsilon, delta=delta, calibrate="total", sampling_rate=q,
                                       clip_norm=C)
    per_example = pooled.per_example()
    public = SimpleNamespace(name="central", per_example=per_example.public())  # all the calibration reads
    plan = mech.noise_plan(public, min_weight=1.0, separable=True, steps=int(steps), accountant=accountant)
    if not (math.isfinite(noise_scale) and noise_scale >= 1.0):
        raise ValueError(f"The 'noise_scale' parameter of central_private_anchor must be a float in [1, inf). "
                         f"Got {noise_scale!r} instead.")
    if noise_scale != 1.0:  # more noise: the same event with a larger multiplier, and the smaller epsilon it has
        plan = dataclasses.replace(plan, scale=plan.scale * noise_scale)  # (its per-step claim stays an upper bound)
        ledger = cvxdp.PrivacyLedger(["central"], target_delta=delta)
        ledger.record("central", plan, int(steps))
        epsilon = ledger.worst_epsilon("pld")
    rng = np.random.default_rng(seed)
    lo, hi = pooled.box
    theta = np.zeros(int(np.prod(pooled.shape)))
    with threadpool_limits(limits=1, user_api="blas"):  # small products: one thread (cvxdp.run.loop.one_blas_thread)
        for _ in range(int(steps)):  # the Poisson sample and the noise from one generator, never reseeded
            g = per_example.gradient(theta, rng, q, C)
            theta = np.clip(theta - lr * plan.perturb(rng, g), lo, hi)
    test = float(np.mean(pooled.predict(theta, X_test) != y_test)) if len(y_test) else math.nan
    return {"test_error": test, "train_error": float(np.mean(pooled.predict(theta, pooled.X) != pooled.y)),
            "train_cost": float(pooled.value(theta)), "epsilon": float(epsilon), "delta": float(delta),
            "noise_multiplier": plan.noise_multiplier, "sampling_rate": q, "steps": int(steps), "method": "dp-sgd",
            "time_s": time.perf_counter() - t0, "event": plan.dp_event(), "solution": theta}
