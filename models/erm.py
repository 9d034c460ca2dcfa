"""The ``erm`` template: binary logistic + l2 ERM split over the nodes of a network (papers 000 and 001).

Node i holds ``D_i = {(x_n, y_n)}_{n=1}^{B_i}`` (rows ``||x_n|| <= 1``, labels in {-1, +1}) and the papers'

    O(f, D_i) = C/B_i sum_n log(1 + exp(-y_n f^T x_n)) + rho/N ||f||^2 / 2

so that ``sum_i O(f, D_i)`` is the regularized ERM (1). Each node is a :class:`cvxdp.Agent` over a variable
``f`` with ``shared={"f": f}``, its data in a CVXPY Parameter (rows ``y_n x_n``), a numpy value / gradient /
Hessian (:class:`cvxdp.SmoothObjective`, which read the Parameter's current value) and the ERM
constants of the privacy bounds (:class:`cvxdp.families.graph.mechanism.ERMConstants`: C, B_i, rho/N, c1 = 1/4).
Neighbouring relation: replace one sample of one node (default; ``B_i`` is then the node's own count, which
the relation leaves unchanged): gradient sensitivity ``2C/B_i`` (l2). ``erm_agents(..., samples=[B_1, ...])``
declares public per-node counts instead, which also supports add/remove one sample (``C/B_i``): the
normaliser must not change between neighbours.

``[model]`` keys (all optional)

=================  =====================================================================================
dataset            "breast_cancer" (default) | "digits" (bundled with scikit-learn) | "adult" (local CSV)
path               the UCI Adult file (adult.data), relative to the case file
test_path          optional Adult test file (adult.test); else a share of ``path`` is held out
positive_digits    digits labelled +1 for "digits" (default 5..9); the others are -1
nodes              number of nodes N (default 5); node names node0 .. node{N-1}
C                  loss weight (default 50; the papers require C <= B_i)
rho                regularization rho of (1) (default 0.1); each node carries rho/N
test_fraction      held-out share (default 0.2)
max_samples        keep a random subset of this many samples before the split
data_seed          seed of the subsample, the test split and the split over nodes (default 0)
=================  =====================================================================================

Preprocessing (the papers', from public constants only): columns divided by public maxima (breast_cancer:
:data:`~cvxdp_models.logistic.data.BREAST_CANCER_SCALE`; digits: the pixel range 16; Adult:
:func:`cvxdp_models.logistic.data.load_adult`, 105 dims after one-hot encoding), then every row normalised to unit
norm on its own. No statistic is computed over the samples, so one node's data never move another node's
(issue 36; before, digits columns were divided by their maximum over all nodes' samples).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cvxpy as cp
import numpy as np
from scipy.special import expit

import cvxdp
from cvxdp import ERMConstants, SmoothObjective, attach_erm_constants
from cvxdp.errors import ConfigError

from .base import ModelInstance, check_model_keys
from .logistic import data as D

__all__ = ["DEFAULTS", "ERMInstance", "ERMNode", "build", "central_optimum", "erm_agents", "load_erm_data",
           "make_erm", "settings"]

DATASETS = ("breast_cancer", "digits", "adult")
DEFAULTS: dict[str, Any] = {"dataset": "breast_cancer", "path": None, "test_path": None,
                            "positive_digits": [5, 6, 7, 8, 9], "nodes": 5, "C": 50.0, "rho": 0.1,
                            "test_fraction": 0.2, "max_samples": None, "data_seed": 0}
C1_LOGISTIC = 0.25
RELATION = "replace one sample of one node's D_i (||x|| <= 1, labels in {-1, +1})"
RELATIONS = {"replace": RELATION,
             "add_remove": "add/remove one sample of one node's D_i with public B_i (||x|| <= 1, labels in {-1, +1})"}


class ERMNode:
    """One node's ``O(f, D_i) = C/B_i sum log(1 + exp(-y f^T x)) + reg ||f||^2/2`` (reg = rho/N).

    The data live in the CVXPY Parameter ``A`` (rows ``y_n x_n``); :meth:`value`, :meth:`gradient` and
    :meth:`hessian` read its current value, so whatever reads the data goes through it.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, *, C: float, reg: float, name: str,
                 samples: int | None = None, relation: str = "replace") -> None:
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        if X.ndim != 2 or len(X) != len(y) or len(y) == 0:
            raise ConfigError(f"Node {name!r}: X must be (B, d) with B = len(y) > 0; got {X.shape}, {y.shape}.")
        if not np.all(np.isin(y, (-1.0, 1.0))):
            raise ConfigError(f"Node {name!r}: labels must be -1 or +1.")
        if np.any(np.linalg.norm(X, axis=1) > 1.0 + 1e-9):
            raise ConfigError(f"Node {name!r}: feature rows must have norm <= 1 (normalise them first).")
        self.name, self.C, self.reg = name, float(C), float(reg)
        self.B, self.d = X.shape
        self.B = int(samples) if samples is not None else self.B  # the (public) normaliser B_i
        self.relation = relation
        self.X, self.y = X, y
        self.A = cp.Parameter((len(y), self.d), value=y[:, None] * X, name=f"YX_{name}")
        self.f = cp.Variable(self.d, name="f")
        self.objective = (self.C / self.B) * cp.sum(cp.logistic(-(self.A @ self.f))) \
            + 0.5 * self.reg * cp.sum_squares(self.f)
        self.constants = ERMConstants(C=self.C, B=self.B, reg=self.reg, c1=C1_LOGISTIC)

    def value(self, u: np.ndarray) -> float:
        z = self.A.value @ u
        return float(self.C / self.B * np.logaddexp(0.0, -z).sum() + 0.5 * self.reg * (u @ u))

    def gradient(self, u: np.ndarray) -> np.ndarray:
        A = self.A.value
        return -(self.C / self.B) * (A.T @ expit(-(A @ u))) + self.reg * u

    def hessian(self, u: np.ndarray) -> np.ndarray:
        A = self.A.value
        z = A @ u
        w = expit(z) * expit(-z)
        return (self.C / self.B) * (A.T @ (w[:, None] * A)) + self.reg * np.eye(self.d)

    def loss(self, u: np.ndarray) -> float:
        """The average loss ``1/B_i sum log(1 + exp(-y f^T x))`` (the papers' accuracy measure)."""
        return float(np.logaddexp(0.0, -(self.A.value @ u)).mean())

    def agent(self) -> cvxdp.Agent:
        """The node as a :class:`cvxdp.Agent` (shared key ``"f"``), with its ERM constants attached."""
        k = 2.0 if self.relation == "replace" else 1.0  # per-sample terms that differ between neighbours
        agent = cvxdp.Agent(self.name, self.objective, [], shared={"f": self.f},
                            gradient=SmoothObjective(self.value, self.gradient, self.hessian), value=self.value,
                            sensitivity=cvxdp.Sensitivity(l1=k * self.C * math.sqrt(self.d) / self.B,
                                                          l2=k * self.C / self.B, relation=RELATIONS[self.relation]))
        return attach_erm_constants(agent, self.constants)


def erm_agents(parts: list[tuple[np.ndarray, np.ndarray]], *, C: float, rho: float,
               names: list[str] | None = None, samples: list[int] | None = None,
               relation: str | None = None) -> tuple[list[cvxdp.Agent], list[ERMNode]]:
    """One node per ``(X_i, y_i)`` part, each with ``rho/N`` of the regularizer.

    ``samples``: the public per-node counts ``B_i`` (the loss normalisers); required for
    ``relation="add_remove"``. ``relation``: "replace" (default without ``samples``) or "add_remove"
    (default with them).
    """
    N = len(parts)
    names = names or [f"node{i}" for i in range(N)]
    relation = relation or ("replace" if samples is None else "add_remove")
    if relation not in RELATIONS:
        raise ConfigError(f"The 'relation' parameter of erm_agents must be one of 'replace', 'add_remove'. "
                          f"Got {relation!r} instead.")
    if samples is None and relation == "add_remove":
        raise ConfigError("erm_agents: relation='add_remove' needs the public per-node counts samples=[B_1, ...] "
                          "(a node's own count changes with the neighbour).")
    if samples is not None and (len(samples) != N or any(isinstance(b, bool) or not isinstance(b, int) or b < 1
                                                          for b in samples)):
        raise ConfigError(f"The 'samples' parameter of erm_agents must be {N} ints >= 1. Got {samples!r} instead.")
    counts = samples if samples is not None else [None] * N
    nodes = [ERMNode(X, y, C=C, reg=rho / N, name=n, samples=b, relation=relation)
             for (X, y), n, b in zip(parts, names, counts)]
    return [nd.agent() for nd in nodes], nodes


def central_optimum(nodes: list[ERMNode], *, polish: bool = True, time_limit: float = 300.0,
                    progress: Any = None) -> dict[str, Any]:
    """The centralized regularized-ERM optimum ``min_f sum_i O(f, D_i)``: CVXPY (Clarabel, then the announced
    fallbacks of :func:`cvxdp.solve_with_fallback`, each capped at ``time_limit`` seconds), then Newton polish
    (at most 20 steps of a d x d system). ``progress`` receives one line per step.

    Returns ``{"objective", "solution", "solver", "status", "time_s"}``.
    """
    start = time.perf_counter()
    d = nodes[0].d
    f = cp.Variable(d, name="f_central")
    obj = sum((nd.C / nd.B) * cp.sum(cp.logistic(-(nd.A.value @ f))) for nd in nodes) \
        + 0.5 * sum(nd.reg for nd in nodes) * cp.sum_squares(f)
    prob = cp.Problem(cp.Minimize(obj))
    solver = cvxdp.solve_with_fallback(prob, "CLARABEL", time_limit=float(time_limit), progress=progress)
    u = np.asarray(f.value, dtype=float)
    if polish:
        for _ in range(20):
            g = sum(nd.gradient(u) for nd in nodes)
            if np.linalg.norm(g) < 1e-13:
                break
            H = sum(nd.hessian(u) for nd in nodes)
            u = u - np.linalg.solve(H, g)
        solver += "+newton"
    value = float(sum(nd.value(u) for nd in nodes))
    return {"objective": value, "solution": u, "solver": solver, "status": prob.status,
            "time_s": time.perf_counter() - start}


def load_erm_data(cfg: dict[str, Any], base_dir: Path = Path(".")) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                              np.ndarray]:
    """``X_train, y_train, X_test, y_test`` of a resolved ``[model]`` table (rows of norm <= 1, labels +-1)."""
    dataset = cfg["dataset"]
    rng = np.random.default_rng(cfg["data_seed"])
    X_te = y_te = None
    if dataset == "breast_cancer":
        X, y = D.load_sklearn("breast_cancer")
    elif dataset == "digits":
        from sklearn import datasets

        dig = datasets.load_digits()
        # the format's public range 0..16, then each row on its own (issue 36: no column maximum over the samples)
        X = D.normalize_rows(dig.data / 16.0)
        y = np.where(np.isin(dig.target, cfg["positive_digits"]), 1, -1)
    else:
        if cfg["path"] is None:
            raise ConfigError("The 'adult' data set needs a 'path' entry in [model] (the local UCI adult.data file).")
        X, y = D.load_adult(Path(base_dir) / cfg["path"])
        if cfg["test_path"] is not None:
            X_te, y_te = D.load_adult(Path(base_dir) / cfg["test_path"])
    if cfg["max_samples"] is not None and cfg["max_samples"] < len(y):
        keep = rng.choice(len(y), size=cfg["max_samples"], replace=False)
        X, y = X[np.sort(keep)], y[np.sort(keep)]
    if X_te is None:
        X, X_te, y, y_te = D.train_test(X, y, cfg["test_fraction"], cfg["data_seed"])
    return X, y.astype(float), X_te, y_te.astype(float)


def _resolve(model: dict[str, Any]) -> dict[str, Any]:
    check_model_keys(model, DEFAULTS, "erm")
    cfg = {**DEFAULTS, **model}
    if cfg["dataset"] not in DATASETS:
        raise ConfigError(f"The 'dataset' entry of [model] must be one of {', '.join(map(repr, DATASETS))}. "
                          f"Got {cfg['dataset']!r} instead.")
    n = cfg["nodes"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ConfigError(f"The 'nodes' entry of [model] must be an int in [2, inf). Got {n!r} instead.")
    for key in ("C", "rho"):
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise ConfigError(f"The {key!r} entry of [model] must be a float in (0, inf). Got {v!r} instead.")
    tf = cfg["test_fraction"]
    if isinstance(tf, bool) or not isinstance(tf, (int, float)) or not 0 <= tf < 1:
        raise ConfigError(f"The 'test_fraction' entry of [model] must be a float in [0, 1). Got {tf!r} instead.")
    ds = cfg.get("data_seed", 0)
    if isinstance(ds, bool) or not isinstance(ds, int) or ds < 0:
        raise ConfigError(f"The 'data_seed' entry of [model] must be an int in [0, inf). Got {ds!r} instead.")
    ms = cfg["max_samples"]
    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or ms < 2 * n):
        raise ConfigError(f"The 'max_samples' entry of [model] must be an int >= 2 * nodes. Got {ms!r} instead.")
    return cfg


@dataclass
class ERMInstance(ModelInstance):
    """A built ERM case: the agents plus their :class:`ERMNode` objects and the held-out data."""

    nodes: list[ERMNode] = field(default_factory=list)
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None

    def average_loss(self, locals_: dict[str, np.ndarray]) -> float:
        """The papers' ``L(t) = 1/N sum_i 1/B_i sum_n L(y f_i^T x)`` at the nodes' local classifiers."""
        return float(np.mean([nd.loss(np.asarray(locals_[nd.name])) for nd in self.nodes]))

    def test_error(self, f: np.ndarray) -> float:
        """Classification error of ``sign(f^T x)`` on the held-out set (ties count as +1)."""
        if self.X_test is None or len(self.y_test) == 0:
            return float("nan")
        pred = np.where(self.X_test @ np.asarray(f) >= 0, 1.0, -1.0)
        return float(np.mean(pred != self.y_test))


def make_erm(model: dict[str, Any] | None = None, *, base_dir: Path = Path(".")) -> ERMInstance:
    """Build the ERM nodes of a ``[model]`` table (see the module docstring); also the template's entry point."""
    cfg = settings(model or {})
    X, y, X_te, y_te = load_erm_data(cfg, base_dir)
    if len(y) < cfg["nodes"]:
        raise ConfigError(f"Cannot split {len(y)} samples over {cfg['nodes']} nodes.")
    parts = D.split_iid(X, y, cfg["nodes"], np.random.default_rng(cfg["data_seed"]))
    agents, nodes = erm_agents(parts, C=cfg["C"], rho=cfg["rho"])
    too_big = [nd.name for nd in nodes if cfg["C"] > nd.B]
    info = {"template": "erm", **{k: v for k, v in cfg.items()}, "features": int(X.shape[1]),
            "train_samples": int(len(y)), "test_samples": int(len(y_te)), "samples_per_node": [nd.B for nd in nodes],
            "c1": C1_LOGISTIC, "C_exceeds_B": too_big}
    instance = ERMInstance(agents=agents, info=info, settings=dict(cfg), nodes=nodes, X_test=X_te, y_test=y_te)

    def evaluate(result: Any) -> dict[str, float]:
        f = np.asarray(result.solution["f"], dtype=float)
        return {"test_error": instance.test_error(f), "average_loss": instance.average_loss(result.local),
                "train_error": float(np.mean(np.where(X @ f >= 0, 1.0, -1.0) != y))}

    def central(time_limit: float = 300.0, progress: Any = None, **_: Any) -> dict[str, Any]:
        ref = central_optimum(nodes, time_limit=time_limit, progress=progress)
        return {"objective": ref["objective"], "solver": ref["solver"], "status": ref["status"],
                "time_s": ref["time_s"], "test_error": instance.test_error(ref["solution"])}

    instance.evaluate = evaluate
    instance.central = central
    return instance


def settings(model: dict) -> dict[str, Any]:
    """The template's settings hook: the ``[model]`` table checked and resolved (defaults included), without
    loading data; the built instance's ``settings``."""
    return _resolve(dict(model))


def build(model: dict, *, base_dir: Path) -> ModelInstance:
    """Template entry point for ``[case] template = "erm"``."""
    return make_erm(model, base_dir=base_dir)
