"""cvxdp.check_declaration (issue 38): probes an agent's declared gradient, lipschitz and Sensitivity on random
points of W and neighbouring data sets, and reports every violation, naming the agent and the value."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import InvalidParameterError

rng = np.random.default_rng(0)
A = rng.normal(size=(30, 3))
A /= np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1.0)  # rows ||a_i||_2 <= 1
B = rng.normal(size=30)


def make_agent(b, *, lipschitz=1.0, l2=1 / 30, l1=3 ** 0.5 / 30, gradient=None):
    """docs/own-agent.md, example 1: least squares on a box, replace one b_i within 1."""
    x = cp.Variable(3)
    return cvxdp.Agent(
        "hospital0", objective=cp.sum_squares(cp.Parameter((30, 3), value=A) @ x - cp.Parameter(30, value=b)) / 60,
        constraints=[x <= 1, x >= -1], shared={"x": x},
        gradient=gradient or (lambda u: A.T @ (A @ u - b) / 30), lipschitz=lipschitz,
        sensitivity=cvxdp.Sensitivity(l1=l1, l2=l2, relation="replace one b_i within 1"))


def neighbour(generator):
    b = B.copy()
    b[generator.integers(30)] += generator.uniform(-1, 1)
    return make_agent(b)


def test_the_documented_derivation_passes():
    report = cvxdp.check_declaration(make_agent(B), neighbour, count=8)
    assert report.ok, str(report)
    assert 0 < report.curvature <= 1.0 and 0 < report.sensitivity_l2 <= 1 / 30
    assert report.gradient_error < 1e-6 and "no violation found" in str(report)


def test_each_wrong_declaration_is_reported_naming_the_agent_and_the_value():
    curvature = cvxdp.check_declaration(make_agent(B, lipschitz=1e-3))
    assert not curvature.ok
    assert any("Agent 'hospital0': declared lipschitz = 0.001" in v for v in curvature.violations)
    assert curvature.sensitivity_l2 is None  # no neighbours: the sensitivity is not probed

    sensitivity = cvxdp.check_declaration(make_agent(B, l2=1e-4), [neighbour(np.random.default_rng(k))
                                                                   for k in range(5)])
    (message,) = sensitivity.violations
    assert "declared Sensitivity l2 = 0.0001" in message and "'replace one b_i within 1'" in message
    l1 = cvxdp.check_declaration(make_agent(B, l1=1e-4), [neighbour(np.random.default_rng(k)) for k in range(5)])
    (message,) = l1.violations  # the l1 bound (Laplace's) is probed as well
    assert "declared Sensitivity l1 = 0.0001" in message and l1.sensitivity_l1 > 1e-4

    gradient = cvxdp.check_declaration(make_agent(B, gradient=lambda u: A.T @ (A @ u - B) / 60))  # off by 2
    assert any("declared gradient differs from finite differences" in v for v in gradient.violations)


def test_its_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match="'neighbours' parameter of check_declaration"):
        cvxdp.check_declaration(make_agent(B), ["not an agent"])
    with pytest.raises(InvalidParameterError, match="'points' parameter of check_declaration"):
        cvxdp.check_declaration(make_agent(B), points=1)
