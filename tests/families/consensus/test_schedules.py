"""Schedules for rho and eta: values, monotonicity, validation."""

from __future__ import annotations

import math

import pytest

from cvxdp.errors import InvalidParameterError
from cvxdp.schedules import (
    Constant,
    GeometricCapped,
    LinearCapped,
    ResidualBalancing,
    StepSchedule,
    as_schedule,
    describe,
)


def test_values():
    assert [LinearCapped(1.0, 0.5, 2.0)(t) for t in (1, 2, 3, 4)] == [1.0, 1.5, 2.0, 2.0]
    assert [GeometricCapped(1.0, 2.0, 5.0)(t) for t in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    step = StepSchedule(c1=2.0, c2=1.0, period=10, epsilon=0.5)
    assert step(9) == pytest.approx(2.0 + 2.0)
    assert step(10) == pytest.approx(2.0 * 1.2 + 2.0)
    assert Constant(3.0)(100) == 3.0


def test_residual_balancing_only_grows_and_is_capped():
    rb = ResidualBalancing(start=1.0, mu=10.0, tau=2.0, cap=4.0)
    assert rb(1) == 1.0
    assert rb(2, previous=1.0, primal=100.0, dual=1.0) == 2.0
    assert rb(3, previous=2.0, primal=1.0, dual=1.0) == 2.0
    assert rb(4, previous=4.0, primal=100.0, dual=1.0) == 4.0


@pytest.mark.parametrize("schedule", [LinearCapped(1.0, 0.3, 5.0), GeometricCapped(0.5, 1.1, 3.0),
                                      StepSchedule(1.0, 0.1, 7, 1.0, cap=4.0)])
def test_non_decreasing_and_bounded(schedule):
    values = [schedule(t) for t in range(1, 200)]
    assert all(b >= a for a, b in zip(values, values[1:]))
    assert max(values) < math.inf


def test_round_trip_and_errors():
    sched = GeometricCapped(1.0, 1.5, 10.0)
    assert as_schedule(describe(sched), "eta", "LinearizedADMM") == sched
    assert as_schedule(2.0, "rho", "X") == Constant(2.0)
    with pytest.raises(InvalidParameterError, match="'factor' parameter of GeometricCapped"):
        GeometricCapped(1.0, 0.5, 2.0)
    with pytest.raises(InvalidParameterError, match="'eta' parameter"):
        as_schedule(ResidualBalancing(1.0), "eta", "LinearizedADMM")
    with pytest.raises(InvalidParameterError, match="kind in"):
        as_schedule({"kind": "cosine"}, "rho", "LinearizedADMM")


def test_callable_schedule_is_accepted_and_checked_every_round():
    import numpy as np

    import cvxdp

    sched = as_schedule(lambda t: 0.5 * math.sqrt(t), "eta", "LinearizedADMM")
    assert sched(4) == pytest.approx(1.0)
    assert describe(sched)["kind"] == "callable"
    bad = as_schedule(lambda t: 1.0 if t < 3 else -1.0, "eta", "LinearizedADMM")
    assert bad(2) == 1.0
    with pytest.raises(InvalidParameterError, match=r"'eta' parameter of LinearizedADMM.*round 3"):
        bad(3)
    with pytest.raises(InvalidParameterError, match="round 1"):
        as_schedule(lambda t: float("nan"), "rho", "ADMM")(1)
    # the authors' eta ~ sqrt(t) and a callable rho run through solve
    import cvxpy as cp

    agents = []
    for p, c in enumerate((-1.0, 2.0)):
        x = cp.Variable(2)
        agents.append(cvxdp.Agent(f"a{p}", cp.sum_squares(x - c), [x <= 1.5, x >= -1.5], shared={"x": x}))
    res = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=lambda t: 1.0, eta=lambda t: 2.0 + 0.01 * t,
                                                             rounds=200), seed=0)
    assert np.allclose(res.solution["x"], 0.5, atol=1e-3)
    assert res.history["eta"].iloc[-1] == pytest.approx(2.0 + 0.01 * len(res.history))
    with pytest.raises(InvalidParameterError, match=r"'eta' parameter of LinearizedADMM.*round 5"):
        cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(eta=lambda t: 2.0 if t < 5 else 0.0, rounds=10), seed=0)
