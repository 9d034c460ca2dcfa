"""Vertically partitioned data for ADMM sharing (Hu et al. 2020): loaders, column splits, parties, baselines.

Everything here uses cvxdp's public API only. Nothing downloads: LIBSVM files (a9a, gisette) are read from a
local path; the bundled data sets are scikit-learn's ``breast_cancer`` and ``digits`` (as a binary task).

Splits are column ranges. The paper's: a9a 66 + 57 features, gisette 2000 + 2000 + 1000 (:data:`PAPER_SPLITS`);
the bundled defaults: breast_cancer 15 + 15, digits 32 + 32 (top and bottom half of the 8 x 8 image).
Party 1 (index 0) holds the labels and hosts the centre, as in the paper's experiments ("the local party
who wishes to improve its prediction model").

Template ``vertical`` (``[case] template = "vertical"``), ``[model]`` keys (defaults in :data:`DEFAULTS`):

=================  =====================================================================================
dataset            "breast_cancer" | "digits" (bundled) | "libsvm" (local file, e.g. a9a, gisette)
path, test_path    LIBSVM training / test file, relative to the case file
n_features         LIBSVM: the number of features (a9a: 123; its test file lacks the last one)
blocks             list of column counts ([66, 57]), list of [start, stop) ranges, or a name:
                   "a9a", "gisette", "halves" or "auto" (the paper's split when the feature count is
                   123 or 5000, else the bundled default or two halves)
normalize          "party": every row of every block rescaled to l2 norm 1 (Assumption 1.3, default);
                   "sample": whole rows to norm 1 (blocks then have norm <= 1; it mixes parties' features,
                   so a private run is refused: :data:`SAMPLE_REFUSAL`); "none"
bound              radius b of each party's ball ||x_m|| <= b (Assumption 1.1)
test_fraction      held-out share when there is no test file
max_samples        keep a random subset of the training samples
digits_positive    digits labelled +1 in the binary digits task (default 5-9)
data_seed          seed of the subsample and the test split
lam                regularisation of the references (central optimum, scikit-learn baselines) when no
                   run result says otherwise; keep it equal to [algorithm] lam
=================  =====================================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cvxdp
from cvxdp.errors import ConfigError

from .base import ModelInstance, check_model_keys
from .logistic.data import BREAST_CANCER_SCALE, public_scale

__all__ = [
    "BUNDLED_SPLITS", "DEFAULTS", "PAPER_SPLITS", "SAMPLE_REFUSAL", "VerticalData", "build", "central_optimum", "column_blocks",
    "load_libsvm", "load_vertical", "make_parties", "make_vertical_data", "normalize_blocks", "sklearn_baseline",
    "settings", "synthetic_parties", "vertical_baselines",
]

#: Why a private run refuses ``normalize = "sample"`` (quoted by :meth:`cvxdp.VerticalParty.check_private`).
SAMPLE_REFUSAL = ("the 'normalize' entry of [model] is 'sample': each sample's row of every party's block is divided "
                  "by the norm of the whole row over all parties' features, so one party's data move every other "
                  "party's features and releases and no per-party sensitivity holds (non-private runs only). Use "
                  "normalize = 'party' (each party's rows to norm 1 on its own data, the default) or 'none' with rows "
                  "of norm <= 1 already")

PAPER_SPLITS: dict[str, list[int]] = {"a9a": [66, 57], "gisette": [2000, 2000, 1000]}
BUNDLED_SPLITS: dict[str, list[int]] = {"breast_cancer": [15, 15], "digits": [32, 32]}
DATASETS = ("breast_cancer", "digits", "libsvm")
DEFAULTS: dict[str, Any] = {
    "dataset": "breast_cancer", "path": None, "test_path": None, "blocks": "auto", "normalize": "party",
    "bound": 100.0, "test_fraction": 0.25, "max_samples": None, "digits_positive": [5, 6, 7, 8, 9],
    "data_seed": 0, "lam": 1e-3, "n_features": None,
}


# --------------------------------------------------------------------------- column splits
def column_blocks(n_features: int, blocks: Any, *, dataset: str | None = None) -> list[np.ndarray]:
    """Column indices of every party.

    Parameters
    ----------
    n_features : int
        Total number of features d.
    blocks : list of int, list of [start, stop), list of index lists, or str
        Counts (must sum to d), half-open ranges, explicit index lists (a partition of 0..d-1), or a name:
        "a9a" / "gisette" (the paper's splits), "halves", "auto" (see the module docstring).
    dataset : str, optional
        Used by "auto" to pick the bundled default split.

    Returns
    -------
    list of int arrays, one per party, partitioning ``range(n_features)``.
    """
    if isinstance(blocks, str):
        if blocks == "auto":
            if n_features == 123:
                blocks = PAPER_SPLITS["a9a"]
            elif n_features == 5000:
                blocks = PAPER_SPLITS["gisette"]
            elif dataset in BUNDLED_SPLITS and sum(BUNDLED_SPLITS[dataset]) == n_features:
                blocks = BUNDLED_SPLITS[dataset]
            else:
                blocks = "halves"
        if blocks == "halves":
            blocks = [n_features - n_features // 2, n_features // 2]
        elif isinstance(blocks, str) and blocks in PAPER_SPLITS:
            blocks = PAPER_SPLITS[blocks]
        elif isinstance(blocks, str):
            raise ConfigError(f"The 'blocks' entry must be a list or one of 'auto', 'halves', "
                              f"{', '.join(map(repr, PAPER_SPLITS))}. Got {blocks!r} instead.")
    if not isinstance(blocks, (list, tuple)) or not blocks:
        raise ConfigError(f"The 'blocks' entry must be a non-empty list. Got {blocks!r} instead.")
    if all(isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in blocks):
        if any(b < 1 for b in blocks) or sum(blocks) != n_features:
            raise ConfigError(f"The column counts {list(blocks)} must be positive and sum to the {n_features} "
                              "features of the data.")
        edges = np.cumsum([0] + list(blocks))
        return [np.arange(a, b) for a, b in zip(edges[:-1], edges[1:])]
    out = []
    for b in blocks:  # a 2-element list is a [start, stop) range; anything else a list of column indices
        if isinstance(b, (list, tuple)) and len(b) == 2 and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in b):
            out.append(np.arange(int(b[0]), int(b[1])))
        else:
            out.append(np.asarray(b, dtype=int).ravel())
    cols = np.concatenate(out) if out else np.zeros(0, dtype=int)
    if any(len(o) == 0 for o in out) or len(np.unique(cols)) != len(cols) or \
            not np.array_equal(np.sort(cols), np.arange(n_features)):
        raise ConfigError(f"The blocks {blocks!r} must partition the {n_features} feature columns "
                          "(non-empty, disjoint, covering every column).")
    return out


def normalize_blocks(blocks: list[np.ndarray], mode: str = "party") -> list[np.ndarray]:
    """Rescale rows so the privacy analysis applies (Assumption 1.3: each row of ``D_m`` has norm <= 1).

    ``"party"``: every row of every block to l2 norm 1 (zero rows stay zero) - the paper's assumption.
    ``"sample"``: whole rows (all blocks together) to norm 1, so each block's rows have norm <= 1.
    ``"none"``: unchanged.
    """
    if mode == "none":
        return [np.asarray(b, dtype=float) for b in blocks]
    if mode == "party":
        out = []
        for b in blocks:
            b = np.asarray(b, dtype=float)
            n = np.linalg.norm(b, axis=1, keepdims=True)
            out.append(b / np.where(n > 0, n, 1.0))
        return out
    if mode == "sample":
        full = np.hstack(blocks)
        n = np.linalg.norm(full, axis=1, keepdims=True)
        n = np.where(n > 0, n, 1.0)
        return [np.asarray(b, dtype=float) / n for b in blocks]
    raise ConfigError(f"The 'normalize' entry must be one of 'party', 'sample', 'none'. Got {mode!r} instead.")


# --------------------------------------------------------------------------- loaders
def load_libsvm(path: str | Path, *, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A LIBSVM file (``sklearn.datasets.load_svmlight_file``) as dense ``X`` and labels in {-1, +1}.

    Labels: -1/+1 are kept; any other two values map to -1 (smaller) and +1 (larger).
    """
    from .logistic.data import load_libsvm as _load_libsvm

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"LIBSVM file {str(path)!r} does not exist (expected a local text file of "
                                "'label index:value ...' lines, e.g. a9a or gisette_scale from the LIBSVM site).")
    X, y = _load_libsvm(path, n_features=n_features)  # clear errors for malformed, empty, non-finite, bad .gz
    values = np.unique(y)
    if len(values) != 2:
        raise ConfigError(f"LIBSVM file {str(path)!r} has {len(values)} distinct labels; ADMM sharing here is "
                          "binary (logistic) and needs two.")
    return np.asarray(X, dtype=float), np.where(y == values[1], 1.0, -1.0)


def load_vertical(dataset: str = "breast_cancer", *, path: str | Path | None = None,
                  test_path: str | Path | None = None, test_fraction: float = 0.25, data_seed: int = 0,
                  max_samples: int | None = None, digits_positive: list[int] | None = None,
                  n_features: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``X_train, y_train, X_test, y_test`` (labels in {-1, +1}) before the column split.

    ``breast_cancer``: 569 x 30, columns divided by their public maxima
    (:data:`cvxdp_models.logistic.data.BREAST_CANCER_SCALE`, as in the logistic template; values above capped at 1). ``digits``: 1,797 x 64 pixels / 16, label +1 for the
    digits in ``digits_positive`` (default 5-9). ``libsvm``: the file at ``path`` (and ``test_path``).
    Without a test file, a stratified ``test_fraction`` is held out (seed ``data_seed``).
    """
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(data_seed)
    X_test = y_test = None
    if dataset == "breast_cancer":
        d = datasets.load_breast_cancer()  # public column maxima (issue 36: not the maxima of the samples)
        X, y = public_scale(d.data.astype(float), BREAST_CANCER_SCALE), np.where(d.target == 1, 1.0, -1.0)
    elif dataset == "digits":
        d = datasets.load_digits()
        pos = [5, 6, 7, 8, 9] if digits_positive is None else list(digits_positive)
        X, y = d.data / 16.0, np.where(np.isin(d.target, pos), 1.0, -1.0)
    elif dataset == "libsvm":
        if path is None:
            raise ConfigError("dataset = 'libsvm' needs a local 'path' to the training file.")
        X, y = load_libsvm(path, n_features=n_features)
        if test_path is not None:
            X_test, y_test = load_libsvm(test_path, n_features=X.shape[1])
    else:
        raise ConfigError(f"The 'dataset' entry must be one of {', '.join(map(repr, DATASETS))}. "
                          f"Got {dataset!r} instead.")
    if max_samples is not None and max_samples < len(y):
        keep = np.sort(rng.choice(len(y), int(max_samples), replace=False))
        X, y = X[keep], y[keep]
    if X_test is None:
        if test_fraction > 0:
            X, X_test, y, y_test = train_test_split(X, y, test_size=test_fraction, random_state=data_seed,
                                                    stratify=y)
        else:
            X_test, y_test = X[:0], y[:0]
    return X, y, X_test, y_test


@dataclass
class VerticalData:
    """Training and test blocks of every party, the labels and where the columns came from."""

    train: list[np.ndarray]
    test: list[np.ndarray]
    y_train: np.ndarray
    y_test: np.ndarray
    columns: list[np.ndarray]
    names: list[str]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def X_train(self) -> np.ndarray:
        return np.hstack(self.train)

    @property
    def X_test(self) -> np.ndarray:
        return np.hstack(self.test)

    @property
    def n_samples(self) -> int:
        return int(len(self.y_train))


def make_vertical_data(dataset: str = "breast_cancer", *, blocks: Any = "auto", normalize: str = "party",
                       names: list[str] | None = None, **load_options: Any) -> VerticalData:
    """Load a data set, split its columns over parties and normalise the blocks (see :func:`load_vertical`)."""
    X, y, X_test, y_test = load_vertical(dataset, **load_options)
    cols = column_blocks(X.shape[1], blocks, dataset=dataset)
    train = normalize_blocks([X[:, c] for c in cols], normalize)
    test = normalize_blocks([X_test[:, c] for c in cols], normalize) if len(y_test) else [X_test[:, c] for c in cols]
    names = names or [f"party{i + 1}" for i in range(len(cols))]
    if len(names) != len(cols):
        raise ConfigError(f"{len(names)} party names for {len(cols)} blocks.")
    info = {"dataset": dataset, "n_train": int(len(y)), "n_test": int(len(y_test)), "features": int(X.shape[1]),
            "blocks": [int(len(c)) for c in cols], "normalize": normalize}
    return VerticalData(train, test, y, y_test, cols, names, info)


def make_parties(data: VerticalData, *, bound: float | None = None, label_party: int = 0) -> list[cvxdp.VerticalParty]:
    """One :class:`cvxdp.VerticalParty` per block; party ``label_party`` holds the (test) labels.

    Blocks normalised with ``normalize = "sample"`` (``data.info["normalize"]``) mix the parties' features: every
    party then carries :data:`SAMPLE_REFUSAL`, so a private run is refused (a non-private one runs as before).
    """
    refusal = SAMPLE_REFUSAL if data.info.get("normalize") == "sample" else None
    parties = []
    for i, (name, D, T) in enumerate(zip(data.names, data.train, data.test)):
        holder = i == label_party
        parties.append(cvxdp.VerticalParty(
            name, D, bound=bound, test_features=T if len(data.y_test) else None,
            labels=data.y_train if holder else None,
            test_labels=data.y_test if holder and len(data.y_test) else None, refusal=refusal))
    return parties


# --------------------------------------------------------------------------- references
def synthetic_parties(samples: int = 8, features: int = 2, parties: int = 2, *, seed: int = 0,
                      bound: float = 1.0) -> tuple[list[cvxdp.VerticalParty], np.ndarray]:
    """A small Gaussian instance for audits and regression runs: ``parties`` blocks of ``features`` columns.

    Each party's rows are normalised to unit norm (Assumption 1's normalised rows); labels are random +-1.
    Returns the parties (ball radius ``bound``) and the labels.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, parties * features))
    blocks = [x[:, m * features:(m + 1) * features] for m in range(parties)]
    blocks = [b / np.linalg.norm(b, axis=1, keepdims=True) for b in blocks]
    labels = np.where(rng.random(samples) < 0.5, -1.0, 1.0)
    return [cvxdp.VerticalParty(f"p{m}", b, bound=bound) for m, b in enumerate(blocks)], labels


def _logloss(margin: np.ndarray, y: np.ndarray) -> float:
    from scipy.special import log_expit

    return float(-np.mean(log_expit(y * margin))) if len(y) else math.nan


def sklearn_baseline(X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, lam: float) -> dict:
    """scikit-learn ``LogisticRegression`` with the same model: l2 weight ``lam/2 ||w||^2`` on the mean loss
    (``C = 1 / (N lam)``) and no intercept. Returns test log-loss and error, train objective, coefficients."""
    from sklearn.linear_model import LogisticRegression

    n = len(y)
    clf = LogisticRegression(C=1.0 / (n * lam) if lam > 0 else 1e12, fit_intercept=False, tol=1e-10,
                             max_iter=10_000)
    clf.fit(X, y)
    w = clf.coef_.ravel()
    out = {"train_objective": _logloss(X @ w, y) + 0.5 * lam * float(w @ w), "coef": w}
    if len(y_test):
        m = X_test @ w
        out.update(test_logloss=_logloss(m, y_test), test_error=float(np.mean(np.where(m >= 0, 1.0, -1.0) != y_test)))
    return out


def vertical_baselines(data: VerticalData, lam: float) -> dict[str, dict]:
    """The paper's two references: all features (centralized) and party 1's features only."""
    return {"all_features": sklearn_baseline(data.X_train, data.y_train, data.X_test, data.y_test, lam),
            "party1_only": sklearn_baseline(data.train[0], data.y_train, data.test[0], data.y_test, lam)}


def central_optimum(data: VerticalData, lam: float, *, bound: float | None = None, solver: str = "auto",
                    time_limit: float = 300.0, progress: Any = None) -> dict:
    """``min (1/N) sum_i log(1 + exp(-b_i x^T d_i)) + lam/2 ||x||^2  s.t. ||x_m|| <= bound``.

    "auto": CVXPY with Clarabel up to 20,000 samples, else scipy's L-BFGS-B on the unconstrained problem
    (the bound must then be inactive, which is checked). Returns objective, per-party solution, test log-loss.
    ``time_limit`` (seconds): L-BFGS-B stops at it with its current iterate (the status says so); a conic solver
    runs under :func:`cvxdp.solve_with_fallback`, each solver of its chain capped at it. ``progress`` receives one
    line per step.
    """
    import time

    import cvxpy as cp

    X, y, n = data.X_train, data.y_train, data.n_samples
    start = time.perf_counter()
    if solver == "auto":
        solver = "CLARABEL" if n <= 20_000 else "LBFGS"
    if solver == "LBFGS":
        from scipy.optimize import minimize
        from scipy.special import expit

        def fg(w):
            m = X @ w
            return _logloss(m, y) + 0.5 * lam * w @ w, X.T @ (-y * expit(-y * m)) / n + lam * w

        def deadline(intermediate_result: Any) -> None:  # SciPy ends the solve, keeping the iterate
            if time.perf_counter() - start > time_limit:
                raise StopIteration

        res = minimize(fg, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", callback=deadline,
                       options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20_000})
        w = res.x
        if bound is not None and any(np.linalg.norm(w[c]) > bound for c in data.columns):
            raise ConfigError("central_optimum: the bound is active; use solver='CLARABEL'.")
        status = "optimal" if res.success else \
            f"time limit ({time_limit:g} s)" if time.perf_counter() - start > time_limit else str(res.message)
    else:
        x = cp.Variable(X.shape[1])
        obj = cp.sum(cp.logistic(-cp.multiply(y, X @ x))) / n + 0.5 * lam * cp.sum_squares(x)
        cons = [cp.norm(x[c], 2) <= bound for c in data.columns] if bound is not None else []
        prob = cp.Problem(cp.Minimize(obj), cons)
        solver = cvxdp.solve_with_fallback(prob, solver, time_limit=float(time_limit), progress=progress)
        w, status = np.asarray(x.value).ravel(), prob.status
    value = _logloss(X @ w, y) + 0.5 * lam * float(w @ w)
    return {"objective": value, "solver": solver, "status": status, "time_s": time.perf_counter() - start,
            "solution": {name: w[c] for name, c in zip(data.names, data.columns)},
            "test_logloss": _logloss(data.X_test @ w, data.y_test)}


# --------------------------------------------------------------------------- the template
def _resolve(model: dict) -> dict[str, Any]:
    check_model_keys(model, DEFAULTS, "vertical")
    cfg = {**DEFAULTS, **model}
    if cfg["dataset"] not in DATASETS:
        raise ConfigError(f"The 'dataset' entry of [model] must be one of {', '.join(map(repr, DATASETS))}. "
                          f"Got {cfg['dataset']!r} instead.")
    b = cfg["bound"]
    if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float)) or not (0 < b < math.inf)):
        raise ConfigError(f"The 'bound' entry of [model] must be a float in (0, inf). Got {b!r} instead.")
    lam = cfg["lam"]
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not (0 <= lam < math.inf):
        raise ConfigError(f"The 'lam' entry of [model] must be a float in [0, inf). Got {lam!r} instead.")
    tf = cfg["test_fraction"]
    if isinstance(tf, bool) or not isinstance(tf, (int, float)) or not (0 <= tf < 1):
        raise ConfigError(f"The 'test_fraction' entry of [model] must be a float in [0, 1). Got {tf!r} instead.")
    ds = cfg["data_seed"]
    if isinstance(ds, bool) or not isinstance(ds, int) or ds < 0:
        raise ConfigError(f"The 'data_seed' entry of [model] must be an int in [0, inf). Got {ds!r} instead.")
    return cfg


def settings(model: dict) -> dict[str, Any]:
    """The template's settings hook: the ``[model]`` table checked and resolved (defaults included), without
    loading data; the built instance's ``settings``."""
    return _resolve(dict(model))


def build(model: dict, *, base_dir: Path) -> ModelInstance:
    """Template ``vertical``: parties of a vertically partitioned logistic regression (see module docstring).

    Returns a :class:`ModelInstance` whose ``evaluate(result)`` gives ``test_logloss``, ``test_error``,
    ``train_objective`` and the two scikit-learn baselines' test log-losses, and whose ``central()`` is the
    centralized optimum (:func:`central_optimum`); ``info["data"]`` is the :class:`VerticalData` and
    ``info["baselines"](lam)`` the two baselines (:func:`vertical_baselines`, cached).
    """
    cfg = settings(model)
    base_dir = Path(base_dir)
    path = None if cfg["path"] is None else base_dir / cfg["path"]
    test_path = None if cfg["test_path"] is None else base_dir / cfg["test_path"]
    data = make_vertical_data(cfg["dataset"], blocks=cfg["blocks"], normalize=cfg["normalize"], path=path,
                              test_path=test_path, test_fraction=cfg["test_fraction"], data_seed=cfg["data_seed"],
                              max_samples=cfg["max_samples"], digits_positive=cfg["digits_positive"],
                              n_features=cfg["n_features"])
    parties = make_parties(data, bound=cfg["bound"])
    cache: dict[Any, Any] = {}

    def lam_of(result: Any | None) -> float:
        if result is not None:
            alg = (getattr(result, "config", None) or {}).get("algorithm", {})
            if "lam" in alg:
                return float(alg["lam"])
        return float(cfg["lam"])

    def baselines(lam: float) -> dict[str, dict]:
        if ("baselines", lam) not in cache:
            cache[("baselines", lam)] = vertical_baselines(data, lam)
        return cache[("baselines", lam)]

    def evaluate(result: Any) -> dict[str, float]:
        lam = lam_of(result)
        w = np.concatenate([np.asarray(result.local[n], dtype=float) for n in data.names])  # private: evaluation
        out = {"train_objective": _logloss(data.X_train @ w, data.y_train) + 0.5 * lam * float(w @ w)}
        if len(data.y_test):
            m = data.X_test @ w
            out["test_logloss"] = _logloss(m, data.y_test)
            out["test_error"] = float(np.mean(np.where(m >= 0, 1.0, -1.0) != data.y_test))
            base = baselines(lam)
            out["baseline_all_test_logloss"] = base["all_features"]["test_logloss"]
            out["baseline_party1_test_logloss"] = base["party1_only"]["test_logloss"]
        return out

    def central(lam: float | None = None, solver: str = "auto", time_limit: float = 300.0, progress: Any = None,
                **_: Any) -> dict[str, Any]:
        lam = float(cfg["lam"] if lam is None else lam)
        key = ("central", lam, solver, float(time_limit))
        if key not in cache:
            cache[key] = central_optimum(data, lam, bound=cfg["bound"], solver=solver, time_limit=time_limit,
                                         progress=progress)
        res = cache[key]
        return {**res, "solution": {k: v.copy() for k, v in res["solution"].items()}}

    info = {"template": "vertical", **{k: v for k, v in cfg.items() if k not in ("path", "test_path")},
            "path": None if path is None else str(path), **data.info, "parties": data.names, "data": data,
            "baselines": baselines}
    return ModelInstance(agents=parties, evaluate=evaluate, central=central, info=info, settings=dict(cfg))
