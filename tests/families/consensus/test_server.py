"""The consensus coordinator's per-round bookkeeping: O(P) work per round, the same numbers as before."""

from __future__ import annotations

import numpy as np
import pytest

import cvxdp
from cvxdp.families.consensus.server import copies_mean, copies_mismatch, dual_residual, relaxed_targets
from cvxdp.families.consensus.updates import selectors
from cvxdp.privacy import ObjectivePerturbation


@pytest.mark.parametrize("weighted", [False, True])
def test_dual_residual_equals_the_per_agent_norm(weighted):
    rng = np.random.default_rng(0)
    n, agents = 40, 25
    gidx = [np.sort(rng.choice(n, size=rng.integers(1, 8), replace=False)) for _ in range(agents)]
    w, w_prev = rng.normal(size=n), rng.normal(size=n)
    rho = rng.uniform(0.5, 2.0, size=n) if weighted else 1.7
    per_agent = float(np.linalg.norm(np.concatenate([(rho * (w - w_prev))[g] for g in gidx])))  # the old O(P n) form
    assert dual_residual(rho, w, w_prev, np.concatenate(gidx)) == per_agent


def test_dual_residual_from_stacked_copies_is_the_gathers_number():
    """Every agent holding every coordinate: P whole-array copies into a work array, the same vector and norm."""
    rng = np.random.default_rng(1)
    n, agents = 1000, 7
    w, w_prev = rng.normal(size=n), rng.normal(size=n)
    all_gidx = np.concatenate([np.arange(n)] * agents)
    for rho in (0.3, rng.uniform(0.5, 2.0, size=n)):
        assert dual_residual(rho, w, w_prev, all_gidx, np.empty(n * agents)) == \
            dual_residual(rho, w, w_prev, all_gidx)


def test_noise_plans_are_calibrated_again_only_when_the_weight_changes(toy_agents, monkeypatch):
    calls = []
    original = ObjectivePerturbation.noise_plan

    def counting(self, agent, **kwargs):
        calls.append((agent.name, kwargs["min_weight"]))
        return original(self, agent, **kwargs)

    monkeypatch.setattr(ObjectivePerturbation, "noise_plan", counting)
    privacy = cvxdp.ObjectivePerturbation(epsilon=1.0, delta=1e-6, noise="gaussian")
    fixed = cvxdp.solve(toy_agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=2.0, rounds=5), privacy=privacy, seed=0)
    assert len(fixed.history) == 5
    # one check per agent before the run, then one calibration per agent at the coordinator (its copy of the ledger)
    # and one at the node (the noise it draws): eta never changes
    assert len(calls) == 3 * len(toy_agents)
    calls.clear()
    growing = cvxdp.LinearizedADMM(rho=1.0, eta=cvxdp.schedules.LinearCapped(2.0, 0.5, 10.0), rounds=4)
    cvxdp.solve(toy_agents, algorithm=growing, privacy=privacy, seed=0)
    weights = {w for _, w in calls[len(toy_agents):]}
    # a new weight each round, calibrated by the coordinator and by the node
    assert len(calls) == len(toy_agents) * (1 + 2 * len(weights)) and len(weights) == 4


def test_whole_range_selectors_give_the_scatters_numbers_bit_for_bit():
    """An agent holding every coordinate is read through ``slice(None)``: the copies' sums, mismatch, mean and
    targets are the same numbers as through its index array."""
    rng = np.random.default_rng(3)
    size = 50
    gidx = [np.arange(size), np.arange(size), rng.choice(size, 20, replace=False), np.arange(size)]
    sel = selectors(gidx, size)
    assert [isinstance(s, slice) for s in sel] == [True, True, False, True]
    shared = [rng.normal(size=len(g)) for g in gidx]
    w = rng.normal(size=size)
    assert copies_mismatch(shared, sel, size) == copies_mismatch(shared, gidx, size)
    assert np.array_equal(copies_mean(shared, sel, size), copies_mean(shared, gidx, size))
    full = [np.arange(size)] * 3  # every agent holds every coordinate: the holders are one number
    sums = [rng.normal(size=size) for _ in full]
    assert copies_mismatch(sums, selectors(full, size), size, 3.0) == copies_mismatch(sums, full, size)
    assert np.array_equal(copies_mean(sums, selectors(full, size), size, 3.0), copies_mean(sums, full, size))
    for relaxation in (1.0, 1.6):
        sliced, gathered = relaxed_targets(w, shared, sel, relaxation), relaxed_targets(w, shared, gidx, relaxation)
        assert all(np.array_equal(a, b) for a, b in zip(sliced, gathered))
    sliced = relaxed_targets(w, shared, sel, 1.0)
    sliced[0][0] += 1.0  # a target is the agent's own array, never a view of w
    assert sliced[0][0] != w[0] and not np.shares_memory(sliced[0], sliced[1])
