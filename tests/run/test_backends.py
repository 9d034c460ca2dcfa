"""The backend protocol's helpers: balancing blocks (contiguous) and groups of nodes by their public work
estimates."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cvxdp.run import NodeSpec
from cvxdp.run.backends import balanced_blocks, balanced_groups


def best_contiguous_max(work: list[float], k: int) -> float:
    """Brute force: the least possible largest block over every split into min(k, n) contiguous blocks."""
    n = len(work)
    best = np.inf
    for cuts in itertools.combinations(range(1, n), min(k, n) - 1):
        bounds = (0, *cuts, n)
        best = min(best, max(sum(work[a:b]) for a, b in zip(bounds, bounds[1:])))
    return best


def test_equal_work_gives_blocks_of_equal_count_larger_first():
    assert balanced_blocks([1.0] * 5, 2) == [[0, 1, 2], [3, 4]]
    assert balanced_blocks([2.0] * 7, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert balanced_blocks([1.0] * 3, 8) == [[0], [1], [2]]
    assert balanced_blocks([], 2) == []


def test_heavy_node_gets_a_block_of_its_own():
    assert balanced_blocks([5.0, 1.0, 1.0, 1.0], 2) == [[0], [1, 2, 3]]
    assert balanced_blocks([1.0, 1.0, 1.0, 5.0], 2) == [[0, 1, 2], [3]]


def test_case2869pegase_zones_split_evenly():
    # the variables of case2869pegase's 16 automatic zones: equal counts put 23,675 and 14,600 on two workers
    sizes = [1631, 3159, 5793, 3339, 1571, 3902, 3341, 939, 1896, 951, 1179, 1654, 1001, 1396, 4007, 2516]
    blocks = balanced_blocks([float(s) for s in sizes], 2)
    assert [sum(sizes[i] for i in b) for b in blocks] == [19395, 18880]


@pytest.mark.parametrize("seed", range(40))
def test_blocks_are_contiguous_cover_every_node_and_are_optimal(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 10)), int(rng.integers(1, 5))
    work = [float(w) for w in rng.integers(1, 20, size=n)]
    blocks = balanced_blocks(work, k)
    assert len(blocks) == min(k, n) and all(blocks)
    assert [i for b in blocks for i in b] == list(range(n))  # contiguous, in node order
    assert max(sum(work[i] for i in b) for b in blocks) == pytest.approx(best_contiguous_max(work, k))


def best_groups_max(work: list[float], k: int) -> float:
    """Brute force: the least possible largest total over every assignment of the nodes to min(k, n) groups."""
    n, k = len(work), min(k, len(work))
    best = np.inf
    for assignment in itertools.product(range(k), repeat=n):
        if len(set(assignment)) == k:
            best = min(best, max(sum(w for w, a in zip(work, assignment) if a == g) for g in range(k)))
    return best


def test_groups_split_case2869pegase_zones_more_evenly_than_contiguous_blocks():
    sizes = [1631, 3159, 5793, 3339, 1571, 3902, 3341, 939, 1896, 951, 1179, 1654, 1001, 1396, 4007, 2516]
    groups = balanced_groups([float(s) for s in sizes], 2)
    assert sorted(i for g in groups for i in g) == list(range(16))
    # contiguous blocks: 19,395 and 18,880; the best split: 19,137 and 19,138
    assert sorted(sum(sizes[i] for i in g) for g in groups) == [19121, 19154]
    assert balanced_groups([1.0] * 5, 2) == [[0, 1, 2], [3, 4]]  # equal work: contiguous blocks, as before
    assert balanced_groups([5.0, 1.0, 1.0, 1.0], 2) == [[0], [1, 2, 3]]
    assert balanced_groups([], 3) == [] and balanced_groups([2.0, 1.0], 5) == [[0], [1]]


@pytest.mark.parametrize("seed", range(40))
def test_groups_cover_every_node_in_order_and_are_near_optimal(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 8)), int(rng.integers(1, 4))
    work = [float(w) for w in rng.integers(1, 20, size=n)]
    groups = balanced_groups(work, k)
    assert len(groups) == min(k, n) and all(groups)
    assert sorted(i for g in groups for i in g) == list(range(n))
    assert all(g == sorted(g) for g in groups) and [g[0] for g in groups] == sorted(g[0] for g in groups)
    largest = max(sum(work[i] for i in g) for g in groups)
    assert largest <= best_groups_max(work, k) * 4 / 3  # LPT's guarantee; the swaps only lower it
    assert largest <= best_contiguous_max(work, k)  # never worse than the best contiguous blocks


def test_node_spec_work_defaults_to_one():
    assert NodeSpec("a", dict).work == 1.0
