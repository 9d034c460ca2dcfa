"""The multiclass model of eq. (30): declaration, hand-coded gradient, sensitivity."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp_models.logistic.data import clip_rows
from cvxdp_models.logistic.multiclass import (
    MulticlassLogistic,
    multiclass_agents,
    multiclass_sensitivity,
    softmax_gradient,
)


def _data(n=40, d=6, K=4, seed=0, C=1.0):
    rng = np.random.default_rng(seed)
    X = clip_rows(rng.normal(size=(n, d)) * 2.0, C)
    y = rng.integers(0, K, n)
    return X, y


@pytest.fixture
def model():
    X, y = _data()
    return MulticlassLogistic(X, y, classes=4, total=100, bound=2.0, name="a", clip=1.0)


def test_declaration_is_dcp_dpp_and_a_box(model):
    agent = model.agent()
    assert isinstance(agent, cvxdp.Agent)
    agent.check()
    prob = cp.Problem(cp.Minimize(model.objective), model.constraints)
    assert prob.is_dcp() and prob.is_dpp()
    assert {p.name() for p in prob.parameters()} == {"X_a", "XtY_a"}
    # W is declared as elementwise bounds of the one variable: u = theta flattened column-major
    assert agent.layout.size == 24 and np.array_equal(agent.layout.shared["theta"], np.arange(24))
    assert len(model.constraints) == 2 and all(c.args[0].shape == (6, 4) or c.args[1].shape == (6, 4)
                                               for c in model.constraints)
    assert agent.sensitivity.relation == "add/remove one sample (public normaliser N = 100)"


def test_value_matches_cvxpy(model):
    rng = np.random.default_rng(1)
    agent = model.agent()
    for _ in range(3):
        u = rng.uniform(-2, 2, 24)
        g = model.gradient(u)  # fills the logits cache; value and gradient must still be right after
        assert agent.objective_value(u) == pytest.approx(cvxdp.Agent.objective_value(agent, u), rel=1e-12)
        model.theta.value = model.unflatten(u)
        assert model.value(u) == pytest.approx(model.objective.value, rel=1e-12)
        np.testing.assert_array_equal(model.gradient(u), g)
        assert model.value(u + rng.normal(size=24)) != model.value(u)  # the cache follows u
    assert model.value(np.zeros(24)) == pytest.approx(40 * math.log(4) / 100)


def test_gradient_finite_differences(model):
    rng = np.random.default_rng(2)
    u = rng.uniform(-2, 2, 24)
    g = model.gradient(u)
    h = 1e-6
    fd = np.array([(model.value(u + h * e) - model.value(u - h * e)) / (2 * h) for e in np.eye(24)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_gradient_matches_cvxpy_grad(model):
    u = np.random.default_rng(3).uniform(-2, 2, 24)
    slow = cvxdp.Agent("slow", model.objective, model.constraints, shared={"theta": model.theta})
    np.testing.assert_allclose(model.agent().grad(u), slow.grad(u), rtol=1e-6, atol=1e-10)


def test_no_overflow_for_large_logits():
    X, y = _data()
    m = MulticlassLogistic(X * 1e3, y, classes=4, total=40, bound=50.0, name="big", clip=1e3)
    u = np.random.default_rng(0).uniform(-50, 50, 24)
    assert np.isfinite(m.value(u)) and np.all(np.isfinite(m.gradient(u)))


def test_sensitivity_formula():
    s = multiclass_sensitivity(64, 10, 1.0, 1000)
    assert s.l2 == pytest.approx(math.sqrt(2) / 1000)
    assert s.l1 == pytest.approx(2 * 8 / 1000)
    # the box refinement only lowers the bound, and matters only for small bound * C * sqrt(d)
    tight = multiclass_sensitivity(4, 3, 0.5, 10, bound=0.1)
    p_min = 1 / (1 + 2 * math.exp(2 * 0.1 * 2 * 0.5))
    assert tight.l2 == pytest.approx(math.sqrt(2) * (1 - p_min) * 0.5 / 10)
    assert multiclass_sensitivity(64, 10, 1.0, 1000, bound=1.5).l2 <= s.l2


@pytest.mark.parametrize("bound", [0.3, 20.0])
def test_sensitivity_empirical(bound):
    """sup over neighbouring data sets (add one sample, ||x|| <= C) and theta in W stays below Delta."""
    d, K, C, total = 5, 3, 2.0, 30
    rng = np.random.default_rng(4)
    sens = multiclass_sensitivity(d, K, C, total, bound=bound)
    worst2 = worst1 = 0.0
    for trial in range(300):
        X, y = _data(n=20, d=d, K=K, seed=trial, C=C)
        x_new = rng.normal(size=d)
        x_new *= C / np.linalg.norm(x_new) * (1.0 if trial % 2 else rng.uniform(0.5, 1.0))
        if trial % 3 == 0:
            x_new = np.full(d, C / math.sqrt(d)) * rng.choice([-1, 1], d)  # maximises ||x||_1
        y_new = rng.integers(0, K)
        X2, y2 = np.vstack([X, x_new]), np.append(y, y_new)
        for _ in range(5):
            theta = rng.uniform(-bound, bound, (d, K))
            if rng.random() < 0.5:  # a corner of the box pushing the true class down
                theta = bound * np.sign(np.outer(x_new, np.where(np.arange(K) == y_new, -1.0, 1.0)))
            diff = (softmax_gradient(theta, X2, np.eye(K)[y2], total)
                    - softmax_gradient(theta, X, np.eye(K)[y], total))
            worst2 = max(worst2, np.linalg.norm(diff))
            worst1 = max(worst1, np.abs(diff).sum())
    assert worst2 <= sens.l2 * (1 + 1e-12) and worst1 <= sens.l1 * (1 + 1e-12)
    if bound > 1:  # a wide box lets the bound be nearly attained: it is not vacuous
        assert worst2 >= 0.9 * sens.l2 and worst1 >= 0.9 * sens.l1


def test_multiclass_agents_clip_and_total():
    X, y = _data(n=30, C=5.0)
    parts = [(X[:10], y[:10]), (X[10:], y[10:])]
    agents, models = multiclass_agents(parts, classes=4, bound=1.0, clip=0.5)
    assert [a.name for a in agents] == ["agent0", "agent1"]
    assert all(m.total == 30 for m in models)
    assert max(np.linalg.norm(m.X, axis=1).max() for m in models) <= 0.5 + 1e-12
    pooled = MulticlassLogistic.pooled(models)
    u = np.random.default_rng(0).uniform(-1, 1, 24)
    assert pooled.value(u) == pytest.approx(sum(m.value(u) for m in models))
    np.testing.assert_allclose(pooled.gradient(u), sum(m.gradient(u) for m in models))
    # without a public total the normaliser is the data's own count, sound only under replace-one (2x)
    assert agents[0].sensitivity.l2 == pytest.approx(multiclass_sensitivity(6, 4, 0.5, 30, bound=1.0).l2 * 2)
    assert agents[0].sensitivity.relation.startswith("replace one sample")
    public, _ = multiclass_agents(parts, classes=4, bound=1.0, clip=0.5, total=40)
    assert public[0].sensitivity.l2 == pytest.approx(multiclass_sensitivity(6, 4, 0.5, 40, bound=1.0).l2)
    with pytest.raises(ValueError, match="n = len"):
        MulticlassLogistic(X[:0], y[:0], classes=4, total=1, bound=1.0, name="empty", clip=1.0)
