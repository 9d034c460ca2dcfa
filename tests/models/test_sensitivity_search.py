"""Deterministic worst-case search per template: true gradient (or release) change / declared sensitivity.

For each template the search enumerates neighbouring data sets under the relation the agents **declare**
and evaluation points in W (OutPert: the engine evaluates the gradient at Proj_W(u), so points outside W
are searched through that projection), and checks max true/declared <= 1. Before issue 11 the logistic
builders declared "add/remove one sample" while normalising by the data set's own count: the search found
1.115 (binary, two equal agents) and above, and OutPert's gradient was taken at the noisy output (1.87 on
the box-tightened binary bound at d = 2, bound 0.1).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import cvxdp
from cvxdp_models.logistic.binary import binary_agents
from cvxdp_models.logistic.multiclass import multiclass_agents

ANGLES = np.linspace(0, 2 * np.pi, 8, endpoint=False)
CANDIDATE_X = [np.array([math.cos(a), math.sin(a)]) for a in ANGLES]


def _parts(labels_of, n=4, agents=2):
    rng = np.random.default_rng(0)
    parts = []
    for _ in range(agents):
        X = rng.normal(size=(n, 2))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        parts.append((X, labels_of(rng, n)))
    return parts


def _neighbours(parts, relation, labels):
    """Every neighbour of ``parts`` under ``relation`` with candidate samples (x, y) from the grid."""
    add_remove = relation.startswith("add/remove")
    for p, (X, y) in enumerate(parts):
        if add_remove:
            for i in range(len(y)):  # remove sample i
                yield p, [(X2, y2) if q != p else (np.delete(X, i, 0), np.delete(y, i)) for q, (X2, y2) in enumerate(parts)]
            for x, lab in itertools.product(CANDIDATE_X, labels):  # add a sample
                yield p, [(X2, y2) if q != p else (np.vstack([X, x]), np.append(y, lab)) for q, (X2, y2) in enumerate(parts)]
        else:
            for i, x, lab in itertools.product(range(len(y)), CANDIDATE_X, labels):
                X3, y3 = X.copy(), y.copy()
                X3[i], y3[i] = x, lab
                yield p, [(X2, y2) if q != p else (X3, y3) for q, (X2, y2) in enumerate(parts)]


def _box_points(d, bound, outside=False):
    scale = 30.0 * bound if outside else bound
    corners = [np.array(c, dtype=float) * scale for c in itertools.product((-1.0, 1.0), repeat=d)]
    return corners + [np.zeros(d), np.full(d, 0.5 * scale)]


def _search(build, parts, labels, points, where=lambda u: u):
    """max over neighbours, agents and points of ||g(D) - g(D')||_q / declared_q, q in (1, 2)."""
    agents, _ = build(parts)
    relation = agents[0].sensitivity.relation
    worst = 0.0
    for _, nb in _neighbours(parts, relation, labels):
        agents_nb, _ = build(nb)
        for a, b in zip(agents, agents_nb):
            for u in points:
                diff = a.grad(where(u)) - b.grad(where(u))
                worst = max(worst, np.linalg.norm(diff, 2) / a.sensitivity.l2,
                            np.linalg.norm(diff, 1) / a.sensitivity.l1)
    return worst


def _binary_labels(rng, n):
    return np.where(np.arange(n) % 2 == 0, 1, -1)


@pytest.mark.parametrize("bound", [None, 0.1])
def test_binary_builder_default_is_sound(bound):
    parts = _parts(_binary_labels)
    build = lambda ps: binary_agents(ps, reg=0.01, clip=1.0, bound=bound)  # noqa: E731
    pts = _box_points(2, bound if bound else 2.0)
    assert _search(build, parts, (-1, 1), pts) <= 1.0 + 1e-12


def test_binary_public_total_add_remove_is_sound_and_tight():
    parts = _parts(_binary_labels)
    build = lambda ps: binary_agents(ps, reg=0.01, clip=1.0, total=20, relation="add_remove")  # noqa: E731
    ratio = _search(build, parts, (-1, 1), _box_points(2, 3.0))
    assert 0.5 < ratio <= 1.0 + 1e-12
    with pytest.raises(ValueError, match="relation='add_remove' needs the public sample count"):
        binary_agents(parts, reg=0.01, relation="add_remove")


def test_multiclass_builder_default_and_public_total_are_sound():
    parts = _parts(lambda rng, n: np.arange(n) % 3)
    for kw in ({}, {"total": 12, "relation": "add_remove"}, {"total": 12, "relation": "replace"}):
        build = lambda ps, kw=kw: multiclass_agents(ps, classes=3, bound=0.2, clip=1.0, **kw)  # noqa: E731
        assert _search(build, parts, (0, 1, 2), _box_points(6, 0.2)[:8]) <= 1.0 + 1e-12


def test_outpert_gradient_is_evaluated_inside_the_box():
    """Through cvxdp.solve: every gradient of a private OutPert run is taken in W, so the box-tightened
    bound holds where it is used; outside W it would not (at 30x the box the ratio is 1.6)."""
    parts = _parts(_binary_labels)
    bound = 0.1
    build = lambda ps: binary_agents(ps, reg=0.01, clip=1.0, bound=bound, total=8)  # noqa: E731
    agents, _ = build(parts)
    seen = []
    for a in agents:
        inner = a.gradient
        a.gradient = (lambda u, inner=inner: (seen.append(np.array(u)), inner(u))[1])
    mech = cvxdp.OutputPerturbation("gaussian", epsilon=0.3, delta=1e-5)
    res = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, local_updates=2, rounds=4),
                      privacy=mech, seed=0)
    assert res.history["max_violation"].max() > 0  # the released outputs do leave the box
    assert seen and max(np.max(np.abs(u)) for u in seen) <= bound + 1e-15
    outside = _box_points(2, bound, outside=True)
    projected = _search(build, parts, (-1, 1), outside, where=lambda u: np.clip(u, -bound, bound))
    raw = _search(build, parts, (-1, 1), outside)
    assert projected <= 1.0 + 1e-12 < raw  # the bound fails at the noisy point itself


def test_objpert_numbers_unchanged_by_the_gradient_projection(monkeypatch):
    """ObjPert's iterates are in W already: clipping them before the gradient changes no bit."""
    parts = _parts(_binary_labels)
    mech = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-5)
    alg = cvxdp.LinearizedADMM(rho=1.0, eta=1.0, local_updates=2, rounds=5)

    def run():
        agents, _ = binary_agents(parts, reg=0.01, clip=1.0, bound=0.5)
        return cvxdp.solve(agents, algorithm=alg, privacy=mech, seed=3)

    projected = run()
    from cvxdp.families.consensus.node import ConsensusNode

    monkeypatch.setattr(ConsensusNode, "_grad_point", lambda self, msg: None)
    raw = run()
    cols = [c for c in raw.history.columns if not c.endswith("time")]
    assert projected.history[cols].equals(raw.history[cols])
    assert all(np.array_equal(projected.local[k], raw.local[k]) for k in raw.local)


def test_erm_replace_one_is_sound():
    from cvxdp_models.erm import erm_agents

    rng = np.random.default_rng(1)
    parts = []
    for _ in range(2):
        X = rng.normal(size=(4, 2))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        parts.append((X, np.where(np.arange(4) % 2 == 0, 1.0, -1.0)))
    build = lambda ps: erm_agents(ps, C=2.0, rho=0.1)  # noqa: E731
    agents, _ = build(parts)
    assert agents[0].sensitivity.relation.startswith("replace")
    pts = [np.array(p) for p in itertools.product((-20.0, 0.0, 20.0), repeat=2)]
    assert _search(build, parts, (-1.0, 1.0), pts) <= 1.0 + 1e-12
    public = lambda ps: erm_agents(ps, C=2.0, rho=0.1, samples=[6, 6])  # noqa: E731
    assert public(parts)[0][0].sensitivity.relation.startswith("add/remove")
    assert 0.5 < _search(public, parts, (-1.0, 1.0), pts) <= 1.0 + 1e-12


def test_vertical_worst_case_sensitivity_is_sound():
    """Release D_m x_m: one row of D_m replaced, x_m anywhere in the ball ||x|| <= b (before and after)."""
    from cvxdp.families.sharing.params import worst_case_sensitivity

    rng = np.random.default_rng(2)
    N, d, b = 5, 2, 1.5
    D = rng.normal(size=(N, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    declared = worst_case_sensitivity(N, b)
    xs = [b * x for x in CANDIDATE_X]
    worst = 0.0
    for i, row in itertools.product(range(N), CANDIDATE_X):
        D2 = D.copy()
        D2[i] = row
        for x, x2 in itertools.product(xs, xs):
            worst = max(worst, np.linalg.norm(D @ x - D2 @ x2) / declared)
    assert 0.5 < worst <= 1.0


def test_power_alpha_adjacency_is_sound():
    pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")
    from pathlib import Path

    from cvxdp_models.power.template import build

    inst = build({"network": "case14", "zones": [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]],
                  "objective": "balance", "alpha": 0.05, "penalty": 2.0}, base_dir=Path("."))
    worst = 0.0
    for agent in inst.agents:
        pd = next(p for p in agent.problem.parameters() if p.name().endswith("_pd"))
        qd = next(p for p in agent.problem.parameters() if p.name().endswith("_qd"))
        pd0, qd0 = pd.value.copy(), qd.value.copy()
        pts = [np.random.default_rng(k).normal(size=agent.layout.size) for k in range(2)]
        try:
            for bus, sp, sq in itertools.product(range(len(pd0)), (-1, 1), (-1, 1)):
                pd.value = pd0 + sp * 0.05 * np.eye(len(pd0))[bus]
                qd.value = qd0 + sq * 0.05 * np.eye(len(qd0))[bus]
                g1 = [agent.grad(u) for u in pts]
                pd.value, qd.value = pd0, qd0
                for u, g in zip(pts, g1):
                    diff = g - agent.grad(u)
                    worst = max(worst, np.linalg.norm(diff, 1) / agent.sensitivity.l1,
                                np.linalg.norm(diff, 2) / agent.sensitivity.l2)
        finally:
            pd.value, qd.value = pd0, qd0
    assert worst == pytest.approx(1.0)
