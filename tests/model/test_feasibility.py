"""The post-run check of the consensus solution (cvxdp.model.central) on the agents' compiled sets."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import SolverFailedError
from cvxdp.model import solution_violation
from cvxdp.model.central import _agent_target


def _agents() -> list[cvxdp.Agent]:
    """Two conic sets (one tied to a coordinate it does not share) and a box."""
    x = cp.Variable(4, name="x")
    ball = cvxdp.Agent("ball", cp.sum_squares(x), [cp.norm(x, 2) <= 1.5, x[3] == x[0] + 0.9, cp.sum(x[:2]) <= 0.3],
                       shared={"a": x[:2], "b": x[2:3]})
    y = cp.Variable(3, name="y")
    box = cvxdp.Agent("box", cp.sum_squares(y), [y <= 0.4, y >= -0.2], shared={"a": y[:2], "b": y[2:]})
    z = cp.Variable(3, name="z")
    twice = cvxdp.Agent("twice", cp.sum_squares(z), [cp.norm(z, 2) <= 0.5, z[0] - z[2] >= 0.1],
                        shared={"a": z[1:], "b": z[:1]})  # reversed order of the keys' coordinates
    for agent in (ball, box, twice):
        agent.check()
    return [ball, box, twice]


def _reference(agent: cvxdp.Agent, solution: dict) -> float:
    """The distance ``min ||u[idx] - target||`` over the agent's set, as a separate CVXPY problem."""
    idx, target = _agent_target(agent, solution)
    u = agent.u_expression()
    cp.Problem(cp.Minimize(cp.sum_squares(u[idx] - target)), agent.constraints).solve(solver=cp.CLARABEL)
    return float(np.linalg.norm(u.value[idx] - target))


def test_distances_match_a_separate_projection_problem_and_leave_the_variables_alone():
    agents = _agents()
    rng = np.random.default_rng(0)
    for trial in range(5):
        solution = {"a": rng.normal(scale=0.8, size=2), "b": rng.normal(scale=0.8, size=1)}
        for agent in agents:
            agent.layout.variables[0].value = np.full(agent.layout.variables[0].shape, 7.0)
        with pytest.warns(UserWarning, match="outside the feasible set"):
            out = solution_violation(agents, solution)
        assert all(np.all(agent.layout.variables[0].value == 7.0) for agent in agents)
        for agent in agents:
            assert out["per_agent"][agent.name] == pytest.approx(_reference(agent, solution), abs=1e-6), trial
    inside = {"a": np.array([0.1, 0.1]), "b": np.array([0.1])}
    assert solution_violation(agents[1:2], inside, warn=False)["max"] == 0.0


def test_a_projection_no_solver_answers_is_nan_not_an_error(monkeypatch):
    import cvxdp.model.local_solver as local_solver

    def refuse(self, v, c, *, round=None):
        raise SolverFailedError("every solver failed", agent=self.agent.name, round=None, status="x")

    monkeypatch.setattr(local_solver.ConicProjection, "project", refuse)
    agents = _agents()
    out = solution_violation(agents, {"a": np.array([2.0, 2.0]), "b": np.array([2.0])}, warn=False)
    assert math.isnan(out["per_agent"]["ball"]) and math.isnan(out["per_agent"]["twice"])
    assert out["agent"] == "box" and out["max"] > 1.0  # the box is a clip: it still answers


def test_a_declared_box_is_answered_by_its_clip_without_evaluating_the_constraints(monkeypatch):
    """10,000 box agents: the end-of-run check took 4.0 s through CVXPY's constraint values, 3.1 s by the clip."""
    x = cp.Variable(3)
    agent = cvxdp.Agent("box", cp.sum_squares(x), [x <= 1, x >= -1], shared={"x": x})

    def never(u):
        raise AssertionError("a declared box needs no constraint evaluation")

    monkeypatch.setattr(agent, "violation", never)
    inside = solution_violation([agent], {"x": np.array([0.5, -0.5, 1.0])}, {"box": np.zeros(3)}, warn=False)
    outside = solution_violation([agent], {"x": np.array([0.5, -3.0, 2.0])}, {"box": np.zeros(3)}, warn=False)
    assert inside["max"] == 0.0
    assert outside["max"] == pytest.approx(math.hypot(2.0, 1.0))
