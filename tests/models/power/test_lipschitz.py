"""The power template declares each zone's gradient Lipschitz constant from public data (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pandapower")

from cvxdp.step_sizes import estimate_lipschitz  # noqa: E402
from cvxdp_models.power.template import build  # noqa: E402

ZONES = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]


@pytest.mark.parametrize("model", [{"objective": "balance"}, {"objective": "cost"},
                                   {"objective": "cost", "penalty": 0.5}])
def test_declared_constant_is_the_exact_curvature(model):
    inst = build({"network": "case14", "zones": ZONES, **model}, base_dir=".")
    for agent in inst.agents:
        u = np.random.default_rng(1).uniform(-1, 1, agent.layout.size)
        assert agent.lipschitz == pytest.approx(estimate_lipschitz(agent.grad, u), rel=1e-6, abs=1e-12)


def test_declared_constant_does_not_read_the_loads():
    base = build({"network": "case14", "zones": ZONES, "objective": "cost"}, base_dir=".")
    scaled = build({"network": "case14", "zones": ZONES, "objective": "cost", "load_scale": 1.3}, base_dir=".")
    assert [a.lipschitz for a in base.agents] == [a.lipschitz for a in scaled.agents]
