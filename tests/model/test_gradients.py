"""The compiled numpy gradient of an agent without ``gradient=`` (cvxdp/model/gradients.py) equals CVXPY's
``Expression.grad`` to 1e-9, on the quadratic path (``H u + c``) and on the reverse-mode tape, also after the data
parameters change; unsupported atoms keep CVXPY's gradient."""

from __future__ import annotations

import logging
import pickle

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

import cvxdp
from cvxdp.errors import DeclarationError


def cvxpy_gradient(agent: cvxdp.Agent, u: np.ndarray) -> np.ndarray:
    """CVXPY's own ``Expression.grad`` of the objective at ``u`` in the agent's flat layout."""
    layout = agent.layout
    for var, value in layout.split(u).items():
        var.value = value
    grads = agent.objective.grad
    out = np.zeros(layout.size)
    for var, off in zip(layout.variables, layout.offsets):
        if var not in grads:  # a variable of the constraints only
            continue
        gv = grads[var]
        gv = gv.toarray() if hasattr(gv, "toarray") else np.asarray(gv)
        out[off:off + var.size] = np.ravel(gv)
    return out


def assert_matches(agent: cvxdp.Agent, points, kind: str | None) -> None:
    """Three calls per point (the quadratic path builds ``H`` on the second call with the same data)."""
    compiled = agent.compiled_gradient
    assert (None if compiled is None else compiled.kind) == kind
    for u in points:
        ref = cvxpy_gradient(agent, u)
        for _ in range(3):
            np.testing.assert_allclose(agent.grad(u), ref, rtol=1e-9, atol=1e-9)


def points(agent: cvxdp.Agent, seed: int = 0, low: float = -1.0, high: float = 1.0, count: int = 3):
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, agent.layout.size) for _ in range(count)]


def readme_agent(rng: np.random.Generator):
    """The README's custom model, declared without ``gradient=``."""
    A = rng.normal(size=(30, 3))
    b = rng.normal(size=30)
    x = cp.Variable(3)
    Ap, bp = cp.Parameter((30, 3), value=A), cp.Parameter(30, value=b)
    agent = cvxdp.Agent("hospital0", cp.sum_squares(Ap @ x - bp) / 60, [x <= 1, x >= -1], shared={"x": x})
    return agent, Ap, bp


def test_readme_model_quadratic_path_and_parameter_changes():
    rng = np.random.default_rng(1)
    agent, Ap, bp = readme_agent(rng)
    assert_matches(agent, points(agent), "quadratic")
    u = points(agent, seed=5)[0]
    Ap.value = rng.normal(size=(30, 3))  # assigned
    np.testing.assert_allclose(agent.grad(u), cvxpy_gradient(agent, u), rtol=1e-9, atol=1e-9)
    assert_matches(agent, points(agent, seed=2), "quadratic")
    bp.value[:] += 3.0  # changed in place
    assert_matches(agent, points(agent, seed=3), "quadratic")
    A, b = Ap.value, bp.value
    np.testing.assert_allclose(agent.grad(u), A.T @ (A @ u - b) / 30, rtol=1e-9, atol=1e-9)


def dispatch_agent(rng: np.random.Generator, regions: int = 3, hours: int = 6):
    """A dispatch-like quadratic: generation per region and hour with ramp limits, exports shared."""
    g, e = cp.Variable((regions, hours)), cp.Variable(hours)
    a = cp.Parameter((regions, hours), nonneg=True, value=rng.uniform(0.5, 1.5, (regions, hours)))
    b = cp.Parameter((regions, hours), value=rng.uniform(1.0, 3.0, (regions, hours)))
    load = cp.Parameter(hours, value=rng.uniform(1.0, 2.0, hours))
    objective = (cp.sum(cp.multiply(a, cp.square(g)) + cp.multiply(b, g))
                 + 10.0 * cp.sum_squares(cp.sum(g, axis=0) - load - e))
    constraints = [g >= 0, g <= 2, cp.abs(g[:, 1:] - g[:, :-1]) <= 0.3, e <= 1, e >= -1]
    return cvxdp.Agent("region", objective, constraints, shared={"e": e}), (a, b, load)


def test_dispatch_with_ramp_limits():
    rng = np.random.default_rng(2)
    agent, (a, b, load) = dispatch_agent(rng)
    assert_matches(agent, points(agent), "quadratic")
    load.value = rng.uniform(1.0, 2.0, load.shape)
    a.value = rng.uniform(0.1, 0.2, a.shape)
    assert_matches(agent, points(agent, seed=4), "quadratic")


def test_logistic_loss_with_changed_labels():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5))
    y = cp.Parameter(40, value=np.sign(rng.normal(size=40)))
    theta = cp.Variable(5)
    objective = cp.sum(cp.logistic(cp.multiply(-y, X @ theta))) / 40 + 0.01 / 2 * cp.sum_squares(theta)
    agent = cvxdp.Agent("bank", objective, [cp.abs(theta) <= 2], shared={"theta": theta})
    assert_matches(agent, points(agent, low=-2, high=2), "tape")
    y.value = -y.value
    assert_matches(agent, points(agent, seed=1, low=-2, high=2), "tape")


@pytest.mark.parametrize("kind", ["log_sum_exp", "huber", "exp_power", "quad_form", "matrix", "stack", "sparse"])
def test_objective_kinds(kind):
    rng = np.random.default_rng(4)
    x = cp.Variable(4)
    A = rng.normal(size=(6, 4))
    expected, low = "tape", -1.0
    shared = {"x": x}
    if kind == "log_sum_exp":
        objective = cp.log_sum_exp(A @ x + 1.0) + cp.sum_squares(x[:2])
    elif kind == "huber":
        M = cp.Parameter(nonneg=True, value=0.5)
        objective = cp.sum(cp.huber(A @ x - 0.3, M)) / 6
    elif kind == "exp_power":
        objective = cp.sum(cp.exp(x / 2)) + cp.sum(cp.power(x, 4)) + cp.sum(cp.power(x, 1.5)) + x[1] ** 2
        low = 0.1  # power(., 1.5) is differentiable on x > 0 only
    elif kind == "quad_form":
        P = A.T @ A
        objective = cp.quad_form(x, P) - 2 * x[0] + cp.sum(x[1:]) / 3
        expected = "quadratic"
    elif kind == "matrix":
        X = cp.Variable((2, 3))
        C = rng.normal(size=(3, 3))
        objective = (cp.sum_squares(X @ C) + cp.sum(cp.square(X.T - 1)) + cp.sum(cp.vec(X, order="F")[[0, 3, 5]])
                     + cp.sum_squares(cp.reshape(X, (3, 2), order="C")[1, :]) / 4
                     + cp.sum_squares(X @ np.arange(3.0)) + cp.sum(np.ones(2) @ X) + np.arange(2.0) @ X @ np.ones(3))
        shared = {"X": X}
        expected = "quadratic"
    elif kind == "stack":
        y = cp.Variable(2)
        objective = cp.sum_squares(cp.hstack([x, 2 * y])) + cp.sum_squares(cp.vstack([x[:2], y]) - 1) - cp.sum(-y)
        expected = "quadratic"
    else:  # a sparse data matrix
        S = sp.random(8, 4, density=0.5, random_state=0, format="csc")
        objective = cp.sum_squares(S @ x - 1.0) + cp.sum(cp.logistic(S @ x))
    agent = cvxdp.Agent(kind, objective, [x <= 2, x >= -2], shared=shared)
    assert_matches(agent, points(agent, low=low), expected)
    if kind == "huber":
        M.value = 2.0
        assert_matches(agent, points(agent, seed=9), expected)


@pytest.mark.parametrize("atom", ["abs", "norm1", "max", "pos", "norm2"])
def test_non_differentiable_atoms_keep_cvxpy_gradient(atom, caplog):
    rng = np.random.default_rng(5)
    x = cp.Variable(3)
    A = rng.normal(size=(5, 3))
    term = {"abs": cp.sum(cp.abs(A @ x)), "norm1": cp.norm1(x), "max": cp.max(A @ x), "pos": cp.sum(cp.pos(x)),
            "norm2": cp.norm(A @ x - 1, 2)}[atom]
    agent = cvxdp.Agent("nd", term + cp.sum_squares(x), [x <= 1, x >= -1], shared={"x": x})
    with caplog.at_level(logging.DEBUG, logger="cvxdp.model.gradients"):
        assert agent.compiled_gradient is None
        assert agent.compiled_gradient is None  # built (and logged) once
    assert sum("no compiled gradient" in r.getMessage() for r in caplog.records) == 1
    u = np.array([0.0, 0.5, -0.25])  # a kink of abs/pos/norm1 at 0: CVXPY's own subgradient
    np.testing.assert_array_equal(agent.grad(u), cvxpy_gradient(agent, u))


def test_outside_domain_defers_to_cvxpy():
    x = cp.Variable(2)
    agent = cvxdp.Agent("pw", cp.sum(cp.power(x, 1.5)), [x >= 0, x <= 1], shared={"x": x})
    assert agent.compiled_gradient is not None
    np.testing.assert_allclose(agent.grad(np.array([0.25, 1.0])), [0.75, 1.5], rtol=1e-12)
    with pytest.raises(DeclarationError, match="CVXPY cannot differentiate"):
        agent.grad(np.array([0.0, 1.0]))


def test_user_gradient_wins_and_pickling_rebuilds():
    rng = np.random.default_rng(6)
    agent, Ap, bp = readme_agent(rng)
    u = points(agent)[0]
    first = agent.grad(u)
    assert agent.compiled_gradient is not None
    clone = pickle.loads(pickle.dumps(agent))
    assert "compiled_gradient" not in clone.__dict__
    np.testing.assert_allclose(clone.grad(u), first, rtol=1e-12, atol=1e-12)
    calls = []
    agent.gradient = lambda v: calls.append(1) or np.zeros(3)
    np.testing.assert_array_equal(agent.grad(u), np.zeros(3))
    assert calls == [1]


@pytest.mark.parametrize("smooth", [True, False])
def test_a_variable_of_the_constraints_only_has_a_zero_gradient(smooth):
    x, s = cp.Variable(2), cp.Variable(2)
    objective = cp.sum_squares(x - 1) if smooth else cp.norm1(x - 1)
    agent = cvxdp.Agent("slack", objective, [x <= s, s <= 1, s >= -1], shared={"x": x})
    assert (agent.compiled_gradient is not None) == smooth
    u = np.array([0.5, -0.5, 0.2, 0.3])
    expected = np.array([-1.0, -3.0, 0.0, 0.0]) if smooth else np.array([-1.0, -1.0, 0.0, 0.0])
    np.testing.assert_allclose(agent.grad(u), expected, rtol=1e-12)


@pytest.mark.parametrize("kind", ["quadratic", "tape"])
def test_a_repeated_index_adds_the_adjoint_of_every_pick(kind):
    """``x[[0, 2, 0, 0, 3]]`` picks x[0] three times: its gradient is the sum of the three picks' adjoints (a
    scatter that overwrites instead of adding keeps one of them)."""
    x = cp.Variable(4)
    picks = x[[0, 2, 0, 0, 3]]
    c = np.array([1.0, -2.0, 0.5, 3.0, -1.0])
    objective = (cp.sum_squares(picks - c) if kind == "quadratic"
                 else cp.sum(cp.logistic(cp.multiply(c, picks))) + cp.sum(cp.exp(x[[1, 1, 2]])))
    agent = cvxdp.Agent("repeats", objective, [x <= 2, x >= -2], shared={"x": x})
    assert_matches(agent, points(agent, seed=7), kind)
    if kind == "quadratic":  # and by hand: 2 (x_i - c_k) summed over every pick k of i
        u = np.array([0.3, -0.4, 0.1, 0.2])
        np.testing.assert_allclose(agent.grad(u), [2 * (3 * 0.3 - 1.0 - 0.5 - 3.0), 0.0, 2 * (0.1 + 2.0),
                                                   2 * (0.2 + 1.0)], rtol=1e-12)


@pytest.mark.parametrize("kind", ["quadratic", "tape", "matrix"])
def test_a_product_with_the_variable_first(kind):
    """``multiply(x, c)`` (the variable on the left): the adjoint of the first operand reads the second."""
    rng = np.random.default_rng(8)
    x = cp.Variable(4)
    c = cp.Parameter(4, value=rng.uniform(0.5, 2.0, 4))
    shared = {"x": x}
    if kind == "quadratic":
        objective = cp.sum_squares(cp.multiply(x, c) - 1.0) + cp.sum(cp.multiply(x, 2.0 * c))
    elif kind == "tape":
        objective = cp.sum(cp.logistic(cp.multiply(x, c))) + cp.sum(cp.multiply(cp.exp(x), c))
    else:  # a matrix variable times a broadcast row of data
        X = cp.Variable((2, 3))
        row = rng.uniform(0.5, 2.0, (1, 3))
        objective = cp.sum_squares(cp.multiply(X, row)) + cp.sum(cp.multiply(X - 1.0, np.arange(1.0, 7.0).reshape(2, 3)))
        shared = {"X": X}
    agent = cvxdp.Agent(f"multiply-{kind}", objective, [], shared=shared)
    assert_matches(agent, points(agent, seed=3), "tape" if kind == "tape" else "quadratic")
    if kind == "quadratic":
        u = np.array([0.3, -0.4, 0.1, 0.2])
        cv = c.value
        np.testing.assert_allclose(agent.grad(u), 2 * cv * (cv * u - 1.0) + 2.0 * cv, rtol=1e-12)


def test_sums_along_either_axis_of_a_square_matrix():
    """``sum(X, axis=1)`` of a square X: the adjoint is expanded along the summed axis (along the wrong one the
    shapes still broadcast and the gradient is silently transposed)."""
    X = cp.Variable((3, 3), name="X")
    objective = (cp.sum_squares(cp.sum(X, axis=1) - np.arange(1.0, 4.0))
                 + cp.sum_squares(cp.sum(X, axis=0, keepdims=True) - 1.0) + cp.sum(cp.sum(X, axis=1) * 2.0))
    agent = cvxdp.Agent("axes", objective, [], shared={"X": X})
    assert_matches(agent, points(agent, seed=11), "quadratic")


def test_a_transpose_with_a_cyclic_permutation_of_three_axes():
    """The adjoint of ``transpose(Y, axes)`` transposes back by the inverse permutation (a cyclic permutation of three
    axes is not its own inverse)."""
    Y = cp.Variable((2, 3, 4), name="Y")
    C = np.arange(24.0).reshape(4, 2, 3)
    objective = cp.sum(cp.multiply(cp.transpose(Y, axes=(2, 0, 1)), C)) + cp.sum_squares(Y)
    agent = cvxdp.Agent("transpose3", objective, [], shared={"Y": Y})
    assert_matches(agent, points(agent, seed=12), "quadratic")


def test_a_square_data_matrix_times_the_variable():
    """``A @ x`` and ``A @ X`` with a square, non-symmetric A: the adjoint is ``A^T`` times the result's (a
    rectangular A would raise on the wrong orientation; a square one would silently use A)."""
    rng = np.random.default_rng(13)
    A = rng.normal(size=(4, 4))
    x, X = cp.Variable(4, name="x"), cp.Variable((4, 2), name="X")
    objective = (cp.sum_squares(A @ x - 1.0) + cp.sum(cp.logistic(A @ x)) + cp.sum_squares(A @ X)
                 + cp.sum(cp.multiply(np.arange(8.0).reshape(4, 2), A @ X)))
    agent = cvxdp.Agent("square", objective, [], shared={"x": x, "X": X})
    assert_matches(agent, points(agent, seed=14), "tape")
