"""A non-convex objective's error names the part that breaks CVXPY's DCP rules and, for the usual slips, the DCP
form that means the same (issue 51)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, convexity_advice, show_expression

w = cp.Variable(3, name="w")
y = cp.Variable(name="y")


@pytest.mark.parametrize("expr, form", [
    (cp.sqrt(cp.sum_squares(w)), "cp.norm(w)"),
    (cp.sqrt(cp.sum(cp.square(w))), "cp.norm(w)"),
    (cp.sum_squares(w) + 2 * cp.sqrt(cp.sum_squares(w - 1)), "cp.norm(w - 1)"),
    (cp.sqrt(cp.square(y)), "cp.abs(y)"),
    (cp.log(cp.sum(cp.exp(w))), "cp.log_sum_exp(w)"),
    (w @ w, "cp.sum_squares(w)"),
    (y * y, "cp.square(y)"),
    (1 / y, "cp.inv_pos(y)"),
    (cp.square(y) / y, "cp.quad_over_lin(y, y)"),
    (cp.sqrt(cp.quad_form(w, np.eye(3))), "cp.norm(L.T @ w)"),
])
def test_the_usual_slips_get_their_dcp_form(expr, form):
    assert not expr.is_convex()
    advice = convexity_advice(expr)
    assert f"write {form}" in advice


@pytest.mark.parametrize("expr, term, negated, verb", [
    (cp.sum_squares(w) + cp.sqrt(y), "the term sqrt(y)", "-sqrt(y)", "subtract"),
    (cp.sum_squares(w) - cp.sum_squares(y), "the term -sum_squares(y)", "sum_squares(y)", "add"),
    (-cp.sum_squares(w), "the objective", "sum_squares(w)", "add"),
    (cp.log(y), "the objective", "-log(y)", "subtract"),
])
def test_a_concave_term_is_named_with_its_convex_negation(expr, term, negated, verb):
    advice = convexity_advice(expr)
    assert advice.startswith(f"{term} is concave") and f"({negated} is convex: did you mean to {verb} it?)" in advice


def test_other_breaks_name_the_part_and_the_rules():
    assert "multiplies two expressions that both hold variables" in convexity_advice(y * cp.sum(w))
    advice = convexity_advice(cp.sum_squares(w) + cp.exp(cp.sqrt(y)))
    assert advice.startswith("CVXPY cannot prove exp(sqrt(y)) convex") and "cvxpy.org/tutorial/dcp" in advice


def test_show_writes_expressions_as_users_do():
    assert show_expression(cp.sqrt(cp.sum_squares(w - 1))) == "sqrt(sum_squares(w - 1))"
    assert show_expression(cp.sum_squares(np.ones((4, 3)) @ w)) == "sum_squares([4x3 constant] @ w)"
    assert len(show_expression(sum(cp.square(w[i] - i) for i in range(3)) + cp.sum_squares(w - 5))) <= 60


@pytest.mark.parametrize("objective, expected", [
    (lambda x: cp.sqrt(cp.sum_squares(x)), "sqrt(sum_squares(x)) breaks the DCP rules: write cp.norm(x)"),
    (lambda x: cp.sum_squares(x) + cp.sum(cp.sqrt(x + 2)), "the term sum(sqrt(x + 2)) is concave"),
])
def test_the_agents_error_names_the_agent_and_the_dcp_form(objective, expected):
    x = cp.Variable(3, name="x")
    agent = cvxdp.Agent("zone4", objective(x), [x <= 1, x >= -1], shared={"x": x})
    with pytest.raises(DeclarationError, match=r"^Agent 'zone4': the objective is not convex") as err:
        agent.check()
    assert expected in str(err.value)


def test_a_vertical_partys_regularizer_gets_the_same_advice():
    rng = np.random.default_rng(0)
    x = cp.Variable(2, name="x")
    party = cvxdp.VerticalParty("bank", cp.Parameter((5, 2), value=rng.normal(size=(5, 2))), x,
                                regularizer=cp.sqrt(cp.sum_squares(x)))
    with pytest.raises(DeclarationError, match=r"'bank'.*regularizer.*write cp\.norm\(x\)"):
        party.check()
