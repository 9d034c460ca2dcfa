"""A graph node's own privacy arithmetic, checked against the papers' formulas computed here (issue 52's mutation
testing of cvxdp/families/graph/node.py): the noise rate of every iteration, the charge of an exact and of a
recycled iteration, the noise's place in the update, and what a node hands out."""

from __future__ import annotations

import dataclasses

import dp_accounting
import numpy as np
import pytest

import cvxdp
from cvxdp.families.graph import node as graph_node
from cvxdp.families.graph.node import GraphMessage, GraphNode
from cvxdp.model.local_solver import DEFAULT_SOLVERS

ALPHA1, GROWTH, DEGREE = 3.0, 1.5, 2


def _agent():
    from cvxdp_models.erm import make_erm

    return make_erm({"nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 60, "data_seed": 0}).agents[0]


def _node(kind: str, *, private: bool = True, **algorithm) -> GraphNode:
    cls = {"madmm": cvxdp.MADMM, "radmm": cvxdp.RADMM}[kind]
    mechanism = cvxdp.PenaltyPerturbation(alpha=ALPHA1, growth=GROWTH) if private else None
    return GraphNode(_agent(), np.random.SeedSequence(0), cls(rounds=6, **algorithm), DEGREE, DEFAULT_SOLVERS,
                     mechanism)


def _message(t: int, node: GraphNode, *, eta: float = 1.7) -> GraphMessage:
    return GraphMessage(round=t, neighbours=np.zeros((DEGREE, node.d)), dual_step=None, eta=eta,
                        exact=node.exact_at(t), alpha=node.alpha(t))


def test_the_noise_rate_grows_with_every_exact_iteration():
    """alpha_i(s) = alpha_i(1) growth^(s-1): s = t for M-ADMM, the odd iteration's number k = (t + 1) / 2 for R-ADMM
    (no noise on a recycled, even iteration)."""
    madmm = _node("madmm")
    assert [madmm.alpha(t) for t in (1, 2, 3, 4)] == pytest.approx([ALPHA1 * GROWTH ** (t - 1) for t in (1, 2, 3, 4)],
                                                                    rel=1e-15)
    radmm = _node("radmm")
    assert radmm.alpha(2) is None and radmm.alpha(4) is None
    assert [radmm.alpha(t) for t in (1, 3, 5)] == pytest.approx([ALPHA1, ALPHA1 * GROWTH, ALPHA1 * GROWTH ** 2],
                                                                rel=1e-15)


def test_an_exact_iteration_is_charged_once_and_a_recycled_one_costs_nothing():
    node = _node("radmm")
    event, claim, calls = node.charge(_message(1, node))
    assert calls == 1 and claim[1] == 0.0 and claim[0] > 0.0
    assert event == graph_node.gamma_step_event(claim[0])
    assert node.charge(_message(2, node)) == (dp_accounting.NoOpDpEvent(), (0.0, 0.0), 1)
    assert _node("madmm", private=False).charge(_message(1, _node("madmm", private=False))) is None


@pytest.mark.parametrize("kind", ["madmm", "radmm"])
def test_the_noise_enters_the_update_as_the_papers_say(kind, monkeypatch):
    """From f = 0, lambda = 0 and zero neighbours the linear term of the exact step is the noise alone:
    -2 eta V eps for M-ADMM (eq. 10 with PP), -eps for R-ADMM (eq. 14)."""
    node = _node(kind)
    node.f = np.zeros(node.d)
    noise = np.linspace(-1.0, 1.0, node.d)
    monkeypatch.setattr(graph_node, "sample_gamma_norm", lambda rng, alpha, d: noise.copy())
    seen = {}

    def solve(weight, p, f, round):
        seen["weight"], seen["p"] = weight, np.array(p)
        return np.zeros_like(f), graph_node.SolveReport(solver="captured")

    monkeypatch.setattr(node.prox, "solve", solve)
    eta = 1.7
    node.step(_message(1, node, eta=eta))
    expected = -2.0 * eta * DEGREE * noise if kind == "madmm" else -noise
    assert seen["weight"] == eta * DEGREE
    np.testing.assert_allclose(seen["p"], expected, rtol=1e-15, atol=0)


def test_a_random_initial_point_is_drawn_for_any_positive_scale():
    node = _node("madmm", init_scale=0.5)
    assert np.abs(node.declare()["initial"]).max() > 0.0
    assert np.abs(_node("madmm", init_scale=0.0).declare()["initial"]).max() == 0.0


def test_what_a_node_hands_out_is_a_copy_and_a_message_cannot_change():
    node = _node("madmm")
    local = node.local()
    local += 100.0
    assert np.abs(node.local()).max() < 100.0
    msg = _message(1, node)
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.alpha = None


def test_the_refusal_of_a_skipped_exact_iteration_says_which_is_which():
    node = _node("radmm")
    msg = dataclasses.replace(_message(1, node), exact=False, alpha=None)
    with pytest.raises(cvxdp.errors.PartyRefusedError,
                       match="asks for a recycled iteration; its algorithm runs an exact one there"):
        node.check_message(msg)


def test_a_non_private_nodes_evaluation_reports_no_noise_and_no_violation_without_constraints():
    node = _node("madmm", private=False)
    node.step(_message(1, node))
    values = node.evaluate(1).values
    assert values["noise_magnitude"] == 0.0
    assert not node.agent.constraints and "violation" not in values
