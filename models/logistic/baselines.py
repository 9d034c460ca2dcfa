"""Non-private references with scikit-learn's ``LogisticRegression``: pooled data and one agent alone.

Neither baseline is constrained (scikit-learn has no box); they bracket the federated model: the pooled fit
is what a central server with all the data would get, the one-agent fit what an agent gets on its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression

__all__ = ["fit_logreg", "pooled_baseline", "single_agent_baseline"]


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
