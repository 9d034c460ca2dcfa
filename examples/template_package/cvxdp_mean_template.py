"""Template ``mean``: the agents agree on the mean of their private points, inside the unit ball.

Agent p holds ``samples`` private points a_i in the unit ball of R^dim (generated from ``seed``: this example
reads no file) and minimises f_p(x) = ||x - m_p||^2 / 2, m_p the mean of its points (that is
(1/(2n)) sum_i ||x - a_i||^2 up to a constant), subject to ||x|| <= 1 over the shared ``x``; with equal ``n`` the
consensus optimum is the mean of all the points. The gradient x - m_p changes by (a_i - a_i')/n when one point is
replaced by another in the ball: l2 sensitivity 2/n under "replace one point".

The whole template is this module and one entry point in pyproject.toml::

    [project.entry-points."cvxdp.templates"]
    mean = "cvxdp_mean_template:TEMPLATE"

The module stays cheap to import (``cvxdp run --help`` imports it for the [model] keys): CVXPY and the agents
are imported inside :func:`build`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cvxdp import ModelKey, Template, check_model_keys
from cvxdp.errors import ConfigError

DEFAULTS: dict[str, Any] = {"agents": 3, "dim": 4, "samples": 50, "seed": 0}


def settings(model: dict) -> dict[str, Any]:
    """The [model] table with its defaults filled in, checked (the settings hook: no data generated)."""
    check_model_keys(model, DEFAULTS, "mean")
    cfg = {**DEFAULTS, **model}
    for key, value in cfg.items():
        low = 0 if key == "seed" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"The {key!r} entry of [model] must be an int in [{low}, inf). Got {value!r} instead.")
    return cfg


def build(model: dict, *, base_dir: Path) -> Any:
    """The agents of a case with ``[case] template = "mean"``, and its evaluation (distance to the true mean)."""
    import cvxpy as cp
    import numpy as np

    import cvxdp
    from cvxdp_models import ModelInstance

    cfg = settings(model)
    rng = np.random.default_rng(cfg["seed"])
    n, dim = cfg["samples"], cfg["dim"]
    agents, points = [], []
    for p in range(cfg["agents"]):
        a = rng.normal(0.3, 0.5, size=(n, dim))
        a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1.0)  # every point in the unit ball
        points.append(a)
        x = cp.Variable(dim, name=f"x{p}")
        sensitivity = cvxdp.Sensitivity(l2=2.0 / n, relation="replace one point by another in the unit ball")
        agents.append(cvxdp.Agent(f"holder{p}", cp.sum_squares(x - a.mean(axis=0)) / 2, [cp.norm(x, 2) <= 1],
                                  shared={"x": x}, sensitivity=sensitivity, lipschitz=1.0))
    truth = np.concatenate(points).mean(axis=0)

    def evaluate(result: Any) -> dict[str, float]:
        """Distance of the agreed point to the mean of all points (computed on private data: evaluation only)."""
        return {"distance_to_mean": float(np.linalg.norm(result.solution["x"] - truth))}

    return ModelInstance(agents=agents, evaluate=evaluate, info={"template": "mean", **cfg}, settings=cfg)


TEMPLATE = Template(
    "mean", build, settings=settings, reads_data=False,
    keys=(ModelKey("agents", "int >= 1", "3", "number of data holders"),
          ModelKey("dim", "int >= 1", "4", "dimension of the points and of the shared x"),
          ModelKey("samples", "int >= 1", "50", "private points per holder"),
          ModelKey("seed", "int >= 0", "0", "seed of the generated points")))
