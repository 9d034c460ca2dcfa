"""Fixtures shared by the decentralized ERM tests (M-ADMM and R-ADMM): the paper's logistic ERM networks."""

import pytest

from cvxdp_models.erm import central_optimum, make_erm


def _erm(nodes: int):
    inst = make_erm({"nodes": nodes, "C": 10.0, "rho": 1.0, "max_samples": 300})
    return inst, central_optimum(inst.nodes)


@pytest.fixture(scope="module")
def erm5():
    """Breast-cancer logistic ERM on a 5-node network, with its centralized optimum."""
    return _erm(5)


@pytest.fixture(scope="module")
def erm20():
    """The same on a 20-node network."""
    return _erm(20)
