"""The logistic template declares public gradient Lipschitz bounds (issue 12: eta="auto" in private runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cvxdp.model.curvature import estimate_lipschitz
from cvxdp_models.logistic.template import build

HERE = Path(__file__).parent


# total_samples = 225: the 300 samples' training share (0.75), the true public count (issue 36)
@pytest.mark.parametrize("model", [{"max_samples": 300}, {"max_samples": 300, "total_samples": 225},
                                   {"dataset": "breast_cancer", "kind": "binary", "reg": 0.01}])
def test_declared_bound_holds_and_reads_only_public_constants(model):
    inst = build(model, base_dir=HERE)
    for agent in inst.agents:
        assert agent.lipschitz is not None and agent.lipschitz > 0
        n = agent.layout.size
        rng = np.random.default_rng(0)
        for _ in range(3):  # the curvature at any point stays below the declared bound
            u = rng.uniform(-1, 1, n)
            assert estimate_lipschitz(agent.grad, u) <= agent.lipschitz * (1 + 1e-6)


def test_add_remove_bound_does_not_depend_on_the_agents_sample_count():
    inst = build({"max_samples": 300, "total_samples": 225}, base_dir=HERE)
    assert len({a.lipschitz for a in inst.agents}) == 1  # C^2/2: n_p is not fixed across neighbours
