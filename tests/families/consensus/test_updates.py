"""The update math's whole-array paths (every coordinate shared, in order) give the scatter's numbers bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from cvxdp.families.consensus.updates import (
    StepWork,
    dual_update,
    global_update,
    holders,
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


def test_holders_count_every_coordinates_agents():
    rng = np.random.default_rng(4)
    size = 20
    gidx = [np.arange(size), rng.permutation(size)[:7], np.arange(size)]
    count = holders(selectors(gidx, size), size)
    expected = np.zeros(size)
    for g in gidx:
        np.add.at(expected, g, 1.0)
    assert np.array_equal(count, expected)
    assert holders(selectors([np.arange(size)] * 3, size), size) == 3.0  # every agent holds every coordinate
    shared = [rng.normal(size=size) * 1e3 for _ in range(3)]
    duals = [rng.normal(size=size) for _ in range(3)]
    full = [np.arange(size)] * 3
    assert np.array_equal(global_update(shared, duals, selectors(full, size), size, 0.37, 3.0),
                          _scatter_global(shared, duals, full, size, 0.37))


@pytest.mark.parametrize("J", [1, 2])
@pytest.mark.parametrize("placement", [None, "objective", "output"])
def test_kept_work_arrays_give_the_same_bits_round_after_round(J, placement):
    """A node's StepWork (c kept while eta and rho stay, the anchor's and v's arrays reused) gives the numbers of
    fresh arrays, round after round, when eta and rho change, and the step never returns one of its arrays."""
    rng = np.random.default_rng(5)
    n = 25
    Q = rng.normal(size=(n, n))
    grad = lambda u: Q.T @ (Q @ u) - 1.0  # noqa: E731
    project = lambda v, c: (np.clip(v, -0.5, 0.5), None)  # noqa: E731
    noise = rng.normal(size=(50, n))
    work, u_fresh, u_kept, returned = StepWork(), rng.normal(size=n), None, []
    u_kept = u_fresh.copy()
    for t, (eta, rho) in enumerate([(5.0, 0.7), (5.0, 0.7), (6.0, 0.7), (6.0, 0.9), (6.0, 0.9)]):
        bw, lam = rng.normal(size=n), rng.normal(size=n)
        draws = iter(noise[t * 4:])
        perturb = (lambda x, d=draws: x + next(d)) if placement else None
        kw = {"grad": grad, "project": project, "sidx": slice(None), "bw": bw, "lam": lam, "rho": rho, "eta": eta,
              "J": J, "perturb": perturb, "placement": placement}
        fresh = linearized_updates(u_fresh, **kw)
        draws = iter(noise[t * 4:])
        kw["perturb"] = (lambda x, d=draws: x + next(d)) if placement else None
        kept = linearized_updates(u_kept, **kw, work=work)
        assert np.array_equal(fresh[0], kept[0]) and fresh[1] == kept[1]
        assert not any(np.shares_memory(kept[0], a) for a in [*work._arrays.values(), work._c])
        returned.append(kept[0])
        u_fresh, u_kept = fresh[0], kept[0]
    assert all(not np.shares_memory(a, b) for a, b in zip(returned, returned[1:]))


def test_one_update_keeps_the_sum_of_signed_zeros():
    """J = 1 returns 0 + u as the sum over J did (a -0.0 of the projection becomes +0.0), in a new array."""
    u0 = np.zeros(3)
    project = lambda v, c: (np.array([-0.0, 1.0, -2.0]), None)  # noqa: E731
    out = linearized_updates(u0, grad=lambda u: u, project=project, sidx=slice(None), bw=u0, lam=u0, rho=1.0,
                             eta=1.0, J=1, perturb=None, placement=None, work=StepWork())[0]
    assert np.array_equal(out, [0.0, 1.0, -2.0]) and not np.signbit(out[0])
