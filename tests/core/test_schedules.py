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
