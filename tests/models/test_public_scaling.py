"""Issue 36, item 2 (remainder): the erm and vertical templates scale features with public constants only.

Before, the erm template divided each digits column by its maximum over all nodes' samples, and the vertical template
each breast_cancer column by its maximum over all samples: one sample moved the rows of every other sample (and so
other nodes' data and releases). Now digits pixels are divided by their public range 16 and breast_cancer columns by
the public maxima ``BREAST_CANCER_SCALE`` (bit-identical to the former scaling on the bundled data), then each row is
normalised on its own. Changing one sample changes exactly that sample's row, and the other nodes' releases stay
bit-identical.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import datasets
from sklearn.utils import Bunch

import cvxdp
from cvxdp.audits.release import _recording_backend
from cvxdp_models.erm import load_erm_data, make_erm, settings
from cvxdp_models.vertical import load_vertical

DIGITS, CANCER = datasets.load_digits(), datasets.load_breast_cancer()


def _one_sample_changed(real: Bunch, column: int, value: float) -> Bunch:
    """The data set with the last sample's ``column`` set to ``value`` (a neighbouring data set)."""
    data = real.data.astype(float).copy()
    data[-1, column] = value
    return Bunch(**{**real, "data": data})


def _rows_that_differ(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.sum(np.any(a != b, axis=1)))


@pytest.fixture
def digits_neighbour(monkeypatch):
    """digits with one sample's pixel 1 (whose maximum over the data set is 8; 266 samples have ink there) set
    to 16."""
    column = 1
    assert 0 < DIGITS.data[:, column].max() < 16
    changed = _one_sample_changed(DIGITS, column, 16.0)
    return lambda: monkeypatch.setattr(datasets, "load_digits", lambda **_: changed)


def test_one_digits_sample_moves_only_its_own_row_in_the_erm_template(digits_neighbour):
    cfg = settings({"dataset": "digits", "nodes": 3})
    before = load_erm_data(cfg)
    digits_neighbour()
    after = load_erm_data(cfg)
    rows = [np.vstack([x[0], x[2]]) for x in (before, after)]  # train and test rows, in the same order
    assert _rows_that_differ(*rows) == 1
    assert np.all(np.linalg.norm(rows[1], axis=1) <= 1.0 + 1e-12)


def test_one_nodes_sample_cannot_move_another_nodes_release(digits_neighbour):
    """Every node whose data are unchanged releases the same f_i(1) (M-ADMM with penalty perturbation, same seed)."""
    model = {"dataset": "digits", "nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 300, "test_fraction": 0.0}

    def first_releases():
        inst = make_erm(model)
        backend = _recording_backend()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM("ring", rounds=1), privacy=cvxdp.PenaltyPerturbation(
                alpha=2.0), seed=3, backend=backend)
        return [nd.X for nd in inst.nodes], [rel["f"] for rel in backend.releases[0]]

    data, released = first_releases()
    digits_neighbour()
    data2, released2 = first_releases()
    changed = [i for i, (a, b) in enumerate(zip(data, data2)) if not np.array_equal(a, b)]
    assert len(changed) <= 1  # the node holding the changed sample (if it was drawn)
    for i in set(range(3)) - set(changed):
        np.testing.assert_array_equal(released[i], released2[i])


def test_one_breast_cancer_sample_moves_only_its_own_row_in_the_vertical_template(monkeypatch):
    X, _, X_test, _ = load_vertical("breast_cancer", test_fraction=0.0)
    assert X_test.shape[0] == 0 and np.max(X) == 1.0
    changed = _one_sample_changed(CANCER, 3, 2.0 * CANCER.data[:, 3].max())  # a new maximum of column 3
    monkeypatch.setattr(datasets, "load_breast_cancer", lambda **_: changed)
    X2, _, _, _ = load_vertical("breast_cancer", test_fraction=0.0)
    assert _rows_that_differ(X, X2) == 1
    assert X2[-1, 3] == 1.0  # capped at the public maximum
