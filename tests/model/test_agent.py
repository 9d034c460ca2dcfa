"""Declaration: layout of the flat local vector and clear errors for bad declarations."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, InfeasibleAgentError, InvalidParameterError
from cvxdp.model import check_agents


def test_layout_indexes_slices_and_matrices_column_major():
    x = cp.Variable(4)
    y = cp.Variable((2, 3))
    agent = cvxdp.Agent("a", cp.sum_squares(x) + cp.sum(y), [x <= 1, x >= -1, y >= 0, y <= 1],
                        shared={"k": x[1:3], "m": y[:, 0]})

    layout = agent.layout

    assert layout.size == 10
    assert list(layout.shared["k"]) == [1, 2]
    assert list(layout.shared["m"]) == [4, 5]  # first column of y, column-major after x
    u = np.arange(10.0)
    parts = layout.split(u)
    assert np.array_equal(parts[y], np.arange(4.0, 10.0).reshape((2, 3), order="F"))
    assert np.array_equal(layout.flatten(parts), u)


def test_cvxpy_gradient_fallback_matches_hand_gradient():
    x = cp.Variable(3)
    d = cp.Parameter(3, value=np.array([1.0, -2.0, 0.5]))
    agent = cvxdp.Agent("a", cp.sum_squares(x - d), [cp.norm(x) <= 5], shared={"x": x})

    g = agent.grad(np.array([0.2, 0.1, -0.3]))

    assert np.allclose(g, 2 * (np.array([0.2, 0.1, -0.3]) - d.value))


def _agent(name="a", **overrides):
    x = cp.Variable(2)
    kw = {"objective": cp.sum_squares(x), "constraints": [x <= 1, x >= -1], "shared": {"x": x}}
    kw.update(overrides)
    return cvxdp.Agent(name, kw["objective"], kw["constraints"], shared=kw["shared"],
                       gradient=kw.get("gradient"), sensitivity=kw.get("sensitivity")), x


@pytest.mark.parametrize("case, match", [
    ("nonconvex", "not convex"),
    ("nondcp_constraint", "DCP"),
    ("shared_expression", "Variable or a slice"),
    ("shared_foreign", "appears in neither"),
    ("nan_data", "NaN"),
    ("no_value", "has no value"),
    ("nonscalar", "scalar"),
    ("empty_shared", "at least one key"),
    ("overlap", "overlap"),
])
def test_bad_declarations_name_the_agent(case, match):
    x = cp.Variable(2)
    other = cp.Variable(2)
    d = cp.Parameter(2)
    objective, constraints, shared = cp.sum_squares(x), [x <= 1, x >= -1], {"x": x}
    if case == "nonconvex":
        objective = -cp.sum_squares(x)
    elif case == "nondcp_constraint":
        constraints = [cp.sum_squares(x) >= 1]
    elif case == "shared_expression":
        shared = {"x": 2 * x}
    elif case == "shared_foreign":
        shared = {"x": other}
    elif case == "nan_data":
        objective = cp.sum_squares(x - np.array([np.nan, 1.0]))  # CVXPY refuses NaN Parameter values itself
    elif case == "no_value":
        objective = cp.sum_squares(x - d)
    elif case == "nonscalar":
        objective = cp.square(x)
    elif case == "empty_shared":
        shared = {}
    elif case == "overlap":
        shared = {"x": x, "y": x[0]}
    agent = cvxdp.Agent("zone7", objective, constraints, shared=shared)

    with pytest.raises(DeclarationError, match=match) as info:
        agent.check()

    assert "zone7" in str(info.value)


def test_infeasible_agent_is_named():
    x = cp.Variable(2)
    agent = cvxdp.Agent("zone3", cp.sum_squares(x), [x >= 2, x <= 1], shared={"x": x})

    with pytest.raises(InfeasibleAgentError, match="zone3"):
        agent.check_feasible()


def test_unbounded_set_is_warned_about():
    x = cp.Variable(2)
    agent = cvxdp.Agent("open", cp.sum_squares(x), [x >= 0], shared={"x": x})

    with pytest.warns(UserWarning, match="unbounded"):
        agent.check_feasible()


def test_cross_agent_checks():
    a, _ = _agent("a")
    b, _ = _agent("a")
    y = cp.Variable(3)
    c = cvxdp.Agent("c", cp.sum_squares(y), [y <= 1, y >= -1], shared={"x": y})

    with pytest.raises(DeclarationError, match="used twice"):
        check_agents([a, b], private=False)
    with pytest.raises(DeclarationError, match="size 3 in agent 'c'"):
        check_agents([a, c], private=False)
    with pytest.raises(InvalidParameterError, match="non-empty list"):
        check_agents([], private=False)


def test_sensitivity_rejects_non_positive():
    """Zero included: a zero sensitivity would calibrate no noise at all."""
    with pytest.raises(InvalidParameterError, match="'l2' parameter of Sensitivity"):
        cvxdp.Sensitivity(l2=-1.0)
    for name in ("l1", "l2", "alpha"):
        for bad in (0.0, 0, -1e-300, float("nan"), float("inf"), True):
            with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of Sensitivity"):
                cvxdp.Sensitivity(**{name: bad})
    assert cvxdp.Sensitivity(l1=1e-300, l2=3, alpha=0.1).l2 == 3


def test_gradient_of_wrong_shape_is_reported():
    x = cp.Variable(2)
    agent = cvxdp.Agent("g", cp.sum_squares(x), [x <= 1, x >= -1], shared={"x": x},
                        gradient=lambda u: np.zeros(3))

    with pytest.raises(DeclarationError, match="gradient returned shape"):
        agent.grad(np.zeros(2))


def test_value_hook_replaces_the_cvxpy_evaluation():
    x = cp.Variable(2)
    calls = []
    agent = cvxdp.Agent("v", cp.sum_squares(x), [x <= 1, x >= -1], shared={"x": x},
                        value=lambda u: calls.append(1) or float(u @ u))

    assert agent.objective_value(np.array([1.0, 2.0])) == 5.0
    assert calls == [1]


def test_box_feasibility_is_read_off_the_bounds():
    x = cp.Variable(2)
    empty = cvxdp.Agent("boxy", cp.sum_squares(x), [x <= 0, x >= 1], shared={"x": x})

    with pytest.raises(InfeasibleAgentError, match="boxy.*coordinate 0"):
        cvxdp.solve([empty], algorithm=cvxdp.LinearizedADMM(rounds=1))


def test_unpickled_agent_reserves_its_cvxpy_ids():
    """In a fresh process (a Ray actor) CVXPY's id counter starts low; unpickling an agent moves it past the
    agent's ids, so expressions created there never reuse one (simulated by lowering the counter)."""
    import pickle

    from cvxpy.lin_ops import lin_utils

    x, d = cp.Variable(3), cp.Parameter(3, value=np.arange(3.0))
    agent = cvxdp.Agent("a", cp.sum_squares(x - d), [cp.norm(x) <= 2], shared={"x": x[:2]})
    agent.layout  # noqa: B018 - cached, travels with the agent
    blob = pickle.dumps(agent)
    top = max(leaf.id for leaf in [*agent.problem.variables(), *agent.problem.parameters()])
    saved = lin_utils.ID_COUNTER.count
    try:
        lin_utils.ID_COUNTER.count = 0
        copy = pickle.loads(blob)
        assert lin_utils.ID_COUNTER.count > top
        assert [v.id for v in copy.layout.variables] == [v.id for v in agent.layout.variables]
    finally:
        lin_utils.ID_COUNTER.count = max(saved, lin_utils.ID_COUNTER.count)


def test_poisson_sample_takes_every_record_independently_with_probability_q():
    """The sample the subsampled updates' amplification claims: each record in with probability q, independently of
    the others and of its position, fresh from the caller's generator at every call. A fixed batch (the first or any
    round(q n) records), the full batch or a reseeded generator fails the per-record rates or the spread of the sample
    size (binomial: variance n q (1 - q); a fixed-size batch has none). The bounds are 6 standard deviations wide."""
    n, q, draws = 40, 0.1, 5000
    rng = np.random.default_rng(2024)  # the test's own generator: the sampler must only draw from it
    hits = np.zeros((draws, n), dtype=bool)
    for k in range(draws):
        index = cvxdp.model.poisson_sample(rng, n, q)
        assert index.dtype.kind == "i" and np.all(np.diff(index) > 0) and np.all((index >= 0) & (index < n))
        hits[k, index] = True
    rate_sd = np.sqrt(draws * q * (1 - q))
    assert np.all(np.abs(hits.sum(axis=0) - draws * q) < 6 * rate_sd)  # every record, wherever it sits
    sizes = hits.sum(axis=1)
    variance = n * q * (1 - q)
    # independent inclusions: the sample variance's relative spread is sqrt((2 + excess kurtosis) / draws) < 0.021
    assert abs(sizes.var(ddof=1) / variance - 1.0) < 6 * 0.021


def test_a_per_example_declaration_is_checked_and_frozen():
    """``records`` and ``total`` (the public normaliser N of the sensitivity C / (q N)) are ints >= 1, named when
    wrong; the declaration cannot be changed once made (a larger N after the plan would claim less noise)."""
    import dataclasses

    def clipped_sum(u, index, clip):
        return np.zeros(1)

    smallest = cvxdp.PerExample(records=1, total=1, clipped_sum=clipped_sum)
    assert smallest.public() == {"total": 1, "relation": "add_remove"}
    for field in ("records", "total"):
        with pytest.raises(InvalidParameterError, match=rf"'{field}' parameter of PerExample must be an int in \[1, "):
            cvxdp.PerExample(**{"records": 3, "total": 3, field: 0}, clipped_sum=clipped_sum)
    with pytest.raises(InvalidParameterError, match="'clipped_sum' parameter of PerExample"):
        cvxdp.PerExample(records=3, total=3, clipped_sum=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        smallest.total = 1000
