"""Rule by rule, the compiled numpy gradient (cvxdp/model/gradients.py) against two independent references: CVXPY's
own ``Expression.grad`` (to 1e-9, as in test_gradients.py) and central finite differences of CVXPY's value.

The compiled gradient is called directly (``agent.compiled_gradient(u)``), not only through ``Agent.grad``: the agent
falls back to CVXPY when the compiled gradient raises :class:`OutsideDomain`, which would hide a rule that gives up
where it should not. Each objective is called three times per point, so the quadratic path (``H u + c``, built on
the second call with the same parameter values) is checked as well as the tape. The objectives are small and cover
each rule: broadcasting (``broadcast_to``/``promote`` adjoints), parameters of every value type, negation and
division by data, reshapes in both orders, transposes, stacks, every orientation of ``@`` (dense and sparse), sums
along axes, indexing, and the smooth atoms (whose forward values are also read by a parent atom above them); then
the classification quadratic/tape, the size limits of the quadratic path and the objectives left to CVXPY.
"""

from __future__ import annotations

import logging

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

import cvxdp
from cvxdp.errors import DeclarationError
from cvxdp.model.gradients import OutsideDomain, compile_gradient

TOL = {"rtol": 1e-9, "atol": 1e-9}
#: central differences with step 1e-6 on objectives of O(1)-O(10) values: truncation ~h^2 |f'''| ~ 1e-11 and
#: rounding ~1e-16 |f| / h ~ 1e-9, so 1e-6 leaves a wide margin and still catches any wrong rule (errors O(0.1))
FD_STEP = 1e-6
FD_TOL = {"rtol": 1e-6, "atol": 1e-6}


def make_agent(objective: cp.Expression, name: str = "rules") -> cvxdp.Agent:
    variables = sorted(objective.variables(), key=lambda v: v.id)
    return cvxdp.Agent(name, objective, [], shared={f"v{k}": v for k, v in enumerate(variables)})


def set_point(layout, u: np.ndarray) -> None:
    for var, value in layout.split(u).items():
        var.value = value


def reference(objective: cp.Expression, layout, u: np.ndarray) -> np.ndarray:
    """CVXPY's ``Expression.grad`` of ``objective`` at ``u`` in ``layout``'s flat order."""
    set_point(layout, u)
    grads = objective.grad
    out = np.zeros(layout.size)
    for var, off in zip(layout.variables, layout.offsets):
        if var not in grads:
            continue
        gv = grads[var]
        assert gv is not None, "CVXPY does not differentiate at this point"
        gv = gv.toarray() if hasattr(gv, "toarray") else np.asarray(gv)
        out[off:off + var.size] = np.ravel(gv)
    return out


def finite_differences(objective: cp.Expression, layout, u: np.ndarray) -> np.ndarray:
    out = np.zeros(layout.size)
    for j in range(layout.size):
        step = np.zeros(layout.size)
        step[j] = FD_STEP
        set_point(layout, u + step)
        up = float(objective.value)
        set_point(layout, u - step)
        down = float(objective.value)
        out[j] = (up - down) / (2 * FD_STEP)
    return out


def points(size: int, seed: int = 0, low: float = -1.0, high: float = 1.0, count: int = 2) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, size) for _ in range(count)]


def check(agent: cvxdp.Agent, kind: str, pts, *, fd: bool = True) -> None:
    """The compiled gradient's kind, and its values (three calls per point, called directly and through the agent)
    equal to CVXPY's and to finite differences."""
    compiled = agent.compiled_gradient
    assert compiled is not None
    assert compiled.kind == kind
    for u in pts:
        ref = reference(agent.objective, agent.layout, u)
        if fd:
            np.testing.assert_allclose(finite_differences(agent.objective, agent.layout, u), ref, **FD_TOL)
        for _ in range(3):
            np.testing.assert_allclose(compiled(u), ref, **TOL)
        np.testing.assert_allclose(agent.grad(u), ref, **TOL)


RNG = np.random.default_rng(20)
C23, W23 = RNG.normal(size=(2, 3)), RNG.uniform(0.5, 2.0, (2, 3))
C32, W32 = RNG.normal(size=(3, 2)), RNG.uniform(0.5, 2.0, (3, 2))
C243 = RNG.normal(size=(2, 4, 3))
C3, W3 = RNG.normal(size=3), RNG.uniform(0.5, 2.0, 3)
A43, A33 = RNG.normal(size=(4, 3)), RNG.normal(size=(3, 3))
S43 = sp.random(4, 3, density=0.6, random_state=1, format="csc")
S34 = sp.random(3, 4, density=0.6, random_state=2, format="csc")
S33 = sp.csc_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [4.0, 0.0, -1.0]]))


def _battery():
    """name -> (objective, expected kind, (low, high) of the points or None for (-1, 1)), built afresh per test.

    CVXPY broadcasts a size-1 axis of a matrix operand by a product with ones (``R + C`` is ``ones @ R + C``): the
    ``broadcast_to`` adjoint of a size-1 axis is reached by an explicit ``cp.broadcast_to`` only."""
    x, y, z = cp.Variable(3, name="x"), cp.Variable(3, name="y"), cp.Variable(4, name="z")
    t = cp.Variable(name="t")
    X, Y = cp.Variable((2, 3), name="X"), cp.Variable((3, 2), name="Y")
    R, K = cp.Variable((1, 3), name="R"), cp.Variable((2, 1), name="K")
    V, T3 = cp.Variable((4, 1), name="V"), cp.Variable((2, 3, 4), name="T3")
    Q = cp.Variable((3, 3), name="Q")
    p3 = cp.Parameter(3, value=RNG.uniform(0.5, 2.0, 3))
    P43 = cp.Parameter((4, 3), value=RNG.normal(size=(4, 3)))
    s = cp.Parameter(value=1.7)
    sym = A33 @ A33.T + np.eye(3)
    sym[0, 2] = sym[2, 0] = sym[0, 2] + 1.5  # symmetric, with distinct off-diagonal entries
    return {
        # ---- broadcasting: the adjoint of broadcast_to/promote summed back to the operand's shape
        "vector_to_matrix": (cp.sum_squares(x + C23) + cp.sum(cp.multiply(W23, x)), "quadratic", None),
        "vector_to_3d": (cp.sum_squares(x + C243) + cp.sum(cp.multiply(x, C243)), "quadratic", None),
        "row_to_matrix": (cp.sum_squares(R + C23) + cp.sum(cp.multiply(W23, R)), "quadratic", None),
        "column_to_matrix": (cp.sum_squares(K - C23) + cp.sum(cp.multiply(K, W23)), "quadratic", None),
        "column_to_3d": (cp.sum_squares(V + C243) + cp.sum(cp.multiply(V, C243)), "quadratic", None),
        "broadcast_to": (cp.sum_squares(cp.broadcast_to(R, (4, 3)) - 1.0)
                         + cp.sum(cp.multiply(cp.broadcast_to(K, (2, 5)), np.arange(10.0).reshape(2, 5))),
                         "quadratic", None),
        "broadcast_to_pairs": (cp.sum_squares(cp.broadcast_to(R, (2, 3)) - C23)
                               + cp.sum(cp.multiply(cp.broadcast_to(K, (2, 2)), np.array([[1.0, -2.0], [3.0, 0.5]])))
                               + cp.sum(cp.multiply(cp.broadcast_to(V, (2, 4, 2)), C243[:, :, :2])),
                               "quadratic", None),
        "scalar_to_vector": (cp.sum_squares(t + C3) + cp.sum(cp.multiply(t, W3)) + cp.sum(cp.promote(t, (3,))),
                             "quadratic", None),
        "scalar_to_matrix": (cp.sum_squares(t - C23) + cp.sum(cp.multiply(W23, t)), "quadratic", None),
        "scalar_parameter_times": (cp.sum_squares(s * x - C3) + cp.sum(s * y), "quadratic", None),
        "broadcast_tape": (cp.sum(cp.logistic(cp.multiply(x, W23) + R)) + cp.sum(cp.exp(t + C3) / 4),
                           "tape", None),
        # ---- negation and division by data
        "negation": (cp.sum_squares(-x + C3) + cp.sum(-cp.multiply(W3, x)), "quadratic", None),
        "divide_by_vector": (cp.sum_squares(x / W3 - 1.0) + cp.sum(y / W3), "quadratic", None),
        "divide_by_scalar": (cp.sum_squares(X / 2.5) + cp.sum(X / -4.0), "quadratic", None),
        "scalar_divided_by_vector": (cp.sum_squares(t / W3 - C3), "quadratic", None),
        "divide_by_parameter": (cp.sum(cp.logistic(x / p3)) + cp.sum_squares(y / s), "tape", None),
        # ---- reshape (both orders) and transposes
        "reshape_F": (cp.sum_squares(cp.reshape(X, (3, 2), order="F") - C32)
                      + cp.sum(cp.multiply(W32, cp.reshape(X, (3, 2), order="F"))), "quadratic", None),
        "reshape_C": (cp.sum_squares(cp.reshape(X, (3, 2), order="C") - C32)
                      + cp.sum(cp.multiply(W32, cp.reshape(X, (3, 2), order="C")))
                      + cp.sum(cp.multiply(np.arange(6.0), cp.vec(X, order="C"))), "quadratic", None),
        "reshape_tape": (cp.sum(cp.exp(cp.reshape(X, (6,), order="C") / 3)) + cp.sum(cp.multiply(
            np.arange(6.0), cp.reshape(X, (6,), order="F"))), "tape", None),
        "transpose": (cp.sum(cp.multiply(W32, X.T)) + cp.sum_squares(X.T - C32), "quadratic", None),
        "transpose_axes": (cp.sum(cp.multiply(cp.transpose(T3, axes=(1, 2, 0)), np.arange(24.0).reshape(3, 4, 2)))
                           + cp.sum_squares(cp.transpose(T3, axes=(2, 0, 1))), "quadratic", None),
        # ---- stacks, with variables in some pieces only
        "hstack_matrices": (cp.sum_squares(cp.hstack([X, C23, K, np.ones((2, 1))]) - 0.5)
                            + cp.sum(cp.multiply(np.arange(16.0).reshape(2, 8), cp.hstack([X, C23, K, K]))),
                            "quadratic", None),
        "hstack_single": (cp.sum_squares(cp.hstack([X])) + cp.sum(cp.multiply(W23, cp.hstack([X]))), "quadratic",
                          None),
        "hstack_vectors": (cp.sum(cp.multiply(np.arange(10.0), cp.hstack([C3, x, np.ones(1), y])))
                           + cp.sum_squares(cp.hstack([x, y])), "quadratic", None),
        "vstack_vectors": (cp.sum(cp.multiply(np.arange(9.0).reshape(3, 3), cp.vstack([x, C3, y])))
                           + cp.sum_squares(cp.vstack([x, y]) - 1.0), "quadratic", None),
        "vstack_mixed": (cp.sum(cp.multiply(np.arange(12.0).reshape(4, 3), cp.vstack([X, C3, x])))
                         + cp.sum_squares(cp.vstack([C23, X, x]) - 0.5), "quadratic", None),
        "stack_tape": (cp.sum(cp.logistic(cp.hstack([X, K]))) + cp.sum(cp.exp(cp.vstack([x, y]) / 2)), "tape",
                       None),
        # ---- @ in every orientation
        "A@x": (cp.sum_squares(A43 @ x - 1.0) + cp.sum(cp.multiply(np.arange(4.0), A43 @ x)), "quadratic", None),
        "P@x": (cp.sum(cp.logistic(P43 @ x)), "tape", None),
        "A@X": (cp.sum_squares(A33 @ Y) + cp.sum(cp.multiply(C32, A33 @ Y)), "quadratic", None),
        "c@X": (cp.sum_squares(W23[:, 0] @ X - C3) + cp.sum(W3 @ Y), "quadratic", None),
        "x@C": (cp.sum_squares(x @ A33 - C3) + cp.sum(x @ C32), "quadratic", None),
        "X@c": (cp.sum_squares(X @ W3 - 1.0) + cp.sum(cp.multiply(np.arange(2.0), X @ C3)), "quadratic", None),
        "c@x": (cp.square(W3 @ x - 1.0) + C3 @ y, "quadratic", None),
        "x@c": (cp.square(x @ W3 + 0.5) + y @ C3, "quadratic", None),
        "X@B": (cp.sum_squares(X @ A33) + cp.sum(cp.multiply(C23, X @ A33)), "quadratic", None),
        "X@Y": (cp.sum(cp.multiply(np.arange(4.0).reshape(2, 2), X @ Y)), "quadratic", None),
        "X@y": (cp.sum(cp.multiply(np.array([1.0, -2.0]), X @ y)), "quadratic", None),
        "x@y": (x @ y + cp.sum_squares(x), "quadratic", None),
        "x@Y": (cp.sum(cp.multiply(np.array([0.5, -1.5]), x @ Y)), "quadratic", None),
        "S@x": (cp.sum_squares(S43 @ x - 1.0) + cp.sum(cp.logistic(S43 @ x)), "tape", None),
        "S@X": (cp.sum_squares(S33 @ Y - C32) + cp.sum(cp.multiply(W32, S33 @ Y)), "quadratic", None),
        "X@S": (cp.sum_squares(X @ S34) + cp.sum(cp.multiply(np.arange(8.0).reshape(2, 4), X @ S34)), "quadratic",
                None),
        "x@S": (cp.sum_squares(x @ S34 - 1.0) + cp.sum(cp.exp(x @ S34 / 3)), "tape", None),
        # ---- sparse data outside @ (read dense)
        "sparse_elementwise": (cp.sum_squares(Q - S33) + cp.sum(cp.multiply(S33, Q)) + cp.sum_squares(
            cp.multiply(S33, Q)) + cp.sum(cp.multiply(Q, cp.Constant(S33) + 1.0)), "quadratic", None),
        "sparse_weights": (cp.sum(cp.multiply(S33, Q)) + cp.sum_squares(x), "quadratic", None),
        # ---- sums along axes
        "sum_axes": (cp.sum_squares(cp.sum(X, axis=0) - C3) + cp.sum_squares(cp.sum(X, axis=1) - 1.0)
                     + cp.sum(cp.multiply(np.array([[1.0], [-3.0]]), cp.sum(X, axis=1, keepdims=True)))
                     + cp.sum(cp.multiply(W3, cp.sum(X, axis=0, keepdims=True)))
                     + cp.sum(cp.sum(T3, axis=1) * 2.0) + cp.sum_squares(cp.sum(T3, axis=2))
                     + cp.sum_squares(cp.sum(X, keepdims=True) - 1.0), "quadratic", None),
        # ---- indexing, slicing, fancy and boolean indices (with repeats)
        "index": (cp.sum_squares(x[1:] - 1.0) + 3 * x[0] + cp.sum_squares(X[1, :] - C3) + cp.sum(X[:, 2] * 2.0)
                  + cp.sum(cp.multiply(np.arange(3.0), x[::-1])) + X[0, 1] * 5.0 + cp.sum(T3[1, :, 2:]),
                  "quadratic", None),
        "fancy_index": (cp.sum_squares(X[[0, 1, 0], [2, 2, 2]] - C3) + cp.sum(cp.multiply(W23, X[:, [2, 0, 2]]))
                        + cp.sum_squares(x[np.array([True, False, True])] - 2.0)
                        + cp.sum(cp.multiply(np.arange(1.0, 4.0), X[np.array([[True, False, True],
                                                                             [False, True, False]])])),
                        "quadratic", None),
        # ---- smooth atoms
        "quad_over_lin": (cp.quad_over_lin(x, 2.5) + cp.quad_over_lin(X - C23, s) + cp.quad_over_lin(y, 0.5),
                          "quadratic", None),
        "quad_over_lin_read": (cp.exp(cp.quad_over_lin(x, 2.5) / 4) + cp.logistic(cp.quad_over_lin(y, 0.5)),
                               "tape", None),
        "quad_form": (cp.quad_form(x, sym) + cp.quad_form(y - C3, cp.Parameter((3, 3), PSD=True, value=sym))
                      - 2 * x[0], "quadratic", None),
        "quad_form_read": (cp.exp(cp.quad_form(x, sym) / 10), "tape", None),
        "power_polynomial": (cp.sum(cp.power(x, 0)) + cp.sum(cp.power(y, 2)) + cp.sum(cp.multiply(W3, y))
                             + cp.sum(cp.square(x - C3)), "quadratic", None),
        "power_positive": (cp.sum(cp.power(x, 3)) + cp.sum(cp.power(x, 4)) + cp.sum(-cp.power(y, 0.5))
                           + cp.sum(cp.power(y, 1.5)) + cp.sum(cp.power(x, -1)) + cp.sum(cp.multiply(W3, cp.power(y, 1))),
                           "tape", (0.2, 1.5)),
        "power_read": (cp.exp(cp.sum(cp.power(y, 1.5)) / 3) + cp.exp(cp.sum(cp.square(x)) / 3), "tape", (0.2, 1.5)),
        "logistic": (cp.sum(cp.logistic(cp.multiply(W3, x) - 0.3)), "tape", (-2.0, 2.0)),
        "logistic_read": (cp.sum(cp.exp(cp.logistic(x) / 2)) + cp.logistic(cp.sum(cp.logistic(y))), "tape",
                          (-2.0, 2.0)),
        "exp_top": (cp.exp(W3 @ x / 4), "tape", None),
        "exp": (cp.sum(cp.exp(x / 2)) + cp.sum(cp.exp(cp.exp(y) / 4)), "tape", None),
        "log_sum_exp": (cp.log_sum_exp(A43 @ x + 1.0) + cp.log_sum_exp(X), "tape", None),
        "log_sum_exp_read": (cp.exp(cp.log_sum_exp(x) / 3), "tape", None),
        "huber": (cp.sum(cp.huber(2 * x, 0.5)) + cp.sum(cp.huber(X, 1.0)) + cp.sum(cp.huber(y - 0.5, 2.0)),
                  "tape", (-2.0, 2.0)),
        "huber_read": (cp.sum(cp.exp(cp.huber(x, 0.5) / 4)) + cp.exp(cp.sum(cp.huber(y, 1.0)) / 6)
                       + cp.logistic(cp.sum(cp.huber(3 * X, 1.5)) / 5), "tape", (-2.0, 2.0)),
        "unit_interval": (cp.sum_squares(z) - cp.sum(cp.power(z, 0.5)), "tape", (0.05, 1.0)),
    }


BATTERY = sorted(_battery())


@pytest.mark.parametrize("name", BATTERY)
def test_each_rule_against_cvxpy_and_finite_differences(name):
    objective, kind, domain = _battery()[name]
    agent = make_agent(objective, name)
    low, high = domain if domain is not None else (-1.0, 1.0)
    check(agent, kind, points(agent.layout.size, seed=len(name), low=low, high=high))


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("value", [3, 2.5, np.float64(-1.25), [1, 2, 3], np.array([1, -1, 2], dtype=np.int64)])
def test_parameters_of_every_value_type(value):
    """Python scalars, numpy scalars, lists and integer arrays (CVXPY converts some of them, not all) are read as
    floats; the quadratic path rebuilds ``H u + c`` when the value changes."""
    x = cp.Variable(3, name="x")
    shape = np.shape(value) if np.ndim(value) else ()
    p = cp.Parameter(shape, value=value)
    q = cp.Parameter(value=2)
    agent = make_agent(cp.sum_squares(cp.multiply(p, x) - q) + cp.sum(cp.multiply(p, x)) / q)
    check(agent, "quadratic", points(3, seed=1))
    p.value = np.multiply(value, 2) if np.ndim(value) else 2 * value
    q.value = 3
    check(agent, "quadratic", points(3, seed=2))
    tape = make_agent(cp.sum(cp.logistic(cp.multiply(p, x) / q)))
    check(tape, "tape", points(3, seed=3))


def test_a_parameter_without_a_value_is_outside_the_domain():
    x = cp.Variable(3, name="x")
    p = cp.Parameter(3)
    for objective, kind in [(cp.sum_squares(x - p), "quadratic"), (cp.sum(cp.logistic(cp.multiply(p, x))), "tape")]:
        agent = make_agent(objective)
        assert agent.compiled_gradient.kind == kind
        with pytest.raises(OutsideDomain):
            agent.compiled_gradient(np.zeros(3))
        with pytest.raises(DeclarationError, match="CVXPY cannot differentiate"):
            agent.grad(np.zeros(3))


def test_a_sparse_parameter_value_defers_to_cvxpy():
    Q, x = cp.Variable((3, 3), name="Q"), cp.Variable(3, name="x")
    q = cp.Parameter((3, 3))
    for objective, kind in [(cp.sum_squares(cp.multiply(q, Q)) + cp.sum_squares(q @ x - 1.0), "quadratic"),
                            (cp.sum_squares(cp.multiply(q, Q)) + cp.sum(cp.logistic(q @ x)), "tape")]:
        q.value = np.ones((3, 3))
        agent = make_agent(objective)
        assert agent.compiled_gradient.kind == kind
        q.value = S33
        for u in points(agent.layout.size, seed=4):
            with pytest.raises(OutsideDomain):
                agent.compiled_gradient(u)
            np.testing.assert_allclose(agent.grad(u), reference(objective, agent.layout, u), **TOL)
        q.value = S33.toarray()  # dense again: the compiled gradient answers
        check(agent, kind, points(agent.layout.size, seed=5))


# ---------------------------------------------------------------- domains


def test_quad_over_lin_with_a_parameter_denominator():
    x = cp.Variable(3, name="x")
    y = cp.Parameter(value=2.0)
    agent = make_agent(cp.quad_over_lin(x - C3, y))
    for value in (2.0, 1.0, 0.5, 0.25):
        y.value = value
        check(agent, "quadratic", points(3, seed=6))
    for value in (0.0, -0.5, -1.0, -3.0):
        y.value = value
        with pytest.raises(OutsideDomain, match="non-positive denominator"):
            agent.compiled_gradient(np.full(3, 0.5))
        with pytest.raises(DeclarationError, match="CVXPY cannot differentiate"):
            agent.grad(np.full(3, 0.5))


def test_powers_inside_and_outside_their_domain():
    x = cp.Variable(3, name="x")
    square = make_agent(cp.sum(cp.power(x, 2)) + cp.sum(cp.square(x - 1.0)) + cp.sum(cp.power(x, 4)) / 4)
    check(square, "tape", [np.array([-1.0, -0.5, 0.25]), np.array([-2.0, 0.0, 1.0]), np.array([0.0, 0.5, 1.0])])
    zero = make_agent(cp.sum(cp.power(x, 0)) + cp.sum(cp.multiply(W3, x)))
    for u in (np.array([-1.0, 0.0, 2.0]), np.array([-0.5, -0.25, -3.0])):
        for _ in range(3):
            np.testing.assert_allclose(zero.compiled_gradient(u), W3, rtol=1e-12, atol=0)
    root = make_agent(cp.sum(cp.power(x, 1.5)))
    check(root, "tape", [np.array([0.25, 1.0, 0.5]), np.array([1.0, 1.0, 0.01])])
    for u in (np.array([0.0, 1.0, 2.0]), np.array([0.5, -0.25, 2.0]), np.array([1.0, 2.0, 0.0])):
        with pytest.raises(OutsideDomain):
            root.compiled_gradient(u)


def test_a_parameter_exponent():
    x = cp.Variable(3, name="x")
    p = cp.Parameter(value=3.0)
    agent = make_agent(cp.sum(cp.power(x, p)) + cp.sum_squares(x))
    for value in (3.0, 2.5, 2.0, 1.0, 1.5):
        p.value = value
        check(agent, "tape", points(3, seed=7, low=0.2, high=1.5))
    p.value = None
    with pytest.raises(OutsideDomain, match="unset parameter exponent"):
        agent.compiled_gradient(np.full(3, 0.5))


# ---------------------------------------------------------------- classification


def cubic(x):
    return cp.multiply(x, cp.multiply(x, x))


@pytest.mark.parametrize("case", [
    "linear", "quadratic_over_data", "power_zero", "power_one", "power_three", "power_fractional", "power_parameter",
    "quartic_sum_squares", "quartic_square_square", "quartic_quad_form", "quad_over_lin_data", "quad_over_lin_param",
    "cubic", "bilinear", "constant_exp", "constant_exp_squared", "constant_exp_times_cubic", "constant_exp_times",
    "exp", "quadratic_plus_constant_data"])
def test_polynomial_degree_classifies_quadratic_and_tape(case):
    """Degree at most two in the variables: the quadratic path; higher or not a polynomial: the tape. Either way
    the gradient is right (a wrong classification of a higher-degree objective would make ``H u + c`` wrong)."""
    x, y = cp.Variable(3, name="x"), cp.Variable(3, name="y")
    p = cp.Parameter(value=2.5)
    one = cp.exp(cp.power(x[0], 0))  # the constant e, written with the variable (degree 0)
    objective, kind = {
        "linear": (W3 @ x + C3 @ y + 1.0, "quadratic"),
        "quadratic_over_data": (cp.sum_squares(x - C3) / 4 + cp.sum(y) / 2, "quadratic"),
        "power_zero": (cp.sum(cp.power(x, 0)) + cp.sum_squares(y), "quadratic"),
        # CVXPY keeps p = 1.0, not a power of two: its gradient (and the rule) is undefined at x <= 0, where the
        # quadratic path's H (read at 0 and the unit vectors) would fall back to CVXPY on every call
        "power_one": (cp.sum(cp.multiply(W3, cp.power(x, 1))) + cp.sum_squares(y), "tape"),
        "power_three": (cp.sum(cp.power(x, 3)) + cp.sum_squares(y), "tape"),
        "power_fractional": (cp.sum(cp.power(x, 1.5)) + cp.sum(cp.power(y, 0.5)), "tape"),
        "power_parameter": (cp.sum(cp.power(x, p)) + cp.sum_squares(y), "tape"),
        "quartic_sum_squares": (cp.sum_squares(cp.square(x)) + cp.sum(y), "tape"),
        "quartic_square_square": (cp.sum(cp.square(cp.square(x))) + cp.sum(y), "tape"),
        "quartic_quad_form": (cp.quad_form(cp.square(x), np.eye(3) * 2.0) + cp.sum(y), "tape"),
        "quad_over_lin_data": (cp.quad_over_lin(x + y, 3.0), "quadratic"),
        "quad_over_lin_param": (cp.quad_over_lin(x - y, p), "quadratic"),
        "cubic": (cp.sum(cubic(x)) + cp.sum(y), "tape"),
        "bilinear": (x @ y + cp.sum(cp.multiply(x, y)), "quadratic"),
        "constant_exp": (cp.sum_squares(x) + one + cp.sum(y), "quadratic"),
        "constant_exp_squared": (cp.sum_squares(x) + cp.square(cp.square(one)) + cp.sum(y), "quadratic"),
        "constant_exp_times_cubic": (cp.sum(cp.multiply(one, cubic(x))) + cp.sum(y), "tape"),
        "constant_exp_times": (cp.sum_squares(cp.multiply(one, x)) + cp.sum(y), "quadratic"),
        "exp": (cp.sum(cp.exp(x)) + cp.sum(y), "tape"),
        "quadratic_plus_constant_data": (cp.sum_squares(x) + cp.sum(cp.exp(cp.Constant(C3))) + cp.sum(y),
                                         "quadratic"),
    }[case]
    agent = make_agent(objective, case)
    pts = points(6, seed=8, low=0.2, high=1.5)
    if case == "power_one":
        # CVXPY (and the tape after it) does not differentiate power(x, 1) at x <= 0, and H u + c is extracted from
        # tape passes at 0 and the unit vectors: only the classification and the agent's gradient are checked
        assert agent.compiled_gradient.kind == kind
        for u in pts:
            ref = reference(objective, agent.layout, u)
            np.testing.assert_allclose(finite_differences(objective, agent.layout, u), ref, **FD_TOL)
            for _ in range(3):
                np.testing.assert_allclose(agent.grad(u), ref, **TOL)
        return
    check(agent, kind, pts)


def test_the_quadratic_path_size_limits():
    """The quadratic path up to 400 local coordinates and 100 000 parameter entries, the tape above."""
    for n, kind in ((400, "quadratic"), (401, "tape")):
        x = cp.Variable(n, name="x")
        c = np.linspace(-1.0, 1.0, n)
        agent = make_agent(cp.sum_squares(x - c) / 2)
        assert agent.compiled_gradient.kind == kind
        u = np.linspace(0.0, 2.0, n)
        for _ in range(3):
            np.testing.assert_allclose(agent.compiled_gradient(u), u - c, **TOL)
    for extra, kind in ((0, "quadratic"), (1, "tape")):
        x = cp.Variable(2, name="x")
        A = cp.Parameter((50_000, 2), value=np.full((50_000, 2), 1e-3))
        objective = cp.sum_squares(A @ x) + cp.sum(cp.Parameter(extra, value=np.ones(extra))) if extra else \
            cp.sum_squares(A @ x)
        agent = make_agent(objective)
        assert agent.compiled_gradient.kind == kind
        u = np.array([1.0, -2.0])
        Av = A.value
        for _ in range(3):
            np.testing.assert_allclose(agent.compiled_gradient(u), 2 * Av.T @ (Av @ u), **TOL)


# ---------------------------------------------------------------- left to CVXPY


def test_objectives_left_to_cvxpy(caplog):
    """Unsupported atoms and uses, constant objectives and expressions the compiler cannot read: None (the agent keeps
    CVXPY's gradient), with the reason logged."""
    x, t, w = cp.Variable(3, name="x"), cp.Variable(name="t"), cp.Variable(2, name="w")
    X = cp.Variable((2, 3), name="X")
    layout = make_agent(cp.sum_squares(x) + cp.square(t) + cp.sum_squares(X)).layout
    cases = [
        (cp.sum(cp.abs(x)) + cp.sum_squares(x), "abs"),
        (cp.quad_over_lin(x, t), "quad_over_lin with variables beyond its first argument"),
        (cp.sum_squares(x) / t, "a division by an expression of the variables"),
        (cp.sum_squares(cp.vstack([x[0], t])), "a stack of scalars"),
        (cp.sum(cp.quad_over_lin(X, 1.0, axis=0)), "quad_over_lin along an axis"),
        (cp.sum(cp.log_sum_exp(X, axis=1)), "log_sum_exp along an axis"),
        (cp.Constant(2.0) + cp.sum(cp.Parameter(2, value=np.ones(2))), "the objective is constant"),
        (cp.sum_squares(x) + cp.sum_squares(w), "KeyError"),  # w is not in the layout
    ]
    for objective, reason in cases:
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="cvxdp.model.gradients"):
            assert compile_gradient(objective, layout, name="left") is None
        assert any(reason in r.getMessage() and "'left'" in r.getMessage() for r in caplog.records), reason
    agent = make_agent(cp.quad_over_lin(x, t) + cp.sum(x))
    assert agent.compiled_gradient is None
    u = np.array([0.5, -1.0, 2.0, 3.0])
    np.testing.assert_allclose(agent.grad(u), reference(agent.objective, agent.layout, u), **TOL)


# ---------------------------------------------------------------- the forward pass


def test_deep_shared_subexpressions_used_twice():
    """The forward pass computes only the values the reverse rules read, and what those values need: a deep
    subexpression shared by several atoms (read by some, not by others) is computed once and right."""
    x, X = cp.Variable(3, name="x"), cp.Variable((2, 3), name="X")
    e = A43 @ (x - C3) + 0.5
    f = cp.multiply(W3, cp.sum(X, axis=0)) + e[1:]
    g = cp.exp(f / 4)
    objective = (cp.exp(cp.sum(g) / 10 + cp.log_sum_exp(e) / 5) + cp.sum(cp.logistic(e)) + cp.sum_squares(e) / 8
                 + cp.sum(g) + cp.sum(cp.huber(f, 0.7)) + cp.quad_over_lin(f - 1.0, 3.0))
    agent = make_agent(objective)
    check(agent, "tape", points(agent.layout.size, seed=9))


def test_a_batched_matrix_product_is_left_to_cvxpy():
    """N-D ``@`` (CVXPY broadcasts the leading axes): the rules are for vectors and matrices, so the agent keeps
    CVXPY's gradient (it used to be compiled, and its first call raised a ValueError from a reshape)."""
    x, Y = cp.Variable(4, name="x"), cp.Variable((2, 3, 4), name="Y")
    A3 = np.arange(24.0).reshape(2, 3, 4) / 10
    C = np.arange(8.0).reshape(4, 2) / 5
    for objective in (cp.sum_squares(A3 @ x - 1.0), cp.sum(cp.square(Y @ C)) + cp.sum_squares(x)):
        agent = cvxdp.Agent("batched", objective, [x >= -5], shared={"x": x})
        assert agent.compiled_gradient is None
        u = np.linspace(-1.0, 1.0, agent.layout.size)
        np.testing.assert_allclose(agent.grad(u), reference(objective, agent.layout, u), rtol=1e-9, atol=1e-9)


def test_complex_data_is_never_compiled():
    """numpy's float view of a complex parameter drops its imaginary part (a gradient of [2, 4] for [4, 5]): the
    compiler leaves complex data to CVXPY."""
    x = cp.Variable(2, name="x")
    p = cp.Parameter(2, complex=True, value=np.array([1 + 1j, 2 - 1j]))
    agent = cvxdp.Agent("complex", cp.sum_squares(cp.multiply(p, x)), [x >= -5], shared={"x": x})
    assert agent.compiled_gradient is None
    c = cvxdp.Agent("constant", cp.sum_squares(cp.multiply(np.array([1 + 1j, 2.0]), x)), [x >= -5], shared={"x": x})
    assert c.compiled_gradient is None
