"""The update math's whole-array paths (every coordinate shared, in order) give the scatter's numbers bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from cvxdp.families.consensus.updates import (
    dual_update,
    global_update,
    linearized_updates,
    selectors,
    whole_range,
)


@pytest.mark.parametrize(("idx", "size", "expected"), [
    ([0, 1, 2, 3], 4, True), ([], 0, True), ([0, 2, 1, 3], 4, False), ([0, 1, 1, 3], 4, False),
    ([1, 2, 3], 3, False), ([0, 1, 2], 4, False), ([0, 0, 3, 3], 4, False)])
def test_whole_range(idx, size, expected):
    assert whole_range(np.array(idx, dtype=int), size) is expected


def _scatter_global(shared, duals, gidx, size, rho):
    """The scatter form (np.add.at for every agent), as global_update computed it before."""
    total, count = np.zeros(size), np.zeros(size)
    for ez, lam, idx in zip(shared, duals, gidx):
        np.add.at(total, idx, ez - lam / (rho[idx] if np.ndim(rho) else rho))
        np.add.at(count, idx, 1.0)
    return total / np.maximum(count, 1.0)


@pytest.mark.parametrize("per_coordinate", [False, True])
def test_global_update_equals_the_scatter(per_coordinate):
    rng = np.random.default_rng(0)
    size = 50
    gidx = [np.arange(size), rng.permutation(size)[:30], np.arange(size), np.sort(rng.permutation(size)[:20])]
    shared = [rng.normal(size=g.size) * 1e3 for g in gidx]
    duals = [rng.normal(size=g.size) for g in gidx]
    rho = rng.uniform(0.1, 3.0, size) if per_coordinate else 0.37
    assert np.array_equal(global_update(shared, duals, selectors(gidx, size), size, rho),
                          _scatter_global(shared, duals, gidx, size, rho))


def test_dual_update_equals_its_formula():
    rng = np.random.default_rng(1)
    lam, bw, ez = (rng.normal(size=40) for _ in range(3))
    for rho in (0.3, rng.uniform(0.1, 2.0, 40)):
        assert np.array_equal(dual_update(lam, rho, bw, ez), lam + rho * (bw - ez))


@pytest.mark.parametrize("J", [1, 3])
def test_linearized_updates_same_bits_for_every_form_of_the_shared_set(J):
    """``sidx`` as every index in order, as ``slice(None)``, and (reference) the formula with an explicit gather."""
    rng = np.random.default_rng(2)
    n = 30
    Q = rng.normal(size=(n, n))
    grad = lambda u: Q.T @ (Q @ u) - 1.0  # noqa: E731
    project = lambda v, c: (np.clip(v, -0.5, 0.5), None)  # noqa: E731
    u0, bw, lam = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    kw = {"grad": grad, "project": project, "bw": bw, "lam": lam, "rho": 0.7, "eta": 5.0, "J": J, "perturb": None,
          "placement": None}
    a = linearized_updates(u0, sidx=np.arange(n), **kw)[0]
    b = linearized_updates(u0, sidx=slice(None), **kw)[0]
    u, total = u0, np.zeros(n)
    for _ in range(J):
        u = np.clip((5.0 * u + (0.7 * bw + lam) - grad(u)) / np.full(n, 5.0 + 0.7), -0.5, 0.5)
        total += u
    assert np.array_equal(a, b) and np.array_equal(a, total / J)
    # a proper subset still gathers: the local-only coordinates get eta alone
    sub = np.array([0, 3, 7])
    c = linearized_updates(u0, sidx=sub, **{**kw, "bw": bw[:3], "lam": lam[:3]})[0]
    assert c.shape == (n,) and not np.array_equal(c, a)
