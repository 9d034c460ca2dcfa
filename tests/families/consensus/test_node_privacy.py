"""A consensus node's own privacy arithmetic (issue 52's mutation testing of cvxdp/families/consensus/node.py):
the step weight its noise is calibrated at, and where its gradient is evaluated under output perturbation (the
declared sensitivity holds on the feasible set W only)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.families.consensus.node import ConsensusNode, RoundMessage

SENSITIVITY = cvxdp.Sensitivity(l1=0.4, l2=0.2)


def _agent(name: str, *, local: bool) -> cvxdp.Agent:
    x = cp.Variable(2)
    objective, constraints = cp.sum_squares(x - 0.3), [x <= 1, x >= -1]
    if local:  # a coordinate no other agent sees: its step weight is eta alone
        y = cp.Variable(1)
        objective, constraints = objective + cp.sum_squares(y), [*constraints, y <= 1, y >= -1]
    return cvxdp.Agent(name, objective, constraints, shared={"x": x}, sensitivity=SENSITIVITY, lipschitz=2.0)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_output_noise_is_calibrated_at_the_smallest_step_weight(noise):
    """min(c) is eta + rho when every coordinate is shared, eta when one is local: OutPert's sensitivity divides by
    it, so at the same declared sensitivity the scales stand in the ratio eta / (eta + rho)."""
    eta, rho = 4.0, 1.5
    algorithm = cvxdp.LinearizedADMM(rho=rho, eta=eta, local_updates=1, rounds=3)
    mechanism = cvxdp.OutputPerturbation(noise, epsilon=1.0, delta=1e-6 if noise == "gaussian" else None)
    scales = {}
    for local in (False, True):
        node = ConsensusNode(_agent(f"a{int(local)}", local=local), np.random.SeedSequence(0), algorithm,
                             mechanism=mechanism)
        scales[local] = node.plan(RoundMessage(round=1, bw=np.zeros(2), rho=rho, eta=eta)).scale
    assert scales[False] / scales[True] == pytest.approx(eta / (eta + rho), rel=1e-12)


def _recording_agents(set_kind: str, points: list) -> list[cvxdp.Agent]:
    agents = []
    for p, c in enumerate((0.9, -0.9)):
        x = cp.Variable(2)
        constraints = [x <= 1, x >= -1] if set_kind == "box" else [cp.norm(x) <= 1]

        def gradient(u, c=c):
            points.append(np.array(u, dtype=float))
            return 2.0 * (u - c)

        agents.append(cvxdp.Agent(f"a{p}", cp.sum_squares(x - c), constraints, shared={"x": x}, gradient=gradient,
                                  sensitivity=SENSITIVITY, lipschitz=4.0))
    return agents


@pytest.mark.parametrize("set_kind", ["box", "ball"])
def test_output_perturbations_gradients_are_taken_on_the_feasible_set(set_kind):
    """OutPert's noisy outputs leave W; the next gradient is taken at their projection onto W (a box: a clip), where
    the declared sensitivity holds (SPEC 2.1)."""
    points: list = []
    agents = _recording_agents(set_kind, points)
    start = len(points)
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, local_updates=2, rounds=4),
                         privacy=cvxdp.OutputPerturbation("gaussian", epsilon=0.05, delta=1e-6), seed=0)
    outputs = np.concatenate([np.ravel(v) for v in result.local.values()])
    assert np.abs(outputs).max() > 1.0  # the releases did leave W: the test has something to check
    evaluated = np.array(points[start:])
    assert len(evaluated) >= 2 * 4 * 2
    if set_kind == "box":
        assert np.abs(evaluated).max() <= 1.0
    else:
        assert np.linalg.norm(evaluated, axis=1).max() <= 1.0 + 1e-6


@pytest.mark.parametrize("source", ["numpy", "opendp"])
def test_the_noise_comes_from_the_source_the_mechanism_names(source, monkeypatch):
    """noise_source="opendp" adds every draw inside OpenDP's hardened sampler (NoisePlan.perturb); "numpy" never
    calls it (both add calibrated noise, so only the path tells them apart)."""
    pytest.importorskip("opendp", reason="the secure extra: pip install -e '.[secure]'")
    from cvxdp.privacy.noise import NoisePlan

    calls = []
    original = NoisePlan.perturb

    def perturb(self, rng, value):
        calls.append(value.size)
        return original(self, rng, value)

    monkeypatch.setattr(NoisePlan, "perturb", perturb)
    agents = [_agent("a0", local=False), _agent("a1", local=False)]
    cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, local_updates=1, rounds=2),
                privacy=cvxdp.OutputPerturbation("laplace", epsilon=1.0, noise_source=source), seed=0)
    assert (len(calls) > 0) == (source == "opendp")
