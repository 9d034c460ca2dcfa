"""The fused one-pass value and gradient of the multiclass model, and its float32 variant."""

from __future__ import annotations

import numpy as np
import pytest

import cvxdp
from cvxdp_models.logistic import multiclass as mc
from cvxdp_models.logistic.data import clip_rows, split_iid
from cvxdp_models.logistic.multiclass import (
    MulticlassLogistic,
    multiclass_agents,
    softmax_cost,
    softmax_gradient,
    value_and_gradient,
)


def _data(n=300, d=12, K=5, seed=0):
    rng = np.random.default_rng(seed)
    X = clip_rows(rng.normal(size=(n, d)), 1.0)
    W = rng.normal(size=(d, K)) * 4.0
    y = np.argmax(X @ W + rng.gumbel(size=(n, K)), axis=1)
    return X, y


@pytest.mark.parametrize("rows", [None, 1, 7, 64, 300, 1000])
def test_fused_pass_matches_the_two_products(rows):
    X, y = _data()
    theta = np.random.default_rng(1).uniform(-2, 2, (12, 5))
    value, grad = value_and_gradient(theta, X, y, 700, block_rows=rows)
    assert value == pytest.approx(softmax_cost(theta, X, y, 700), rel=1e-12)
    np.testing.assert_allclose(grad, softmax_gradient(theta, X, mc.one_hot(y, 5), 700), rtol=1e-11, atol=1e-15)


@pytest.mark.parametrize("rows", [1, 7, 64, 299, 300, 1000])
def test_precomputed_label_positions_give_the_same_bits(rows):
    """The model computes the labels' positions in the blocks once; the pass returns the same numbers as when it
    computes them block by block (and the model's value and gradient are those of the plain call)."""
    X, y = _data()
    theta = np.random.default_rng(9).uniform(-2, 2, (12, 5))
    positions = mc.label_positions(y, 5, rows)
    assert positions.min() >= 0 and positions.max() < rows * 5
    for Xd in (X, X.astype(np.float32)):
        v0, g0 = value_and_gradient(theta, Xd, y, 700, block_rows=rows)
        v1, g1 = value_and_gradient(theta, Xd, y, 700, block_rows=rows, positions=positions)
        assert v1 == v0 and np.array_equal(g1, g0)
    m = MulticlassLogistic(X, y, classes=5, total=700, bound=1.0, name="a", clip=1.0)
    u = theta.ravel(order="F")
    v, g = value_and_gradient(theta, m.X, m.y, 700, row_l1_bound=m.row_l1_bound)
    assert m.value(u) == v and np.array_equal(m.gradient(u), g.ravel(order="F"))


@pytest.mark.parametrize("scale", [0.5, 3.0, 50.0, 500.0])  # logits below and above the shift-free bound
def test_unshifted_softmax_matches_the_shifted_one(scale):
    """With a bound on the rows' l1 norms, small logits skip the max shift; large ones still take it."""
    X, y = _data()
    theta = np.random.default_rng(8).uniform(-scale, scale, (12, 5))
    l1 = float(np.abs(X).sum(axis=1).max())
    for dtype, rel in ((np.float64, 1e-12), (np.float32, 1e-5)):
        Xd = X.astype(dtype)
        v0, g0 = value_and_gradient(theta, Xd, y, 300)  # always shifted
        v1, g1 = value_and_gradient(theta, Xd, y, 300, row_l1_bound=l1)
        assert np.isfinite(v1) and np.all(np.isfinite(g1))
        assert v1 == pytest.approx(v0, rel=rel)
        np.testing.assert_allclose(g1, g0, rtol=0, atol=rel * np.max(np.abs(g0)))
    v64 = value_and_gradient(theta, X, y, 300, row_l1_bound=l1)[0]
    assert v64 == pytest.approx(softmax_cost(theta, X, y, 300), rel=1e-12)


def test_model_uses_the_public_l1_bound_only_for_clipped_rows():
    X, y = _data()  # rows clipped to norm 1
    m = MulticlassLogistic(X, y, classes=5, total=300, bound=1.0, name="a", clip=1.0)
    assert m.row_l1_bound == pytest.approx(np.sqrt(12))  # sqrt(d) C: public, not computed from the rows
    assert MulticlassLogistic(X * 2, y, classes=5, total=300, bound=1.0, name="b", clip=1.0).row_l1_bound is None


def test_float32_value_and_gradient_within_single_precision():
    X, y = _data()
    theta = np.random.default_rng(2).uniform(-1, 1, (12, 5))
    v64, g64 = value_and_gradient(theta, X, y, 300)
    v32, g32 = value_and_gradient(theta, X.astype(np.float32), y, 300)
    assert g32.dtype == np.float64  # accumulated in float64
    assert v32 == pytest.approx(v64, rel=1e-6)
    assert np.max(np.abs(g32 - g64)) <= 1e-6 * np.max(np.abs(g64))


def test_float32_large_logits_stay_finite():
    X, y = _data()
    theta = np.random.default_rng(3).uniform(-500, 500, (12, 5))
    v64, g64 = value_and_gradient(theta, X * 10, y, 300)
    v32, g32 = value_and_gradient(theta, (X * 10).astype(np.float32), y, 300)
    assert np.isfinite(v32) and np.all(np.isfinite(g32))
    assert v32 == pytest.approx(v64, rel=1e-5)
    np.testing.assert_allclose(g32, g64, atol=1e-5 * np.max(np.abs(g64)))


def test_one_pass_serves_the_value_and_the_next_gradient(monkeypatch):
    X, y = _data()
    m = MulticlassLogistic(X, y, classes=5, total=300, bound=1.0, name="a", clip=1.0)
    calls = []
    real = mc.value_and_gradient
    monkeypatch.setattr(mc, "value_and_gradient", lambda *a, **k: calls.append(1) or real(*a, **k))
    u = np.random.default_rng(4).uniform(-1, 1, 60)
    v = m.value(u)  # end of a round: the objective metric
    g = m.gradient(u)  # start of the next: the same point
    assert len(calls) == 1
    g[:] = 0.0  # callers get their own copy
    assert np.any(m.gradient(u) != 0) and m.value(u) == v and len(calls) == 1
    m.gradient(u + 1e-3)
    assert len(calls) == 2


def test_bad_dtype_names_the_agent_and_the_parameter():
    X, y = _data()
    with pytest.raises(ValueError, match=r"'dtype' parameter of MulticlassLogistic \(agent 'a'\).*Got 'float16'"):
        MulticlassLogistic(X, y, classes=5, total=300, bound=1.0, name="a", clip=1.0, dtype="float16")


def test_float32_run_tracks_float64_iterates_and_accuracy():
    """The stated tolerance of ``dtype="float32"``: over 50 non-private rounds the consensus stays within
    1e-5 (relative, max norm) of the float64 run's, and the test predictions are the same."""
    X, y = _data(n=2400, d=20, K=4, seed=5)
    X_test, y_test = X[2000:], y[2000:]
    parts = split_iid(X[:2000], y[:2000], 4, np.random.default_rng(0))
    algo = cvxdp.LinearizedADMM(rho=0.5, eta=2.0, rounds=50)
    runs = {}
    for dtype in ("float64", "float32"):
        agents, models = multiclass_agents(parts, classes=4, bound=1.0, clip=1.0, total=2000, dtype=dtype)
        assert models[0].X.dtype == np.dtype(dtype)
        result = cvxdp.solve(agents, algorithm=algo, privacy=None, seed=0)
        runs[dtype] = (np.asarray(result.solution["theta"]), models[0])
    (w64, m64), (w32, _) = runs["float64"], runs["float32"]
    assert np.max(np.abs(w64)) > 0.1  # it moved
    assert np.max(np.abs(w32 - w64)) <= 1e-5 * np.max(np.abs(w64))
    u64, u32 = w64.ravel(order="F"), w32.ravel(order="F")
    assert np.array_equal(m64.predict(u32, X_test), m64.predict(u64, X_test))
    assert np.mean(m64.predict(u64, X_test) == y_test) > 0.5  # a real classifier, not chance (0.25)


def test_float32_gradient_is_float64_so_noise_keeps_its_resolution():
    """The mechanisms add noise to the gradient (ObjPert) or to the projected point (OutPert), both float64:
    a float32 model must not hand back a float32 gradient, on whose grid small noise would be rounded away."""
    X, y = _data()
    m = MulticlassLogistic(X, y, classes=5, total=300, bound=1.0, name="a", clip=1.0, dtype="float32")
    u = np.random.default_rng(6).uniform(-1, 1, 60)
    g = m.agent().grad(u)
    assert g.dtype == np.float64
    assert np.any(g.astype(np.float32).astype(np.float64) != g)  # summed in float64, not a float32 result
    assert m.value(u) == pytest.approx(MulticlassLogistic(X, y, classes=5, total=300, bound=1.0, name="b",
                                                          clip=1.0).value(u), rel=1e-6)


def test_the_cache_check_is_array_equal():
    """The model's check whether a point is the cached one answers as np.array_equal (a sample first)."""
    rng = np.random.default_rng(0)
    u = rng.normal(size=1000)
    for changed in (None, 0, 96, 97, 500, 999):
        v = u.copy()
        if changed is not None:
            v[changed] += 1e-12
        assert mc._same_point(v, u) is np.array_equal(v, u)
    zeros = np.zeros(300)
    assert mc._same_point(-zeros, zeros) and not mc._same_point(np.zeros(299), zeros)
