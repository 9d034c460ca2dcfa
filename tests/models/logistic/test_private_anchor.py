"""The centralized private anchor (issue 39): DP-SGD on the pooled data at a total (epsilon, delta)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cvxdp_models.logistic.baselines import central_private_anchor
from cvxdp_models.logistic.template import build


@pytest.fixture(scope="module")
def digits():
    return build({"dataset": "digits", "agents": 5, "baselines": False, "total_samples": 1347, "clip": 1.0},
                 base_dir=Path("."))


def test_the_anchor_improves_as_epsilon_grows(digits):
    """Seeds 0, 1 at each epsilon; measured 0.1 -> 77 % / 92 %, 1 -> 13 % / 12 %, 10 -> 8 % / 9 % test error
    (chance 90 %; the non-private federated model about 9 %)."""
    X_test, y_test = digits.test_data
    mean = {}
    for eps in (0.1, 1.0, 10.0):
        runs = [central_private_anchor(digits.pooled, X_test, y_test, epsilon=eps, delta=1e-5, seed=s)
                for s in (0, 1)]
        assert all(r["method"] == "dp-sgd" and r["epsilon"] == eps and r["sampling_rate"] == 0.05 for r in runs)
        mean[eps] = np.mean([r["test_error"] for r in runs])
    assert mean[0.1] > mean[1.0] > mean[10.0]
    assert mean[0.1] > 0.5 and mean[10.0] < 0.15


def test_the_anchor_is_reproducible_by_seed_and_uses_less_noise_for_more_epsilon(digits):
    X_test, y_test = digits.test_data
    a = central_private_anchor(digits.pooled, X_test, y_test, epsilon=1.0, delta=1e-5, seed=3)
    b = central_private_anchor(digits.pooled, X_test, y_test, epsilon=1.0, delta=1e-5, seed=3)
    c = central_private_anchor(digits.pooled, X_test, y_test, epsilon=10.0, delta=1e-5, seed=3)
    assert a["test_error"] == b["test_error"] and a["noise_multiplier"] == b["noise_multiplier"]
    assert c["noise_multiplier"] < a["noise_multiplier"]


def test_binary_models_have_the_anchor_too():
    """Binary ERM (regulariser as PerExample's public part): measured on breast cancer (3 agents, N = 426), seeds
    0, 1: epsilon 0.1 -> 50 % / 37 %, 1 -> 15 % / 16 %, 10 -> 11 % / 11 % test error (non-private central 9 %)."""
    inst = build({"dataset": "breast_cancer", "agents": 3, "baselines": False, "total_samples": 426, "clip": 1.0},
                 base_dir=Path("."))
    assert inst.central_private is not None
    X_test, y_test = inst.test_data
    mean = {eps: np.mean([central_private_anchor(inst.pooled, X_test, y_test, epsilon=eps, delta=1e-5,
                                                 seed=s)["test_error"] for s in (0, 1)]) for eps in (0.1, 10.0)}
    assert mean[0.1] > mean[10.0]
    assert mean[10.0] < inst.central()["test_error"] + 0.05
