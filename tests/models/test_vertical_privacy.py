"""Issue 36, item 2 (vertical remainder): the ``vertical`` template never lets one party's data move another's.

``normalize = "party"`` (the default) rescales each party's rows on its own data: changing one sample's features in
party 2's block leaves party 1's features and its released ``q_1 = D_1 x_1 + noise`` bit-identical (first epoch,
same seed; later epochs legitimately depend on the other parties' releases through the centre's broadcast).
``normalize = "sample"`` divides each sample's row by its norm over *all* parties' features, so the same change moves
party 1's block; a private run on it is refused, naming the parameter and what to use instead.

The release test follows the run to the first epoch k in which party 2's own release moves (its first release is
noise only: ``x_2`` starts at 0). Up to and including epoch k, party 1 has seen only identical releases from the
others, so any difference in its release there could come only from party 2's data. (Measured with the refusal
lifted: under "sample" party 1's release moves in that same epoch, so the test would fail there.)
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn import datasets
from sklearn.utils import Bunch

import cvxdp
from cvxdp import build_model
from cvxdp.audits.release import _recording_backend
from cvxdp.errors import DeclarationError
from cvxdp_models.vertical import SAMPLE_REFUSAL, make_parties, make_vertical_data

CASES = Path(__file__).resolve().parents[2] / "cases"
CANCER = datasets.load_breast_cancer()
COLUMN = 20  # a column of party 2's block (breast_cancer's default split is 15 + 15)
MODEL = {"dataset": "breast_cancer", "bound": 60.0, "test_fraction": 0.0}


@pytest.fixture
def party2_changed(monkeypatch):
    """Installs a neighbouring data set: the last sample's feature ``COLUMN`` (held by party 2) halved."""
    data = CANCER.data.astype(float).copy()
    data[-1, COLUMN] *= 0.5
    changed = Bunch(**{**CANCER, "data": data})
    return lambda: monkeypatch.setattr(datasets, "load_breast_cancer", lambda **_: changed)


def _private_releases(model: dict) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """The parties' training blocks and every epoch's releases of a 3-epoch private ADMM-sharing run (seed 5)."""
    inst = build_model("vertical", model, base_dir=CASES)
    backend = _recording_backend()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 3-epoch run is far from converged
        cvxdp.solve(inst.agents, algorithm=cvxdp.ADMMSharing(rho=0.25 / 426, lam=1e-3, epochs=3),
                    privacy=cvxdp.SharingGaussian(epsilon=0.5, delta=1e-5), seed=5, backend=backend)
    return [np.array(p.data) for p in inst.agents], backend.sent


def test_one_partys_data_cannot_move_another_partys_release(party2_changed):
    blocks, sent = _private_releases(MODEL)
    party2_changed()
    blocks2, sent2 = _private_releases(MODEL)
    assert int(np.sum(np.any(blocks[1] != blocks2[1], axis=1))) == 1  # party 2's data changed in one row
    np.testing.assert_array_equal(blocks[0], blocks2[0])
    moved = [r for r in range(len(sent)) if not np.array_equal(sent[r][1], sent2[r][1])]
    assert moved, "party 2's own releases never moved: the run does not see the changed sample"
    for r in range(moved[0] + 1):  # party 1's releases up to the epoch where party 2's first moved: bit-identical
        np.testing.assert_array_equal(sent[r][0], sent2[r][0])


def test_sample_normalization_mixes_parties(party2_changed):
    """Why it is refused: under "sample" party 2's change moves party 1's block (one row)."""
    before = make_vertical_data("breast_cancer", normalize="sample", test_fraction=0.0)
    party2_changed()
    after = make_vertical_data("breast_cancer", normalize="sample", test_fraction=0.0)
    assert int(np.sum(np.any(before.train[0] != after.train[0], axis=1))) == 1


def test_a_private_run_with_sample_normalization_is_refused():
    inst = build_model("vertical", {**MODEL, "normalize": "sample"}, base_dir=CASES)
    assert all(p.refusal == SAMPLE_REFUSAL for p in inst.agents)
    algorithm = cvxdp.ADMMSharing(rho=0.25 / 426, lam=1e-3, epochs=2)
    with pytest.raises(DeclarationError, match=r"private run is refused: the 'normalize' entry of \[model\] is "
                                               r"'sample'.*normalize = 'party'"):
        cvxdp.solve(inst.agents, algorithm=algorithm, privacy=cvxdp.SharingGaussian(epsilon=0.5, delta=1e-5), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(inst.agents, algorithm=algorithm, seed=0)  # non-private: unaffected
    assert set(res.solution) >= {p.name for p in inst.agents} or res.solution


def test_party_normalization_carries_no_refusal():
    data = make_vertical_data("breast_cancer", normalize="party", test_fraction=0.0)
    assert all(p.refusal is None for p in make_parties(data, bound=60.0))


def test_refusal_must_be_a_reason():
    with pytest.raises(Exception, match="refusal"):
        cvxdp.VerticalParty("p", np.eye(2), bound=1.0, refusal="  ")
