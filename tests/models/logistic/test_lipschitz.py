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


def _exact_hessian_norm(m, theta: np.ndarray) -> float:
    """||nabla^2 f_p(theta)||_2 of a multiclass model, from the Hessian written out (column-major vec):
    ``(1/I) sum_i (diag(p_i) - p_i p_i^T) kron x_i x_i^T``."""
    X = m.X_param.value
    Z = X @ theta
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    H = sum(np.kron(np.diag(p) - np.outer(p, p), np.outer(x, x)) for p, x in zip(P, X)) / m.total
    return float(np.linalg.eigvalsh(H)[-1])


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_multiclass_models_declare_their_public_bound(relation):
    """MulticlassLogistic.agent() declares C^2/2 (add/remove) or n_p C^2/(2 I) (replace): public constants only."""
    from cvxdp_models.logistic.multiclass import multiclass_agents

    rng = np.random.default_rng(0)
    parts = [(rng.normal(size=(n, 6)), rng.integers(0, 4, n)) for n in (20, 35)]
    total = 55 if relation == "add_remove" else None
    agents, models = multiclass_agents(parts, classes=4, bound=1.0, clip=1.5, total=total, relation=relation)
    for agent, m, (_, y) in zip(agents, models, parts):
        share = 1.0 if relation == "add_remove" else len(y) / 55
        assert agent.lipschitz == m.public_lipschitz == pytest.approx(0.5 * 1.5 ** 2 * share, rel=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multiclass_bound_is_above_the_true_curvature(seed):
    """The declared bound is >= the gradient's Lipschitz constant: the exact Hessian's largest eigenvalue and the
    engine's numerical estimate (power iteration on gradient differences), at points inside and far outside the
    box, on data with rows at the clip norm."""
    from cvxdp_models.logistic.multiclass import MulticlassLogistic

    rng = np.random.default_rng(seed)
    d, K, n = 5, 4, 30
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # every row at the clip norm C = 1
    m = MulticlassLogistic(X, rng.integers(0, K, n), classes=K, total=n, bound=1.0, name="a", clip=1.0)
    for scale in (0.0, 0.3, 1.0, 5.0):
        theta = rng.uniform(-scale, scale, (d, K))
        assert _exact_hessian_norm(m, theta) <= m.public_lipschitz
        assert estimate_lipschitz(m.gradient, theta.ravel(order="F")) <= m.public_lipschitz * (1 + 1e-6)


def test_multiclass_bound_is_reached():
    """The bound cannot be lowered: every row the same unit vector, two classes, theta = 0 and n_p = I give the
    Hessian eigenvalue C^2/2 exactly (a bound of C^2/4 would fail the test above's comparison here)."""
    from cvxdp_models.logistic.multiclass import MulticlassLogistic

    C, n = 2.0, 12
    X = np.tile(np.array([[0.6, 0.8, 0.0]]) * C, (n, 1))
    m = MulticlassLogistic(X, np.arange(n) % 2, classes=2, total=n, bound=1.0, name="a", clip=C)
    assert _exact_hessian_norm(m, np.zeros((3, 2))) == pytest.approx(m.public_lipschitz, rel=1e-12)
    assert estimate_lipschitz(m.gradient, np.zeros(6)) == pytest.approx(m.public_lipschitz, rel=1e-4)


def test_an_explicit_eta_estimates_no_curvature(monkeypatch):
    """With the bound declared, set-up with a given eta takes it as it is: no gradient call estimates one."""
    import cvxdp
    import cvxdp.model.curvature as curvature
    from cvxdp_models.logistic.multiclass import multiclass_agents

    calls = []
    real = curvature.estimate_lipschitz
    monkeypatch.setattr(curvature, "estimate_lipschitz", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    parts = [(rng.normal(size=(15, 4)), rng.integers(0, 3, 15)) for _ in range(2)]
    agents, _ = multiclass_agents(parts, classes=3, bound=1.0, clip=1.0, total=30)
    cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=0.1, eta=1.0, rounds=2), seed=0)
    assert calls == []
    agents, _ = multiclass_agents(parts, classes=3, bound=1.0, clip=1.0, total=30)
    for agent in agents:  # the twin without a declared bound estimates one per agent
        agent.lipschitz = None
    cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=0.1, eta=1.0, rounds=2), seed=0)
    assert len(calls) == 2
