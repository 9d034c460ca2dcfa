"""The power template declares each zone's curvature bound from public data (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.sparse as sp

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

from cvxdp.model.curvature import estimate_lipschitz
from cvxdp_models.power.template import build, build_agents  # noqa: E402

ZONES = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]


def _restricted_curvature(agent, model) -> float:
    """The exact curvature of the zone's objective on the null space of all its equality constraints (dense)."""
    A = sp.csr_matrix(model._constraints()[0].args[0].args[0].value).toarray()
    u = np.random.default_rng(1).uniform(-1, 1, agent.layout.size)
    g0 = agent.grad(u)
    H = np.column_stack([agent.grad(u + e) - g0 for e in np.eye(agent.layout.size)])  # exact: quadratic
    N = sl.null_space(A)
    return float(np.linalg.eigvalsh(N.T @ H @ N)[-1])


@pytest.mark.parametrize("model", [{"objective": "balance"}, {"objective": "cost"},
                                   {"objective": "cost", "penalty": 0.5}])
def test_declared_constant_bounds_the_curvature_on_the_feasible_set(model):
    from cvxdp_models.power.network import load_network
    from cvxdp_models.power.zones import parse_zones

    case = load_network("case14")
    options = {"objective": model["objective"], "penalty": model.get("penalty")}
    if model["objective"] == "balance":
        options["penalty"] = 1.0
    zm = build_agents(case, parse_zones(case, ZONES), **options)
    for agent, m in zip(zm.agents, zm.models):
        u = np.random.default_rng(1).uniform(-1, 1, agent.layout.size)
        full = estimate_lipschitz(agent.grad, u)  # the Hessian's largest eigenvalue (diagonal)
        exact = _restricted_curvature(agent, m)
        # a valid bound (the majorization eta must meet holds between feasible points), never above the
        # Hessian's, and tight: within 15 % of the exact restricted curvature on case14
        assert exact * (1 - 1e-9) <= agent.lipschitz <= full * (1 + 1e-9)
        assert agent.lipschitz <= 1.15 * exact
        if model["objective"] == "balance":
            assert agent.lipschitz < 0.85 * full  # 1.60-1.67 instead of 2: eta = 1 is above half of it


def test_declared_constant_does_not_read_the_loads():
    base = build({"network": "case14", "zones": ZONES, "objective": "cost"}, base_dir=".")
    scaled = build({"network": "case14", "zones": ZONES, "objective": "cost", "load_scale": 1.3}, base_dir=".")
    assert [a.lipschitz for a in base.agents] == [a.lipschitz for a in scaled.agents]


def test_the_shipped_eta_of_one_draws_no_step_size_warning():
    # cases/case14_3zones.toml and `cvxdp run --network` use rho = eta = 1; the balance objective is quadratic, so
    # eta must exceed half the curvature bound (0.80-0.83 here), not the bound itself
    import warnings

    import cvxdp
    from cvxdp.errors import StepSizeWarning

    inst = build({"network": "case14", "zones": ZONES, "objective": "balance"}, base_dir=".")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=2), seed=0)
    assert not [w for w in caught if issubclass(w.category, StepSizeWarning)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.solve(inst.agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=0.75, rounds=2), seed=0)
    assert {w.message.agent for w in caught if issubclass(w.category, StepSizeWarning)} == {"zone1", "zone2", "zone3"}
