"""The ``logistic`` template: a case file's ``[model]`` table -> federated logistic-regression agents.

``[model]`` keys (all optional; defaults in :data:`DEFAULTS`)

=================  =====================================================================================
dataset            "digits" | "breast_cancer" (bundled), "mnist" | "femnist" | "libsvm" | "adult" (local files)
path               file or directory of a file data set, relative to the case file
test_path          optional separate test file (libsvm, adult); MNIST uses t10k-* beside the training files
agents             number of agents (FEMNIST: number of writers, one writer = one agent; default all)
writers            FEMNIST only: the writers by index in the shards' file order (0-based), e.g.
                   ``writers = [10, 11, ..., 19]``, a held-out set disjoint from the first ten; distinct ints,
                   each below the number of writers in the files (else an error naming the count); exclusive
                   with ``agents`` (absent: the first ``agents`` writers). ``total_samples`` is still checked
                   against the loaded writers' training samples
silos              cross-silo agents: an int S makes S agents, each a silo holding many records (FEMNIST: the
                   loaded writers, in file order or the order of ``writers``, dealt into S contiguous groups
                   whose writer counts differ by at most one, the larger first; other data sets: S parts of
                   ``split``, the same as ``agents = S``); or, FEMNIST only, a list of silos, each a list of
                   writer indexes (disjoint; exclusive with ``agents`` and ``writers``). Agents are named
                   ``silo0``, ``silo1``, ...; the neighbouring relation stays one record
split              "iid" | "label_skew" | "dirichlet" (FEMNIST: "writer", its natural split)
dirichlet_alpha    concentration of the Dirichlet split (smaller = more skew)
classes_per_agent  labels per agent in the label-skew split
test_fraction      held-out share when the data set has no test file
max_samples        keep a random subset of this many samples (before the test split)
standardize        centre and scale every feature, before the clip: "range" (default for "digits" multiclass):
                   ``(x - 0.5) / 0.5``, the loaders' public pixel range [0, 1] ("digits", "mnist", "femnist")
                   mapped to [-1, 1] | "public": ``(x - center) / scale`` with the declared ``center`` and
                   ``scale`` | "none" (default otherwise; ``false``) | "pooled" (``true``): the mean and standard
                   deviation of all agents' training data, a statistic of every agent's samples, so the agents
                   declare no sensitivity and only a non-private run is possible (docs/what-is-public.md)
center             standardize = "public" only: the public centre, a float or one float per feature
scale              standardize = "public" only: the public scale (> 0), a float or one float per feature
clip               row-norm bound C: ``||x_i||_2 <= C`` (rows rescaled after the standardization)
bound              box half-width: ``|theta_jk| <= bound`` ("binary": 0 = no box)
kind               "multiclass" (eq. 30, softmax) | "binary" (logistic + l2, labels mapped to -1/+1)
reg                l2 weight of the binary ERM (multiclass: must be 0)
data_seed          seed of the split, the subsample and the test split
total_samples      the public normaliser N of the loss (a constant the federation declares); needed for
                   relation = "add_remove". Absent: N is the training set's own size, fixed under "replace".
                   It must equal the loaded training set's size: otherwise a warning, and the agents declare no
                   sensitivity (a private run is refused)
relation           neighbouring relation of the sensitivity: "add_remove" (default with total_samples) or
                   "replace" (default without; twice the sensitivity)
baselines          add scikit-learn's pooled and one-agent test errors to ``evaluate`` (computed once)
dtype              precision of the agents' value and gradient: "float32" (default for "multiclass") |
                   "float64" ("binary": float64 only). float32 moves half the bytes (about 2x faster rounds
                   on MNIST-sized data, ``benchmarks/bench_fl.py``) and its iterates stay within 1e-5
                   (relative) of float64's (``tests/models/logistic/test_fast_path.py``); the gradient is
                   accumulated and returned in float64 and every mechanism adds its noise in float64, so the
                   released vectors are float64 (the noise keeps its full resolution). The central reference
                   and the test predictions always use float64.
=================  =====================================================================================

Labels: "digits" and "mnist" have the public classes 0..9, "femnist" 0..61, "breast_cancer" and "adult" -1/+1
(a label outside them is refused); "libsvm" has the labels of its training file (a test label outside them is
refused). The number of classes therefore never depends on which labels the agents happen to hold.

The shared key is ``"theta"``: the whole parameter (a (features x classes) matrix for "multiclass", a vector
for "binary"); ``result.solution["theta"]`` is its flat column-major consensus value.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cvxdp
from cvxdp.errors import ConfigError

from ..base import ModelInstance, check_model_keys
from . import data as D
from .baselines import central_private_anchor, central_reference, pooled_baseline, single_agent_baseline
from .binary import BinaryLogistic, binary_agents
from .multiclass import DTYPES, MulticlassLogistic, multiclass_agents

__all__ = ["DEFAULTS", "LogisticInstance", "build", "load_dataset", "preprocess", "settings"]

DATASETS = ("digits", "breast_cancer", "mnist", "femnist", "libsvm", "adult")
FILE_DATASETS = ("mnist", "femnist", "libsvm", "adult")
DEFAULTS: dict[str, Any] = {
    "dataset": "digits", "path": None, "test_path": None, "agents": None, "writers": None, "silos": None,
    "split": None,
    "dirichlet_alpha": 0.5, "classes_per_agent": 2, "test_fraction": 0.25, "max_samples": None,
    "standardize": None, "center": None, "scale": None, "clip": 1.0, "bound": None, "kind": None, "reg": None,
    "data_seed": 0, "baselines": True, "total_samples": None, "relation": None, "dtype": None,
}
STANDARDIZE = ("range", "public", "none", "pooled")
#: data sets whose loaders put every feature in the public range [0, 1] (pixels: digits / 16, MNIST / 255,
#: LEAF's FEMNIST gray values), whatever the samples; "range" maps it to [-1, 1]
RANGE_DATASETS = ("digits", "mnist", "femnist")
#: the public class sets (label values) of the data sets that define one; "libsvm" takes its training file's
CLASSES: dict[str, np.ndarray] = {"digits": np.arange(D.MNIST_CLASSES), "mnist": np.arange(D.MNIST_CLASSES),
                                  "femnist": np.arange(D.FEMNIST_CLASSES), "breast_cancer": np.array([-1, 1]),
                                  "adult": np.array([-1, 1])}
#: the default ``dtype`` of "multiclass" (float64 before issue 12; a run or study cell of the other default is
#: another problem: the resolved settings fingerprint checkpoints and study cells)
MULTICLASS_DTYPE = "float32"


# --------------------------------------------------------------------------- validation
def _bad(key: str, expected: str, got: object) -> ConfigError:
    return ConfigError(f"The {key!r} entry of [model] must be {expected}. Got {got!r} instead.")


def _int(cfg: dict, key: str, low: int, optional: bool = False) -> int | None:
    v = cfg[key]
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise _bad(key, f"an int in [{low}, inf)", v)
    return int(v)


def _float(cfg: dict, key: str, low: float, high: float = math.inf, *, low_open: bool = True,
           high_open: bool = True) -> float:
    v = cfg[key]
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if ok:
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        left = ("(" if low_open else "[") + f"{low:g}"
        right = (f"{high:g}" if high < math.inf else "inf") + (")" if high_open else "]")
        raise _bad(key, f"a float in {left}, {right}", v)
    return float(v)


def _choice(cfg: dict, key: str, choices: tuple[str, ...]) -> str:
    v = cfg[key]
    if v not in choices:
        raise _bad(key, "one of " + ", ".join(map(repr, choices)), v)
    return str(v)


def _bool(cfg: dict, key: str) -> bool:
    v = cfg[key]
    if not isinstance(v, bool):
        raise _bad(key, "true or false", v)
    return v


def _resolve(model: dict) -> dict[str, Any]:
    """Defaults + checks; returns the complete, validated configuration."""
    check_model_keys(model, DEFAULTS, "logistic")
    cfg = {**DEFAULTS, **model}
    cfg["dataset"] = _choice(cfg, "dataset", DATASETS)
    binary_data = cfg["dataset"] in ("breast_cancer", "adult")
    if cfg["kind"] is None:
        cfg["kind"] = "binary" if binary_data else "multiclass"
    cfg["kind"] = _choice(cfg, "kind", ("multiclass", "binary"))
    femnist = cfg["dataset"] == "femnist"
    if cfg["split"] is None:
        cfg["split"] = "writer" if femnist else "iid"
    cfg["split"] = _choice(cfg, "split", ("writer",) if femnist else ("iid", "label_skew", "dirichlet"))
    cfg["agents"] = _int(cfg, "agents", 1, optional=True)
    _resolve_writers(cfg, femnist)
    _resolve_silos(cfg, femnist)
    if cfg["agents"] is None and not femnist:
        cfg["agents"] = 5
    cfg["dirichlet_alpha"] = _float(cfg, "dirichlet_alpha", 0.0)
    cfg["classes_per_agent"] = _int(cfg, "classes_per_agent", 1)
    cfg["test_fraction"] = _float(cfg, "test_fraction", 0.0, 1.0, low_open=False)
    cfg["max_samples"] = _int(cfg, "max_samples", 2, optional=True)
    cfg["clip"] = _float(cfg, "clip", 0.0)
    cfg["data_seed"] = _int(cfg, "data_seed", 0)
    cfg["baselines"] = _bool(cfg, "baselines")
    cfg["total_samples"] = _int(cfg, "total_samples", 1, optional=True)
    if cfg["relation"] is None:
        cfg["relation"] = "replace" if cfg["total_samples"] is None else "add_remove"
    cfg["relation"] = _choice(cfg, "relation", ("add_remove", "replace"))
    if cfg["relation"] == "add_remove" and cfg["total_samples"] is None:
        raise _bad("total_samples", "the public sample count N (an int) when relation = 'add_remove'", None)
    _resolve_standardize(cfg)
    if cfg["kind"] == "multiclass":
        if cfg["bound"] is None:
            cfg["bound"] = 1.5
        cfg["bound"] = _float(cfg, "bound", 0.0)
        if cfg["reg"] not in (None, 0, 0.0):
            raise _bad("reg", "0 or absent for kind = 'multiclass' (eq. 30 has no regulariser)", cfg["reg"])
        cfg["reg"] = 0.0
        if cfg["dtype"] is None:
            cfg["dtype"] = MULTICLASS_DTYPE
        cfg["dtype"] = _choice(cfg, "dtype", DTYPES)
    else:
        if cfg["dtype"] not in (None, "float64"):
            raise _bad("dtype", "'float64' or absent for kind = 'binary' (its gradient is float64 only)", cfg["dtype"])
        cfg["dtype"] = "float64"
        cfg["bound"] = 0.0 if cfg["bound"] is None else _float(cfg, "bound", 0.0, low_open=False)
        if cfg["reg"] is None:
            cfg["reg"] = 1e-3
        cfg["reg"] = _float(cfg, "reg", 0.0, low_open=False)
    if cfg["dataset"] in FILE_DATASETS and not isinstance(cfg["path"], str):
        raise _bad("path", f"a path (str) to the {cfg['dataset']} data, relative to the case file (or `--data DIR` "
                   "on the command line)", cfg["path"])
    for key in ("path", "test_path"):
        if cfg[key] is not None and not isinstance(cfg[key], str):
            raise _bad(key, "a path (str) or absent", cfg[key])
    return cfg


def _resolve_writers(cfg: dict[str, Any], femnist: bool) -> None:
    """``writers``: FEMNIST only, a non-empty list of distinct ints >= 0, exclusive with ``agents``."""
    v = cfg["writers"]
    if v is None:
        return
    if not femnist:
        raise _bad("writers", f"absent for dataset = {cfg['dataset']!r} (FEMNIST only: writers by index)", v)
    if (not isinstance(v, list) or not v or not all(not isinstance(i, bool) and isinstance(i, (int, np.integer))
                                                    and i >= 0 for i in v)):
        raise _bad("writers", "a non-empty list of writer indexes (ints >= 0, file order)", v)
    if len(set(v)) != len(v):
        dup = next(i for i in v if v.count(i) > 1)
        raise _bad("writers", f"distinct writer indexes (index {dup} appears twice)", v)
    if cfg["agents"] is not None:
        raise _bad("agents", "absent when 'writers' picks the writers (the agents are the listed writers)",
                   cfg["agents"])
    cfg["writers"] = [int(i) for i in v]


def _resolve_silos(cfg: dict[str, Any], femnist: bool) -> None:
    """``silos``: an int >= 1 (FEMNIST: groups of the loaded writers; else the number of parts, i.e. ``agents``), or
    (FEMNIST only) a non-empty list of disjoint, non-empty lists of writer indexes, exclusive with ``agents`` and
    ``writers``."""
    v = cfg["silos"]
    if v is None:
        return
    if not isinstance(v, bool) and isinstance(v, (int, np.integer)):
        if v < 1:
            raise _bad("silos", "an int in [1, inf) or, for femnist, a list of lists of writer indexes", v)
        if not femnist:
            if cfg["agents"] not in (None, int(v)):
                raise _bad("agents", f"absent or equal to silos ({int(v)}) for dataset = {cfg['dataset']!r} (each "
                           "silo is one part of the split)", cfg["agents"])
            cfg["agents"] = int(v)
        cfg["silos"] = int(v)
        return
    expected = ("an int >= 1, or (femnist) a non-empty list of silos, each a non-empty list of distinct writer "
                "indexes (ints >= 0) that no other silo lists")
    if not femnist:
        raise _bad("silos", f"an int >= 1 for dataset = {cfg['dataset']!r} (writer lists are FEMNIST's)", v)
    if not (isinstance(v, list) and v and all(isinstance(g, list) and g and all(
            not isinstance(i, bool) and isinstance(i, (int, np.integer)) and i >= 0 for i in g) for g in v)):
        raise _bad("silos", expected, v)
    flat = [int(i) for g in v for i in g]
    if len(set(flat)) != len(flat):
        dup = next(i for i in flat if flat.count(i) > 1)
        raise _bad("silos", f"{expected} (writer {dup} appears twice)", v)
    for key in ("agents", "writers"):
        if cfg[key] is not None:
            raise _bad(key, "absent when 'silos' lists the writers of every silo", cfg[key])
    cfg["silos"] = [[int(i) for i in g] for g in v]


def _resolve_standardize(cfg: dict[str, Any]) -> None:
    """``standardize`` (``true`` / ``false``: the former "pooled" / "none"), ``center`` and ``scale``."""
    v = cfg["standardize"]
    if v is None:
        v = "range" if cfg["dataset"] == "digits" and cfg["kind"] == "multiclass" else "none"
    elif isinstance(v, bool):
        v = "pooled" if v else "none"
    cfg["standardize"] = v = _choice({"standardize": v}, "standardize", STANDARDIZE)
    if v == "range" and cfg["dataset"] not in RANGE_DATASETS:
        raise _bad("standardize", f"'public' (with center and scale), 'none' or 'pooled' for dataset = "
                   f"{cfg['dataset']!r} ('range' needs the public pixel range of {', '.join(RANGE_DATASETS)})", v)
    for key in ("center", "scale"):
        value = cfg[key]
        if v != "public":
            if value is not None:
                raise _bad(key, f"absent unless standardize = 'public' (standardize is {v!r})", value)
            continue
        items = value if isinstance(value, list) else [value]
        low = 0.0 if key == "scale" else -math.inf
        if not items or not all(not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
                                and x > low for x in items):
            what = "a float in (0, inf)" if key == "scale" else "a finite float"
            raise _bad(key, f"{what}, or a list of one such float per feature, for standardize = 'public'", value)
        cfg[key] = [float(x) for x in value] if isinstance(value, list) else float(value)


def settings(model: dict) -> dict[str, Any]:
    """The template's settings hook: the ``[model]`` table resolved (defaults included, checked), without
    loading data; the built instance's ``settings``."""
    return _resolve(dict(model))


# --------------------------------------------------------------------------- data
def load_dataset(cfg: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Load, subsample, split and preprocess the data named by a resolved configuration.

    Returns
    -------
    dict
        ``parts`` (list of ``(X_p, y_p)``), ``names``, ``X_test``, ``y_test``, ``labels`` (original label
        values; ``y`` holds indices into it for "multiclass", -1/+1 for "binary").
    """
    rng = np.random.default_rng(cfg["data_seed"])
    classes = CLASSES.get(cfg["dataset"])
    path = None if cfg["path"] is None else (base_dir / cfg["path"])
    test_path = None if cfg["test_path"] is None else (base_dir / cfg["test_path"])
    X_test = y_test = names = None
    if cfg["dataset"] == "femnist":
        silos = cfg["silos"]
        writers = [i for g in silos for i in g] if isinstance(silos, list) else cfg["writers"]
        fem = D.load_femnist(path, max_users=cfg["agents"], writers=writers)
        parts, names = fem.train, list(fem.users)
        X_test = np.vstack([X for X, _ in fem.test])
        y_test = np.concatenate([y for _, y in fem.test])
        if silos is not None:  # each silo is one agent holding its writers' records
            sizes = [len(g) for g in silos] if isinstance(silos, list) else D.group_sizes(len(parts), silos)
            parts = D.group_parts(parts, sizes)
            names = [f"silo{k}" for k in range(len(parts))]
        if cfg["max_samples"] is not None:
            raise _bad("max_samples", "absent for dataset = 'femnist' (choose the writers with 'agents')",
                       cfg["max_samples"])
    else:
        if cfg["dataset"] in ("digits", "breast_cancer"):
            X, y = D.load_sklearn(cfg["dataset"])
        elif cfg["dataset"] == "mnist":
            X, y = D.load_mnist(path, "train")
            try:
                X_test, y_test = D.load_mnist(path, "t10k")
            except FileNotFoundError:
                X_test = None
        elif cfg["dataset"] == "libsvm":
            X, y = D.load_libsvm(path)
            classes = np.unique(y)  # the training file's labels, before any subsample
            if test_path is not None:
                X_test, y_test = D.load_libsvm(test_path, n_features=X.shape[1])
                D.check_labels(test_path, "LIBSVM", y_test, classes)
        else:
            X, y = D.load_adult(path)
            if test_path is not None:
                X_test, y_test = D.load_adult(test_path)
        if cfg["max_samples"] is not None and cfg["max_samples"] < len(y):
            keep = np.sort(rng.choice(len(y), cfg["max_samples"], replace=False))
            X, y = X[keep], y[keep]
        if X_test is None:
            X, X_test, y, y_test = D.train_test(X, y, cfg["test_fraction"], cfg["data_seed"])
        splitter = cfg["split"]
        if splitter == "iid":
            parts = D.split_iid(X, y, cfg["agents"], rng)
        elif splitter == "label_skew":
            parts = D.split_label_skew(X, y, cfg["agents"], rng, classes_per_agent=cfg["classes_per_agent"])
        else:
            parts = D.split_dirichlet(X, y, cfg["agents"], cfg["dirichlet_alpha"], rng)
    names = names or [f"agent{p}" for p in range(len(parts))]
    labels = np.asarray(classes)  # public: never the labels the agents happen to hold
    stray = np.setdiff1d(np.concatenate([y for _, y in parts] + [y_test]), labels)
    if len(stray):  # the loaders name the file and record; this guards the data sets without a file
        raise ConfigError(f"The {cfg['dataset']!r} data hold label {stray[0]:g}, which is not one of its "
                          f"{len(labels)} classes ({', '.join(f'{c:g}' for c in labels)}).")
    if cfg["kind"] == "binary":
        if len(labels) != 2:
            raise ConfigError(f"kind = 'binary' needs a data set with two labels; {cfg['dataset']!r} has "
                              f"{len(labels)}. Use kind = 'multiclass'.")

        def encode(v: np.ndarray) -> np.ndarray:
            return np.where(v == labels[1], 1, -1)
    else:
        def encode(v: np.ndarray) -> np.ndarray:
            return np.searchsorted(labels, v)
    parts = [(np.asarray(X, dtype=float), encode(y)) for X, y in parts]
    X_test, y_test = np.asarray(X_test, dtype=float), encode(y_test)
    parts, X_test = preprocess(parts, X_test, cfg)
    return {"parts": parts, "names": names, "X_test": X_test, "y_test": y_test, "labels": labels}


def _public_statistic(cfg: dict[str, Any], key: str, features: int) -> float | np.ndarray:
    value = cfg[key]
    if isinstance(value, list) and len(value) != features:
        raise ConfigError(f"The {key!r} entry of [model] must be a float or a list of {features} floats (one per "
                          f"feature). Got a list of {len(value)} instead.")
    return np.asarray(value, dtype=float) if isinstance(value, list) else float(value)


def preprocess(parts: list[tuple[np.ndarray, np.ndarray]], X_test: np.ndarray, cfg: dict[str, Any],
               ) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """Standardize (``cfg["standardize"]``), then clip every row to ``||x||_2 <= C`` (``cfg["clip"]``).

    "range", "public" and "none" transform each sample on its own with public constants, so an agent's data
    never depend on another agent's samples and the clip, applied last, bounds every row for the sensitivity.
    "pooled" uses the mean and standard deviation of all agents' training data (non-private runs only).

    Returns
    -------
    parts : list of (X_p, y_p)
    X_test : ndarray
    """
    mode, features = cfg["standardize"], X_test.shape[1]
    centre: float | np.ndarray = 0.0
    scale: float | np.ndarray = 1.0
    if mode == "range":
        centre, scale = 0.5, 0.5
    elif mode == "public":
        centre, scale = _public_statistic(cfg, "center", features), _public_statistic(cfg, "scale", features)
    elif mode == "pooled":
        X_all = np.vstack([X for X, _ in parts])
        centre, sd = X_all.mean(axis=0), X_all.std(axis=0)
        scale = np.where(sd > 0, sd, 1.0)
    if mode != "none":
        parts = [((X - centre) / scale, y) for X, y in parts]
        X_test = (X_test - centre) / scale
    return [(D.clip_rows(X, cfg["clip"]), y) for X, y in parts], D.clip_rows(X_test, cfg["clip"])


# --------------------------------------------------------------------------- build
@dataclass
class LogisticInstance(ModelInstance):
    """A :class:`~cvxdp_models.ModelInstance` with the logistic template's extras (tests, benchmarks).

    Attributes
    ----------
    models : list of MulticlassLogistic or BinaryLogistic
        Per-agent models (data, ``value``, ``gradient``), in the order of ``agents``.
    pooled : MulticlassLogistic or BinaryLogistic
        The model over all training data (its value is ``sum_p f_p``).
    test_data : (X_test, y_test)
    evaluate_solution : callable(flat theta) -> dict
        ``evaluate`` on a bare parameter vector.
    """

    models: list[Any] = field(default_factory=list)
    pooled: Any = None
    test_data: tuple[np.ndarray, np.ndarray] | None = None
    evaluate_solution: Callable[[np.ndarray], dict[str, float]] | None = None


def public_lipschitz(m: MulticlassLogistic | BinaryLogistic, relation: str) -> float:
    """A data-independent bound on the Lipschitz constant of an agent's gradient, from the row-norm clip ``C``:
    each sample adds at most ``C^2/4`` (logistic) or ``C^2/2`` (softmax) over ``N`` to the Hessian. Under
    "replace" the agent's sample count ``n_p`` is fixed across neighbours (``n_p C^2/(k N)``); under
    "add_remove" it is not, so the bound uses ``n_p <= N`` (``C^2/k``)."""
    if not isinstance(m, BinaryLogistic):  # the multiclass model declares its own (MulticlassLogistic.public_lipschitz)
        return m.public_lipschitz
    share = len(m.y) / m.total if relation == "replace" else 1.0
    return 0.25 * m.clip ** 2 * share + m.reg * m.reg_weight


def private_refusals(cfg: dict[str, Any], n_train: int, agents: int) -> list[str]:
    """Why no per-agent sensitivity holds for the built agents (empty: a private run is sound).

    "pooled" standardization makes every agent's data depend on every other agent's samples; a declared
    ``total_samples`` that is not the loaded training set's size is not the federation's true public count
    (warned here, since a non-private run only mis-scales the loss).
    """
    out = []
    if cfg["standardize"] == "pooled":
        out.append("The 'standardize' entry of [model] is 'pooled': every agent's features are centred and scaled "
                   "by the mean and standard deviation of all agents' data, so one agent's sample moves every "
                   "agent's gradient and no per-agent sensitivity holds (non-private runs only). Use public "
                   "statistics: standardize = 'range' (the pixel range of digits, mnist, femnist), 'public' with "
                   "declared center and scale, or 'none'")
    N = cfg["total_samples"]
    if N is not None and N != n_train:
        msg = (f"The 'total_samples' entry of [model] declares {N} training samples but the loaded data hold "
               f"{n_train} ({agents} agents), so the loss is divided by {N} instead of {n_train}. Declare the "
               f"federation's true count (total_samples = {n_train}) or remove the entry (relation = 'replace', "
               "the data's own count, twice the noise)")
        warnings.warn(msg + ". A private run with these agents is refused.", UserWarning, stacklevel=3)
        out.append(msg)
    return out


def build(model: dict, *, base_dir: Path) -> ModelInstance:
    """Build the logistic template from a case file's ``[model]`` table.

    Parameters
    ----------
    model : dict
        The ``[model]`` table (see the module docstring).
    base_dir : Path
        Directory of the case file; relative data paths are resolved against it.

    Returns
    -------
    LogisticInstance
        A :class:`cvxdp_models.ModelInstance`: ``agents``; ``evaluate(result)`` -> ``train_cost``
        (sum_p f_p at the consensus ``w = result.solution["theta"]``), ``train_error``, ``test_error``,
        ``box_violation`` of ``w``, the same cost and test error at the mean of the agents' last ``z_p``
        (``*_local_mean``), and the scikit-learn baselines' test errors; ``central(solver="auto")`` -> the
        centralized constrained optimum (CVXPY + Clarabel up to 20,000 samples x classes, SciPy's L-BFGS-B above);
        ``info`` (sizes, sensitivity, the resolved configuration).
    """
    cfg = settings(model)
    ds = load_dataset(cfg, Path(base_dir))
    parts, X_test, y_test = ds["parts"], ds["X_test"], ds["y_test"]
    classes = len(ds["labels"])
    if cfg["kind"] == "multiclass":
        agents, models = multiclass_agents(parts, classes=classes, bound=cfg["bound"], clip=cfg["clip"],
                                           names=ds["names"], total=cfg["total_samples"], relation=cfg["relation"],
                                           dtype=cfg["dtype"])
        # the central reference and the reported predictions in float64, whatever the agents' precision
        pooled: MulticlassLogistic | BinaryLogistic = MulticlassLogistic.pooled(models, dtype="float64")
    else:
        agents, models = binary_agents(parts, reg=cfg["reg"], clip=cfg["clip"], bound=cfg["bound"] or None,
                                       names=ds["names"], total=cfg["total_samples"], relation=cfg["relation"])
        pooled = BinaryLogistic.pooled(models)
    for agent, m in zip(agents, models):  # public bounds for LinearizedADMM(eta="auto") (issue 12)
        agent.lipschitz = public_lipschitz(m, cfg["relation"])
    n_train = int(sum(len(y) for _, y in parts))
    refusals = private_refusals(cfg, n_train, len(parts))
    if refusals:  # no sensitivity holds: the engine refuses a private run and quotes the reasons
        for agent in agents:
            agent.sensitivity = cvxdp.Sensitivity(relation="; ".join(refusals))
    cache: dict[str, Any] = {}

    def baselines() -> dict[str, float]:
        if "baselines" not in cache:
            X_tr = np.vstack([X for X, _ in parts])
            y_tr = np.concatenate([y for _, y in parts])
            C = 1.0 if cfg["kind"] == "multiclass" else 1.0 / (len(y_tr) * cfg["reg"]) if cfg["reg"] > 0 else 1e6
            pooled_res = pooled_baseline(X_tr, y_tr, X_test, y_test, C=C)
            single_res = single_agent_baseline(parts, X_test, y_test, agent=0, C=C)
            cache["baselines"] = {"baseline_pooled_test_error": pooled_res["test_error"],
                                  "baseline_single_test_error": single_res["test_error"]}
        return cache["baselines"]

    def evaluate(result: Any) -> dict[str, float]:
        out = evaluate_solution(np.asarray(result.solution["theta"], dtype=float))
        local = getattr(result, "local", None)
        if local:  # the mean of the communicated z_p: inside W under ObjPert (W convex), unlike w
            z = np.mean([np.ravel(local[a.name]) for a in agents if a.name in local], axis=0)
            out["train_cost_local_mean"] = float(sum(m.value(z) for m in models))
            out["test_error_local_mean"] = (float(np.mean(pooled.predict(z, X_test) != y_test)) if len(y_test)
                                            else math.nan)
        return out

    def evaluate_solution(w: np.ndarray) -> dict[str, float]:
        w = np.ravel(w)
        lo, hi = pooled.box
        out = {"train_cost": float(sum(m.value(w) for m in models)),
               "train_error": float(np.mean(pooled.predict(w, pooled.X) != pooled.y)),
               "test_error": float(np.mean(pooled.predict(w, X_test) != y_test)) if len(y_test) else math.nan,
               "box_violation": float(max(np.max(w - hi), np.max(lo - w), 0.0))}
        if cfg["baselines"]:
            out.update(baselines())
        return out

    def central(solver: str = "auto", tol: float = 1e-9, solution: bool = False, time_limit: float = 300.0,
                progress: Callable[[str], None] | None = None, **_: Any) -> dict[str, Any]:
        """Centralized constrained optimum (cached): ``objective``, ``solver``, ``status``, ``time_s``,
        ``train_error``, ``test_error``; with ``solution=True`` also ``{"theta": flat array}``. ``time_limit``:
        seconds the solve may take (:func:`central_reference`; a stop at it is in the status)."""
        key = f"central:{solver}:{tol}:{time_limit}"
        if key not in cache:
            res = central_reference(pooled, solver=solver, tol=tol, time_limit=time_limit, progress=progress)
            sol = res.pop("solution")
            res["test_error"] = float(np.mean(pooled.predict(sol, X_test) != y_test)) if len(y_test) else math.nan
            res["train_error"] = float(np.mean(pooled.predict(sol, pooled.X) != pooled.y))
            cache[key] = (res, sol)
        res, sol = cache[key]
        return {**res, "solution": {"theta": sol.copy()}} if solution else dict(res)

    sens = agents[0].sensitivity
    info = {"template": "logistic", **{k: v for k, v in cfg.items() if k != "baselines"},
            "n_train": n_train, "n_test": int(len(y_test)), "private_possible": not refusals,
            "features": int(parts[0][0].shape[1]), "classes": classes, "agents": len(agents),
            "samples_per_agent": [int(len(y)) for _, y in parts],
            "sensitivity": {"l1": sens.l1, "l2": sens.l2, "relation": sens.relation}}
    info["parameter_shape"] = list(pooled.shape)
    def central_private(epsilon: float, delta: float, seed: int | None = None, noise_scale: float = 1.0
                        ) -> dict[str, Any]:
        """DP-SGD on the pooled data at the total ``(epsilon, delta)`` (:func:`central_private_anchor`; with
        ``noise_scale`` its noise multiplied, at the smaller epsilon it returns)."""
        return central_private_anchor(pooled, X_test, y_test, epsilon=epsilon, delta=delta, seed=seed,
                                      noise_scale=noise_scale)

    anchor = central_private if not refusals else None  # multiclass and binary models both declare PerExample
    return LogisticInstance(agents=agents, evaluate=evaluate, central=central, info=info, settings=dict(cfg),
                            models=list(models), pooled=pooled, test_data=(X_test, y_test),
                            evaluate_solution=evaluate_solution, central_private=anchor)
