"""The subsampled local update (``sampling_rate``) against its claim, and its broken twin (issue 39, item 3).

The twin is made by mutating the real code path: the party's Poisson sample (``cvxdp.model.declaration.poisson_sample``)
returns every record, so the full batch is used while the plan (and the ledger) still claim amplification by
sampling. :func:`audit_subsampled_update` runs the party's own ``ConsensusNode.step`` on an add/remove-one pair.

A second twin takes a fixed batch, the first round(q N) records, every time. The audit's neighbour record is D's first
(it was the last, which such a batch never holds: the twin then slipped past, issue 52); tests/model/test_agent.py
checks every record's inclusion rate, which catches a fixed batch wherever it sits.

Measured (q = 0.1, C = 1, total (1, 1e-5) over one step, claim 1.00), 10,000 updates per data set, seeds 2024 / 0 / 1,
the neighbour record first: ObjG honest 0.11 / 0 / 0.06, first-k batch 1.52 / 1.52 / 1.59, full batch 1.52 / 1.52 /
1.59; OutG honest 0 / 0.06 / 0.03, first-k 1.48 / 1.48 / 1.52, full batch 1.48 / 1.48 / 1.52 (every twin refuted).
Before, with the neighbour last (ObjG, 20,000 updates): honest 0.09 / 0.09 / 0.18, full batch 1.63 / 1.61 / 1.79.
About 0.5 s per audit of 10,000 updates, plus 5-10 s for the process's first PLD calibration of the subsampled event.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvxdp.model.declaration as declaration_module
from cvxdp.audits.release import audit_subsampled_update
from cvxdp.errors import InvalidParameterError
from cvxdp.privacy import make_mechanism

SEED = 2024
TRIALS = 10_000


def _mechanism(name: str):
    return make_mechanism(name, epsilon=1.0, delta=1e-5, calibrate="total", sampling_rate=0.1, clip_norm=1.0)


def _audit(name: str, **kwargs):
    return audit_subsampled_update(_mechanism(name), trials=TRIALS, seed=SEED, **kwargs)


@pytest.mark.parametrize("name", ["ObjG", "OutG"])
def test_the_subsampled_update_passes(name):
    honest = _audit(name)
    assert honest.claimed == pytest.approx(1.0, rel=1e-6) and honest.delta == pytest.approx(1e-5)
    assert not honest.violated
    assert honest.details["sampling_rate"] == 0.1 and honest.details["event"] == "PoissonSampledDpEvent"


@pytest.mark.parametrize("name", ["ObjG", "OutG"])
def test_the_full_batch_twin_is_caught(name, monkeypatch):
    monkeypatch.setattr(declaration_module, "poisson_sample", lambda rng, n, q: np.arange(n))  # sampling not done
    broken = _audit(name)
    assert broken.claimed == pytest.approx(1.0, rel=1e-6)  # the plan still claims the amplified epsilon
    assert broken.violated and broken.statistic == "output"


def test_a_public_regulariser_keeps_the_claim_and_the_twin_is_still_caught(monkeypatch):
    """``PerExample.public_gradient`` (a part of the objective that reads no record) is added on D and D' alike:
    the honest update still passes, and the full-batch twin is still refuted."""
    honest = _audit("ObjG", regularizer=1.0)
    assert not honest.violated and honest.details["regularizer"] == 1.0
    monkeypatch.setattr(declaration_module, "poisson_sample", lambda rng, n, q: np.arange(n))
    assert _audit("ObjG", regularizer=1.0).violated


def test_the_audit_needs_a_subsampled_mechanism():
    with pytest.raises(InvalidParameterError, match="sampling_rate"):
        audit_subsampled_update(make_mechanism("ObjG", epsilon=1.0, delta=1e-5, calibrate="total"), trials=10)


@pytest.mark.parametrize("name", ["ObjG", "OutG"])
def test_a_fixed_batch_from_the_front_is_caught(name, monkeypatch):
    """Mutation: the party takes the first round(q N) records every time (no randomness, so no amplification). The
    audit's neighbour record is D's first, which such a batch always holds (it was the last before, and slipped
    past: issue 52)."""
    monkeypatch.setattr(declaration_module, "poisson_sample", lambda rng, n, q: np.arange(round(q * n)))
    broken = _audit(name)
    assert broken.claimed == pytest.approx(1.0, rel=1e-6)
    assert broken.violated and broken.statistic == "output"
