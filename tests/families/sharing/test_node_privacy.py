"""A sharing party's own checks and what its evaluation reports (issue 52's mutation testing of
cvxdp/families/sharing/node.py): Assumption 1.1's common bound, the rank check of an unregularised update, the noise
it reports against the release it sent."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cvxdp
from cvxdp.errors import InvalidParameterError
from cvxdp.families.sharing.node import SharingMessage, SharingNode
from cvxdp.model.local_solver import DEFAULT_SOLVERS


def _parties(bound: float = 1.0):
    from cvxdp_models.vertical import synthetic_parties

    parties, labels = synthetic_parties(12, 2, 2, seed=0, bound=bound)
    parties[0].labels = labels
    return parties


def _node(party, *, lam: float = 0.1, private: bool = True, b1: float | None = 1.0) -> SharingNode:
    algorithm = cvxdp.ADMMSharing(rho=1.0, lam=lam, epochs=3)
    mechanism = cvxdp.SharingGaussian(epsilon=0.3, delta=1e-5) if private else None
    return SharingNode(party, np.random.SeedSequence(0), algorithm, DEFAULT_SOLVERS, mechanism, "pld", b1, 2)


@pytest.mark.parametrize("b1", [None, 0.5])
def test_a_private_party_refuses_a_common_bound_below_its_own(b1):
    """Assumption 1.1: the run's b1 (what the noise is calibrated for) is at least every party's own bound."""
    with pytest.raises(InvalidParameterError, match="below its own bound 1.0"):
        _node(_parties(bound=1.0)[0], b1=b1)
    assert _node(_parties(bound=1.0)[0], b1=1.0).plan is not None  # equal is enough
    assert _node(_parties(bound=1.0)[0], b1=2.0).plan is not None


def test_an_unregularised_update_needs_a_bound_when_the_features_are_rank_deficient():
    party = _parties()[0]
    deficient = cvxdp.VerticalParty("p0", np.repeat(party.data[:, :1], 2, axis=1))  # two equal columns, no bound
    with pytest.raises(InvalidParameterError, match="rank deficient"):
        _node(deficient, lam=0.0, private=False)
    _node(deficient, lam=0.1, private=False)  # a regulariser makes the update well posed
    full = cvxdp.VerticalParty("p0", party.data)
    _node(full, lam=0.0, private=False)  # full rank: no bound needed


@pytest.mark.parametrize("private", [True, False])
def test_the_evaluation_reports_the_noise_of_the_release_it_sent(private):
    party = _parties()[0]
    node = _node(party, private=private)
    release = node.step(SharingMessage(round=1, residual=np.zeros(party.n_samples), y=np.ones(party.n_samples)))
    values = node.evaluate(1).values
    expected = float(np.linalg.norm(release.arrays["q"] - party.data @ node.x))
    assert values["noise_norm"] == pytest.approx(expected, rel=1e-12, abs=0.0)
    assert (values["noise_norm"] > 0.0) == private
    assert values["violation"] == pytest.approx(max(float(np.linalg.norm(node.x)) - party.bound, 0.0), abs=1e-12)
    assert values["solver_time"] >= 0.0


def test_a_message_cannot_change():
    msg = SharingMessage(round=1, residual=np.zeros(3), y=np.zeros(3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.round = 2
