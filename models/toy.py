"""A small generated consensus problem (least squares over private data with box, SOC and linear sets).

Used by the quickstart, the CLI tests and as a template example: ``[case] template = "toy"``.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.errors import ConfigError

from .base import ModelInstance, check_model_keys


def make_agents(*, agents: int = 3, dim: int = 5, samples: int = 20, seed: int = 0, bound: float = 1.0,
                radius: float = 1.5) -> list[cvxdp.Agent]:
    """Agent p fits ``x`` to private data (A_p, b_p); sets cycle through box, SOC+box and linear+box.

    Every agent also owns a local-only variable. The gradient sensitivity is for replacing one row of
    b_p by a value at most ``1`` away (the rows of A_p are normalised to ||a|| <= 1):
    ``|grad difference| = |a_i| * |b_i - b_i'| / samples <= 1/samples`` in l2, ``sqrt(dim)/samples`` in l1.
    """
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=dim)
    out = []
    for p in range(agents):
        A = rng.normal(size=(samples, dim))
        A /= np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1.0)
        b = A @ truth + 0.1 * rng.normal(size=samples)
        Ap = cp.Parameter((samples, dim), value=A, name=f"A{p}")
        bp = cp.Parameter(samples, value=b, name=f"b{p}")
        x = cp.Variable(dim, name=f"x{p}")
        s = cp.Variable(2, name=f"s{p}")  # local-only
        cons = [x <= bound, x >= -bound, s <= 1, s >= -1]
        if p % 3 == 1:
            cons.append(cp.norm(x, 2) <= radius)
        elif p % 3 == 2:
            cons.append(cp.sum(x) <= 0.5 * bound)
            cons.append(s[0] == x[0])
        objective = cp.sum_squares(Ap @ x - bp) / (2 * samples) + 0.5 * cp.sum_squares(s - 0.3)

        out.append(cvxdp.Agent(f"agent{p}", objective, cons, shared={"x": x},
                               gradient=functools.partial(_gradient, A=A, b=b, dim=dim, n=samples),
                               sensitivity=cvxdp.Sensitivity(l1=np.sqrt(dim) / samples, l2=1.0 / samples,
                                                             relation="replace one target b_i by a value within 1",
                                                             alpha=1.0 / samples),
                               lipschitz=1.0))  # public: ||a_i|| <= 1 gives ||A||^2/n <= 1; the s-part has 1
    return out


#: the [model] keys of the template and their defaults (those of :func:`make_agents`)
DEFAULTS: dict[str, Any] = {name: p.default for name, p in inspect.signature(make_agents).parameters.items()}


def settings(model: dict) -> dict[str, Any]:
    """The template's settings hook: the ``[model]`` table checked, with :func:`make_agents`' defaults filled
    in; the built instance's ``settings``."""
    check_model_keys(model, DEFAULTS, "toy")
    cfg = {**DEFAULTS, **model}
    for key, low in (("agents", 1), ("dim", 1), ("samples", 1), ("seed", 0)):
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"The {key!r} entry of [model] must be an int in [{low}, inf). Got {v!r} instead.")
    for key in ("bound", "radius"):
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ConfigError(f"The {key!r} entry of [model] must be a float in (0, inf). Got {v!r} instead.")
    return cfg


def build(model: dict, *, base_dir: Path) -> ModelInstance:
    """Template entry point for ``[case] template = "toy"``."""
    cfg = settings(model)
    return ModelInstance(agents=make_agents(**cfg), info={"template": "toy", **cfg}, settings=cfg)


def _gradient(u: np.ndarray, *, A: np.ndarray, b: np.ndarray, dim: int, n: int) -> np.ndarray:
    """The toy agent's gradient (module level, so the agent pickles): flat layout x first, then s."""
    gx = A.T @ (A @ u[:dim] - b) / n
    return np.concatenate([gx, u[dim:] - 0.3])
