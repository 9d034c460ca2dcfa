"""The consensus node's party-side diagnostics: a warning, once per agent and run, when gradients cost more than
the local solves."""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.errors import SlowGradientWarning
from cvxdp.families.consensus import node as consensus_node


def box_agents(sleep: float) -> list[cvxdp.Agent]:
    agents = []
    for p, c in enumerate((0.3, -0.2)):
        x = cp.Variable(2)

        def gradient(u, c=c):
            if sleep:
                time.sleep(sleep)  # a gradient slower than the box projection by construction
            return 2.0 * (u - c)

        agents.append(cvxdp.Agent(f"a{p}", cp.sum_squares(x - c), [x <= 1, x >= -1], shared={"x": x},
                                  gradient=gradient))
    return agents


def slow_gradient_warnings(agents) -> list[SlowGradientWarning]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, rounds=4, local_updates=2), seed=0)
    return [w.message for w in caught if issubclass(w.category, SlowGradientWarning)]


def fallback_agents() -> list[cvxdp.Agent]:
    """norm1 is not covered by the compiled gradient: CVXPY's Expression.grad runs at every call."""
    agents = []
    for p, c in enumerate((0.3, -0.2)):
        x = cp.Variable(2)
        agents.append(cvxdp.Agent(f"a{p}", cp.norm1(x - 0.5) + cp.sum_squares(x - c), [x <= 1, x >= -1],
                                  shared={"x": x}))
    return agents


def test_slow_cvxpy_gradients_warn_once_per_agent(monkeypatch):
    monkeypatch.setattr(consensus_node, "SLOW_GRADIENT_SECONDS", 0.0)
    agents = fallback_agents()
    assert all(a.compiled_gradient is None and a.gradient is None for a in agents)
    found = slow_gradient_warnings(agents)
    assert sorted(w.agent for w in found) == ["a0", "a1"]  # 4 rounds, one warning each
    assert "CVXPY's Expression.grad runs at every call" in str(found[0])


def test_a_users_gradient_never_warns_however_slow(monkeypatch):
    """A box agent's local solve is a clip: its own gradient always costs more, and nothing faster is at hand."""
    monkeypatch.setattr(consensus_node, "SLOW_GRADIENT_SECONDS", 0.0)
    assert slow_gradient_warnings(box_agents(sleep=0.002)) == []


def test_no_warning_below_the_threshold():
    assert consensus_node.SLOW_GRADIENT_SECONDS == 0.5
    assert slow_gradient_warnings(box_agents(sleep=0.0)) == []


def test_the_warning_names_the_cvxpy_fallback(monkeypatch):
    monkeypatch.setattr(consensus_node, "SLOW_GRADIENT_SECONDS", 0.0)
    x = cp.Variable(2)
    agent = cvxdp.Agent("nd", cp.norm1(x - 0.5) + cp.sum_squares(x), [x <= 1, x >= -1], shared={"x": x})
    node = consensus_node.ConsensusNode(agent, np.random.SeedSequence(0), cvxdp.LinearizedADMM(rho=1.0, eta=4.0))
    node.timing.update(gradient=1.0, solve=0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        node._warn_slow_gradient()
        node._warn_slow_gradient()
    assert len(caught) == 1 and "CVXPY's Expression.grad runs at every call" in str(caught[0].message)


def test_fast_cvxpy_gradients_do_not_warn_at_the_default_threshold():
    """The warning reads the time the gradients really took (a clock misread, or a timer not starting at zero,
    warns on every run)."""
    assert consensus_node.SLOW_GRADIENT_SECONDS == 0.5
    assert slow_gradient_warnings(fallback_agents()) == []
