"""Binary l2-regularised logistic ERM agents."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp_models.logistic.baselines import central_reference, pooled_baseline
from cvxdp_models.logistic.binary import BinaryLogistic, binary_agents, binary_sensitivity
from cvxdp_models.logistic.data import load_sklearn, split_iid


@pytest.fixture(scope="module")
def cancer():
    X, y = load_sklearn("breast_cancer")
    parts = split_iid(X, y, 3, np.random.default_rng(0))
    return X, y, parts


def test_declaration_value_gradient(cancer):
    _, _, parts = cancer
    agents, models = binary_agents(parts, reg=0.01, bound=5.0)
    agents[0].check()
    m = models[0]
    assert cp.Problem(cp.Minimize(m.objective), m.constraints).is_dpp()
    u = np.random.default_rng(0).uniform(-5, 5, 30)
    m.f.value = u
    assert m.value(u) == pytest.approx(m.objective.value, rel=1e-12)
    assert agents[0].objective_value(u) == pytest.approx(cvxdp.Agent.objective_value(agents[0], u), rel=1e-12)
    h = 1e-6
    fd = np.array([(m.value(u + h * e) - m.value(u - h * e)) / (2 * h) for e in np.eye(30)])
    np.testing.assert_allclose(m.gradient(u), fd, rtol=1e-6, atol=1e-10)
    slow = cvxdp.Agent("slow", m.objective, m.constraints, shared={"theta": m.f})
    np.testing.assert_allclose(agents[0].grad(u), slow.grad(u), rtol=1e-6, atol=1e-12)


def test_sum_of_agents_is_the_pooled_erm(cancer):
    X, y, parts = cancer
    _, models = binary_agents(parts, reg=0.01)
    u = np.random.default_rng(1).normal(size=30)
    pooled = np.mean(np.logaddexp(0, -y * (X @ u))) + 0.005 * u @ u
    assert sum(m.value(u) for m in models) == pytest.approx(pooled)
    assert models[0].constraints == []


def test_sensitivity():
    s = binary_sensitivity(30, 1.0, 500)
    assert s.l2 == pytest.approx(1 / 500) and s.l1 == pytest.approx(math.sqrt(30) / 500)
    assert binary_sensitivity(30, 1.0, 500, bound=0.01).l2 < s.l2
    # empirical: gradient change of adding one unit-norm sample, reg and N fixed
    rng = np.random.default_rng(2)
    X = rng.normal(size=(10, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.choice([-1.0, 1.0], 10)
    worst = 0.0
    for _ in range(200):
        x = rng.normal(size=4)
        x /= np.linalg.norm(x)
        yy = rng.choice([-1.0, 1.0])
        a = BinaryLogistic(X, y, total=20, reg=0.1, reg_weight=0.5, bound=3.0, name="a", clip=1.0)
        b = BinaryLogistic(np.vstack([X, x]), np.append(y, yy), total=20, reg=0.1, reg_weight=0.5, bound=3.0,
                           name="b", clip=1.0)
        u = rng.uniform(-3, 3, 4)
        worst = max(worst, np.linalg.norm(a.gradient(u) - b.gradient(u)))
    assert worst <= binary_sensitivity(4, 1.0, 20, bound=3.0).l2


def test_labels_checked():
    with pytest.raises(ValueError, match="-1 or \\+1"):
        BinaryLogistic(np.ones((2, 2)), np.array([0, 1]), total=2, reg=0.1, reg_weight=1.0, bound=None, name="x",
                       clip=1.0)


def test_central_and_sklearn_agree_without_box(cancer):
    """Unconstrained, the ERM optimum equals scikit-learn's fit with C = 1/(N reg), no intercept."""
    X, y, parts = cancer
    reg = 1e-2
    _, models = binary_agents(parts, reg=reg)
    pooled = BinaryLogistic.pooled(models)
    ref = central_reference(pooled, solver="CLARABEL")
    lbfgsb = central_reference(pooled, solver="L-BFGS-B", tol=1e-10)
    assert ref["objective"] == pytest.approx(lbfgsb["objective"], rel=1e-6)
    from cvxdp_models.logistic.baselines import fit_logreg

    clf = fit_logreg(X, y, C=1 / (len(y) * reg))
    assert pooled.value(clf.coef_.ravel()) == pytest.approx(ref["objective"], rel=1e-5)
    base = pooled_baseline(X, y, X, y, C=1 / (len(y) * reg))
    assert base["test_error"] == pytest.approx(np.mean(pooled.predict(ref["solution"], X) != y), abs=0.01)


def test_per_example_gradients_clip_each_loss_and_add_the_regulariser_once(cancer):
    _, _, parts = cancer
    _, models = binary_agents(parts, reg=0.1, bound=5.0, total=sum(len(y) for _, y in parts))
    m = models[0]
    u = np.random.default_rng(2).uniform(-1, 1, 30)
    pe = m.per_example()
    assert pe.public() == {"total": m.total, "relation": "add_remove"}
    # every record in, nothing clipped: the model's gradient (losses over N, plus the regulariser's share)
    full = pe.gradient(u, np.random.default_rng(0), 1.0, 1e9)
    np.testing.assert_allclose(full, m.gradient(u), rtol=1e-10, atol=1e-13)
    # each per-example loss gradient is clipped to the norm asked for; the regulariser is not part of the sum
    for i in range(5):
        g = m.clipped_sum(u, np.array([i]), 1e-3)
        assert np.linalg.norm(g) <= 1e-3 * (1 + 1e-12)
    # an empty sample leaves the public part alone
    empty = cvxdp.PerExample(records=3, total=3, clipped_sum=m.clipped_sum, public_gradient=m.regularizer_gradient)
    np.testing.assert_array_equal(empty.gradient(u, np.random.default_rng(0), 1e-12, 1.0), m.regularizer_gradient(u))


def test_a_subsampled_private_run_on_binary_agents(cancer):
    import dp_accounting

    _, _, parts = cancer
    agents, _ = binary_agents(parts, reg=0.01, bound=1.0, total=sum(len(y) for _, y in parts))
    privacy = cvxdp.privacy.make_mechanism("ObjG", epsilon=1.0, delta=1e-5, calibrate="total", sampling_rate=0.2,
                                           clip_norm=1.0)
    res = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=0.1, eta=1.0, rounds=3), privacy=privacy, seed=0)
    assert res.privacy["worst"]["pld"] <= 1.0 * (1 + 1e-9)
    for agent in agents:
        (event, _, count), = res.ledger.entries(agent.name)
        assert isinstance(event, dp_accounting.PoissonSampledDpEvent) and event.sampling_probability == 0.2
        assert count == 3
    assert np.all(np.isfinite(res.solution["theta"]))


def test_public_gradient_must_be_callable():
    with pytest.raises(cvxdp.errors.InvalidParameterError, match="'public_gradient' parameter of PerExample"):
        cvxdp.PerExample(records=3, total=3, clipped_sum=lambda u, i, c: u, public_gradient=1.0)
