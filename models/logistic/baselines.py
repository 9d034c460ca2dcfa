"""Non-private references: the centralized constrained optimum, and scikit-learn on pooled / one agent's data.

- :func:`central_reference` — ``min sum_p f_p s.t. W`` on the pooled data, through CVXPY (Clarabel) or, for data
  sets too large for an interior-point method, an accelerated projected gradient (FISTA with adaptive
  restart) on the hand-coded gradient; both are exact up to their tolerance.
- :func:`pooled_baseline`, :func:`single_agent_baseline` — scikit-learn's ``LogisticRegression`` (unconstrained,
  l2-penalised); they bracket the federated model: what a server with all the data would get, and what an
  agent gets on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

__all__ = ["central_reference", "fista_box", "fit_logreg", "pooled_baseline", "single_agent_baseline"]

# Above this many exponential cones (samples x classes) "auto" uses FISTA instead of Clarabel.
CLARABEL_MAX_CONES = 20_000


def fista_box(value: Callable[[np.ndarray], float], grad: Callable[[np.ndarray], np.ndarray], x0: np.ndarray,
              lo: float, hi: float, lipschitz: float, *, tol: float = 1e-9, max_iter: int = 100_000,
              check_every: int = 10) -> tuple[np.ndarray, float, int, str]:
    """Minimise a smooth convex function over the box ``[lo, hi]^n`` by FISTA with adaptive restart.

    Parameters
    ----------
    value, grad : callable
        ``f(x)`` and ``grad f(x)``.
    x0 : ndarray
    lo, hi : float
        Box bounds (may be infinite).
    lipschitz : float
        Lipschitz constant of the gradient (the step is ``1 / lipschitz``).
    tol : float
        Stop when the gradient mapping ``L ||x - clip(x - grad/L)||_inf`` falls below ``tol`` (checked every
        ``check_every`` iterations).
    max_iter : int

    Returns
    -------
    x, f(x), iterations, status ("optimal" or "max_iter")
    """
    step = 1.0 / lipschitz
    x = np.clip(x0, lo, hi)
    fx = value(x)
    y, t = x.copy(), 1.0
    for k in range(1, max_iter + 1):
        x_new = np.clip(y - step * grad(y), lo, hi)
        f_new = value(x_new)
        if f_new > fx and t > 1.0:  # function-value restart (O'Donoghue & Candes 2015)
            y, t = x.copy(), 1.0  # (with t = 1, y = x: a plain projected-gradient step, accepted)
            continue
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = x_new + ((t - 1.0) / t_new) * (x_new - x)
        x, fx, t = x_new, f_new, t_new
        if k % check_every == 0 and lipschitz * np.max(np.abs(x - np.clip(x - step * grad(x), lo, hi))) <= tol:
            return x, float(fx), k, "optimal"
    return x, float(fx), max_iter, "max_iter"


def central_reference(pooled: Any, *, solver: str = "auto", tol: float = 1e-9) -> dict[str, Any]:
    """Centralized constrained optimum of the pooled model (a ``MulticlassLogistic`` / ``BinaryLogistic``
    built with ``.pooled(models)``, whose value is ``sum_p f_p``).

    Parameters
    ----------
    pooled : model with ``constant_problem()``, ``value``, ``gradient``, ``box``, ``lipschitz``
    solver : {"auto", "CLARABEL", "ECOS", "SCS", "FISTA"}
        "auto": Clarabel through CVXPY up to :data:`CLARABEL_MAX_CONES` samples x classes, FISTA above.
    tol : float
        FISTA's gradient-mapping tolerance.

    Returns
    -------
    dict
        ``objective``, ``solver``, ``status``, ``time_s``, ``solution`` (flat, column-major).
    """
    classes = getattr(pooled, "classes", 1)
    if solver == "auto":
        solver = "CLARABEL" if len(pooled.X) * classes <= CLARABEL_MAX_CONES else "FISTA"
    t0 = time.perf_counter()
    if solver == "FISTA":
        lo, hi = pooled.box
        size = int(np.prod(pooled.shape))

        x, fx, iters, status = fista_box(pooled.value, pooled.gradient, np.zeros(size), lo, hi, pooled.lipschitz,
                                         tol=tol)
        return {"objective": fx, "solver": "FISTA", "status": status, "iterations": iters,
                "time_s": time.perf_counter() - t0, "solution": x}
    prob, var = pooled.constant_problem()
    prob.solve(solver=solver)
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
