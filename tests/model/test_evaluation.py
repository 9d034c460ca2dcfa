"""Per-round metrics from compiled maps equal CVXPY's own evaluation (cvxdp.model.evaluation)."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.model import compiled_metrics
from cvxdp.model.evaluation import Metrics
from cvxdp_models.toy import make_agents


def _instance(name: str, **model):
    from cvxdp.config.build import build_instance, load_case

    case = load_case(name)
    case.model.update(model)
    if model.get("objective") == "cost":
        case.model.pop("penalty", None)
    return build_instance(case)


def _points(agent: cvxdp.Agent, rng: np.random.Generator) -> list[np.ndarray]:
    """Random points (mostly infeasible) and a feasible one (the projection of 0)."""
    from cvxdp.model import compile_projection

    n = agent.layout.size
    feasible, _ = compile_projection(agent).project(np.zeros(n), np.ones(n))
    return [rng.normal(size=n), 5 * rng.normal(size=n), feasible, feasible + 1e-3 * rng.normal(size=n)]


def _same(metrics: Metrics, agent: cvxdp.Agent, u: np.ndarray) -> None:
    # the references: CVXPY's value of the objective and Agent.violation (max over con.violation())
    assert metrics.objective(u) == pytest.approx(cvxdp.Agent.objective_value(agent, u), rel=1e-9, abs=1e-12)
    assert metrics.violation(u) == pytest.approx(agent.violation(u), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("template", ["toy", "power-balance", "power-cost", "logistic"])
def test_metrics_equal_cvxpy_evaluation(template):
    if template == "toy":
        agents = make_agents(agents=3, seed=0)
    elif template == "power-balance":
        agents = _instance("case14_3zones").agents
    elif template == "power-cost":
        agents = _instance("case14_3zones", objective="cost").agents
    else:
        agents = _instance("digits_fl").agents[:2]
    rng = np.random.default_rng(11)
    for agent in agents:
        agent.check()
        metrics = compiled_metrics(agent)
        # nothing of these templates is left to CVXPY's tree walk
        assert metrics.tree_constraints == 0 and metrics.tree_terms == 0
        for u in _points(agent, rng):
            _same(metrics, agent, u)


def test_logistic_objective_without_value_callable_is_cvxpy_value():
    agent = _instance("digits_fl").agents[0]
    plain = cvxdp.Agent(agent.name, agent.objective, agent.constraints, shared=agent.shared)
    plain.check()
    metrics = Metrics(plain)
    assert metrics.tree_terms >= 1  # log_sum_exp stays CVXPY's
    u = np.random.default_rng(0).normal(size=plain.layout.size) * 0.1
    assert metrics.objective(u) == pytest.approx(plain.objective_value(u), rel=1e-12)
    assert metrics.objective(u) == pytest.approx(agent.value(u), rel=1e-9)


def test_every_constraint_kind_matches_cvxpy():
    x = cp.Variable((3, 2), name="X")
    y = cp.Variable(4, name="y")
    p = cp.Parameter(4, value=np.array([0.5, -1.0, 2.0, 0.0]))
    cons = [
        x >= -1, x[:, 0] <= p[:3], cp.sum(x) == 1.5, 2 * y[0] - y[1] <= 3,
        cp.SOC(y[0] + 2, y[1:]), cp.SOC(cp.sum(x, axis=0) + 3, x, axis=0),
        cp.norm(y - p, 2) <= 1.5, cp.sum_squares(y) + y[0] <= 4,
        cp.constraints.NonNeg(y + 1), _nonpos(y[:2] - 1), cp.constraints.Zero(y[3] - 0.25),
        cp.ExpCone(y[0], y[1] + 2, y[2] + 3),  # left to CVXPY
    ]
    objective = 0.5 * cp.sum_squares(x - 1) + 3 * cp.norm(y, 2) - p @ y / 4 + 2.0 - cp.sum(cp.square(y[:2])) * -1
    agent = cvxdp.Agent("kinds", objective, cons, shared={"y": y})
    agent.check()
    metrics = Metrics(agent)
    assert metrics.tree_constraints == 1 and metrics.tree_terms == 0
    rng = np.random.default_rng(5)
    for _ in range(20):
        _same(metrics, agent, rng.normal(size=agent.layout.size) * rng.choice([0.1, 1.0, 10.0]))


def _nonpos(expr):
    with warnings.catch_warnings():  # CVXPY deprecates building NonPos by hand; users still can
        warnings.simplefilter("ignore")
        return cp.constraints.NonPos(expr)


def test_metrics_follow_changed_data():
    x = cp.Variable(2)
    d = cp.Parameter(2, value=np.zeros(2))
    agent = cvxdp.Agent("a", cp.sum_squares(x - d), [x <= d + 1], shared={"x": x})
    u = np.array([2.0, 0.5])
    before = compiled_metrics(agent)
    assert before.objective(u) == pytest.approx(4.25) and before.violation(u) == pytest.approx(1.0)
    d.value = np.array([1.0, 1.0])
    after = compiled_metrics(agent)
    assert after is not before
    assert after.objective(u) == pytest.approx(1.25) and after.violation(u) == pytest.approx(0.0)


def test_metrics_that_cannot_be_built_fall_back_to_cvxpy(monkeypatch):
    from cvxdp.model import evaluation

    agent = make_agents(agents=2, seed=3)[1]
    agent.check()

    def broken(*args, **kwargs):
        raise RuntimeError("unforeseen expression")

    monkeypatch.setattr(evaluation, "affine_maps", broken)
    metrics = compiled_metrics(agent)
    assert isinstance(metrics, evaluation.TreeMetrics)
    u = np.random.default_rng(0).normal(size=agent.layout.size)
    assert metrics.objective(u) == agent.objective_value(u) and metrics.violation(u) == agent.violation(u)


def test_graph_nodes_and_sharing_parties_evaluate_without_tree_walks(monkeypatch):
    from cvxdp.model import LocalProx, VerticalParty

    x = cp.Variable(3)
    node = cvxdp.Agent("node", cp.sum_squares(x - 1) + cp.norm(x, 2), [cp.norm(x, 2) <= 1, x >= -0.5],
                       shared={"f": x})
    w = cp.Variable(2)
    party = VerticalParty("party", cp.Parameter((4, 2), value=np.arange(8.0).reshape(4, 2)), w,
                          regularizer=cp.sum_squares(w) + cp.norm(w, 1))
    rng = np.random.default_rng(5)
    points = [2 * rng.normal(size=3) for _ in range(3)]
    prox = LocalProx(node)
    expected = [(node.objective_value(f), node.violation(f)) for f in points]
    expected_party = [cvxdp.Agent.objective_value(party, u[:2]) for u in points]

    def walked(*args, **kwargs):
        raise AssertionError("a CVXPY expression tree was walked")

    monkeypatch.setattr(cvxdp.Agent, "objective_value", walked)
    monkeypatch.setattr(cvxdp.Agent, "violation", walked)
    for f, (value, violation) in zip(points, expected):
        assert prox.value(f) == pytest.approx(value, rel=1e-12)
        assert prox.violation(f) == pytest.approx(violation, rel=1e-12, abs=1e-14)
    for u, value in zip(points, expected_party):
        assert party.regularizer_value(u[:2]) == pytest.approx(value, rel=1e-12)


def test_consecutive_positions_are_read_through_a_slice_with_the_same_violation():
    """Runs of consecutive stacked positions are read as views; the violation is the gathered one's, bit for bit."""
    from cvxdp.model.evaluation import _selector

    assert _selector(np.arange(3, 9)) == slice(3, 9)
    for idx in (np.array([0, 2, 3]), np.array([4, 3]), np.zeros(0, dtype=int)):
        assert _selector(idx) is idx
    x = cp.Variable(6)
    agent = cvxdp.Agent("box", cp.sum_squares(x), [x <= 1.0, x >= -2.0, x[:2] == 0.5], shared={"x": x})
    metrics = Metrics(agent)
    v = metrics._violation
    assert isinstance(v._pos, slice) and isinstance(v._abs, slice)
    rng = np.random.default_rng(3)
    for u in (3 * rng.normal(size=6), np.array([0.5, 0.5, 0.0, 0.2, -1.0, 0.9])):
        values = metrics._maps.values(u)
        gathered = max(0.0, float(np.abs(values[v.abs_idx]).max()), float(values[v.pos_idx].max()))
        assert metrics.violation(u) == gathered
        assert metrics.violation(u) == pytest.approx(agent.violation(u), rel=1e-12, abs=1e-15)


def test_a_declared_box_violation_is_read_off_its_bounds_with_the_maps_numbers():
    x, y = cp.Variable(4), cp.Variable((2, 3))
    c = cp.Parameter(4, value=np.array([0.5, 1.0, 0.25, 2.0]))
    boxes = {
        "two sides": [x <= 1.0, x >= -2.0, y <= 3.0, -3.0 <= y],
        "a parameter, a slice, an equality, a bound twice": [x <= c, x[1:3] >= -0.25, y[0, :] == 0.5, y <= 2.0,
                                                               y <= 1.5],
        "one side only": [x >= 0.0],
    }
    rng = np.random.default_rng(0)
    for name, constraints in boxes.items():
        agent = cvxdp.Agent(name, cp.sum_squares(x) + cp.sum_squares(y), constraints, shared={"x": x})
        metrics = Metrics(agent)
        assert metrics._box is not None, name
        through_maps = Metrics(agent)
        through_maps._box = None
        for scale in (0.1, 1.0, 10.0):
            u = rng.normal(scale=scale, size=agent.layout.size)
            assert metrics.violation(u) == through_maps.violation(u), name  # the same number, bit for bit
            assert metrics.violation(u) == agent.violation(u), name
        inside = np.clip(np.zeros(agent.layout.size), *agent.box_bounds())
        assert metrics.violation(inside) == 0.0
    ball = cvxdp.Agent("ball", cp.sum_squares(x), [cp.norm(x) <= 1.0], shared={"x": x})
    assert Metrics(ball)._box is None


@pytest.mark.parametrize(("lo", "hi"), [(-0.2, 0.2), (0.0, np.inf), (-np.inf, 1.5), (-1e-300, 1e-300)])
def test_a_uniform_box_violation_from_two_reductions_is_the_expressions_number(lo, hi):
    """A box with the same bounds on every coordinate: max(0, lo - min u, max u - hi) is the number of
    max(0, max(lo - u, u - hi)), for finite points; NaN and infinite entries take the expression itself."""
    x = cp.Variable(40)
    cons = ([x >= lo] if np.isfinite(lo) else []) + ([x <= hi] if np.isfinite(hi) else [])
    agent = cvxdp.Agent("box", cp.sum_squares(x), cons, shared={"x": x})
    metrics = compiled_metrics(agent)
    assert metrics._uniform is not None
    rng = np.random.default_rng(0)
    box_lo, box_hi = metrics._box
    for scale in (1e-310, 1e-3, 0.3, 10.0, 1e12):
        for _ in range(50):
            u = rng.normal(size=40) * scale
            assert metrics.violation(u) == max(0.0, float(np.maximum(box_lo - u, u - box_hi).max()))
    for bad in (np.nan, np.inf, -np.inf):
        u = rng.normal(size=40)
        u[3] = bad
        assert metrics.violation(u) == max(0.0, float(np.maximum(box_lo - u, u - box_hi).max()))
