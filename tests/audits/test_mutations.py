"""Broken twins made by mutating the real code path (issue 36, item 7), each caught by a through-solve audit.

The mutation is applied in the test by monkeypatching the code the run executes (not the audits' ``broken=``
option), and the honest twin of the same audit must pass. The audit is :func:`audit_penalty_perturbation` with the
linear ERM loss (``loss="linear"``): 600 one-dimensional nodes on a ring, the first (perturbed) iteration through
``cvxdp.solve``, the gradient moving by exactly the bound's ``2C/B`` so the claim is tight (the logistic loss moves it
by half that, and a halved noise then stays within the claim: the issue measured about 1.5 against 4.09).

Measured (alpha = 4, 600 nodes, seeds 2024 / 0 / 1 / 7; claim M-ADMM 1.0, MR-ADMM 2.0):
honest M-ADMM 0.70 / 0.71 / 0.68 / 0.50, MR-ADMM 1.47 / 1.60 / 1.57 / 1.31;
Gamma sampler halved M-ADMM 1.47 / 1.60 / 1.57 / 1.31, MR-ADMM 3.19 / 2.92 / 2.93 / 2.93 (all refuted).
About 3-4 s per audit (three runs of 600 nodes).

Noise repeated every round (the consensus node draws once and adds the same draw in every round): the whole-release
audit :func:`audit_release` on its shift problem misses it for every mechanism (ObjL 0.41, OutL 0.40, ObjG 0.18,
OutG 0.15 against claims 1.50 / 1.50 / 0.81 / 0.81; for objective perturbation a reused draw there is exactly a shift
of the data). Its curvature problem (``problem="curvature"``, 2 rounds, 10,000 replicas) refutes it for all four
mechanisms with the *ratio* statistic (round 2's release over round 1's, a fixed function of the release: with a
reused draw it is one data-dependent constant per data set away from the box's bounds). Seeds 2024 / 0 / 1, claim
1.0 for ObjL and OutL, 0.68 for the Gaussian ones: ObjL 7.06 / 7.06 / 7.06, OutL 6.95 / 6.95 / 6.95,
ObjG 7.10 / 7.10 / 7.09, OutG 7.16 / 7.16 / 7.16; honest twins at most 0.08. The earlier *rounds* statistic (a
combination of rounds estimated on the reference run) alone gave ObjL 2.06 / 1.83 / 2.00, OutL 3.02 / 2.95 / 3.08,
OutG 5.36 / 5.48 / 5.61, but ObjG only 0.32 / 0.64 / 0.22 (the replicas clipped at the box pull its estimated
direction off the one that cancels the draw). About 0.3 s per audit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cvxdp.families.graph.node as graph_node
from cvxdp.audits.gamma import audit_penalty_perturbation
from cvxdp.audits.release import audit_release, rounds_ratio
from cvxdp.families.consensus.node import ConsensusNode
from cvxdp.privacy import make_mechanism

SEED = 2024
NODES = 600
ALPHA = 4.0
CLAIM = {"madmm": 1.0, "mradmm": 2.0}  # C alpha / (eta V B) and 2 C alpha / B with C = 1, B = 4, eta = 0.5, V = 2


def _audit(algorithm: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the conditional-guarantee note (inexact local solves)
        return audit_penalty_perturbation(algorithm, alpha=ALPHA, nodes=NODES, seed=SEED, loss="linear")


class HalvedGamma(np.random.Generator):
    """A generator whose Gamma variates are half what they should be (the norm of the Gamma-norm noise)."""

    def gamma(self, shape, scale=1.0, size=None):  # type: ignore[override]
        return 0.5 * super().gamma(shape, scale, size)


@pytest.mark.parametrize("algorithm", ["madmm", "mradmm"])
def test_the_honest_twin_passes(algorithm):
    res = _audit(algorithm)
    assert res.claimed == pytest.approx(CLAIM[algorithm])
    assert not res.violated and res.epsilon_lower > 0.4 * res.claimed  # tight enough to see a halved noise
    assert res.details["loss"] == "linear" and res.details["broken"] == "none"


@pytest.mark.parametrize("algorithm", ["madmm", "mradmm"])
def test_penalty_perturbation_noise_halved_in_the_solve_path_is_caught(algorithm, monkeypatch):
    """Mutation (a): the graph node perturbs its update with half the noise it draws (families/graph/node.py)."""
    sample = graph_node.sample_gamma_norm
    monkeypatch.setattr(graph_node, "sample_gamma_norm", lambda rng, alpha, dim: 0.5 * sample(rng, alpha, dim))
    res = _audit(algorithm)
    assert res.claimed == pytest.approx(CLAIM[algorithm])  # the ledger still claims the honest epsilon
    assert res.violated and res.statistic == "output"


@pytest.mark.parametrize("algorithm", ["madmm", "mradmm"])
def test_the_gamma_sampler_halved_is_caught(algorithm, monkeypatch):
    """Mutation (b): the Gamma variate of sample_gamma_norm (the noise's norm) is half its distribution's."""
    init = graph_node.GraphNode.__init__

    def mutated(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.rng = HalvedGamma(self.rng.bit_generator)

    monkeypatch.setattr(graph_node.GraphNode, "__init__", mutated)
    res = _audit(algorithm)
    assert res.claimed == pytest.approx(CLAIM[algorithm])
    assert res.violated and res.statistic == "output"


# --------------------------------------------------------------------------- noise repeated every round (LADMM)
def _audit_rounds(name: str):
    mech = make_mechanism(name, epsilon=0.5, delta=1e-3 if name.endswith("G") else None)
    return audit_release(mech, rounds=2, coordinates=1, trials=10_000, seed=SEED, problem="curvature")


def _reuse_the_first_draw(monkeypatch) -> None:
    """Mutation (c): each consensus node draws its noise once and adds that same draw in every round."""
    def perturber(self, plan):
        if plan is None:
            return None

        def perturb(value):
            if getattr(self, "_mutant_draw", None) is None or self._mutant_draw.size != value.size:
                self._mutant_draw = plan.sample(self.rng, value.size)
            return value + self._mutant_draw
        return perturb

    monkeypatch.setattr(ConsensusNode, "_perturber", perturber)


@pytest.mark.parametrize("name", ["ObjL", "OutL", "ObjG", "OutG"])
def test_noise_repeated_every_round_is_caught(name, monkeypatch):
    honest = _audit_rounds(name)
    assert not honest.violated and honest.details["problem"] == "curvature"
    _reuse_the_first_draw(monkeypatch)
    res = _audit_rounds(name)
    assert res.claimed == pytest.approx(honest.claimed)  # the ledger claims the same
    assert res.violated and res.statistic == "ratio"


def test_the_ratio_statistic_is_what_catches_objg(monkeypatch):
    """ObjG's reused draw slipped past every other statistic of the curvature audit (issue 36, left open before)."""
    _reuse_the_first_draw(monkeypatch)
    res = _audit_rounds("ObjG")
    others = {k: v for k, v in res.details["statistics"].items() if k != "ratio"}
    assert set(others) == {"output", "difference", "rounds"}
    assert max(others.values()) <= res.claimed < res.details["statistics"]["ratio"]


def test_rounds_ratio_is_a_fixed_function_of_the_release():
    profiles = np.array([[2.0, 0.0, -1.0], [3.0, 5.0, 0.5]])
    np.testing.assert_array_equal(rounds_ratio(profiles), [1.5, 0.0, -0.5])


def test_noise_repeated_every_round_slips_past_the_shift_problem(monkeypatch):
    """Why the curvature problem: on the shift problem a reused ObjL draw is a shift of the data."""
    _reuse_the_first_draw(monkeypatch)
    res = audit_release(make_mechanism("ObjL", epsilon=0.5), rounds=3, coordinates=2, trials=10_000, seed=SEED)
    assert not res.violated


def test_the_curvature_problem_needs_one_coordinate_and_two_rounds():
    with pytest.raises(Exception, match="problem='curvature'"):
        audit_release(make_mechanism("ObjL", epsilon=0.5), rounds=1, coordinates=1, trials=100, problem="curvature")
