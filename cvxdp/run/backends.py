"""Backends: the protocol, the serial backend (the embedded default) and the registry (Ray is an extra,
:mod:`cvxdp.run.ray`). The protocol: where the nodes live and how the round loop talks to them.

A backend is a transport only. It builds every node where it will run (from a picklable
:class:`NodeSpec`), calls named methods on the nodes and returns their results in node order. It knows
nothing about algorithms: the same seeds give the same numbers on every backend because every random
generator lives inside its node.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import fail


@dataclass(frozen=True)
class NodeSpec:
    """How to build one node where its party runs: ``build(agent, seed, *args)``, with the party's own agent and
    entropy (a simulation's backend holds both; in a federation each party supplies its own). Picklable.

    Attributes
    ----------
    name : str
        The agent's name (errors name it).
    build : callable
        A node class (:class:`cvxdp.model.Node`) or a factory returning one.
    args : tuple
        The public arguments after the agent and the seed (the algorithm, solvers, flags, noise plans ...).
    work : float, default 1.0
        A public estimate of the node's work per round, relative to the other nodes (the families give the
        agent's number of variables: a shape, not data). A backend that places several nodes per worker
        balances the workers by it (:func:`balanced_groups`); it never changes the numbers.
    public : mapping
        The run's public values this node needs beyond the algorithm (a graph node's ``degree``; a vertical party's
        ``b1`` and number of ``parties``): in a federation, a party builds its node from them, its own agent, its
        own policy and its own entropy.
    """

    name: str
    build: Callable[..., Any]
    args: tuple = ()
    work: float = 1.0
    public: Mapping[str, Any] = field(default_factory=dict)

    def make(self, agent: Any, seed: Any) -> Any:
        """The node, built from the party's own ``agent`` and ``seed``."""
        return self.build(agent, seed, *self.args)


def balanced_blocks(work: Sequence[float], k: int) -> list[list[int]]:
    """Split node positions ``0..n-1`` into ``min(k, n)`` contiguous, non-empty blocks (in node order) whose
    largest total ``work`` is as small as contiguous blocks allow (bisection on the capacity, greedy fill).
    Equal work gives blocks whose sizes differ by at most one, the larger first."""
    n = len(work)
    if n == 0:
        return []
    k = min(k, n)
    if len(set(work)) == 1:
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        starts = [sum(sizes[:i]) for i in range(k)]
        return [list(range(a, a + size)) for a, size in zip(starts, sizes)]

    def fill(capacity: float) -> list[list[int]]:
        blocks, current, total = [], [], 0.0
        for i, w in enumerate(work):
            if current and total + w > capacity:
                blocks.append(current)
                current, total = [], 0.0
            current.append(i)
            total += w
        return [*blocks, current]

    low, high = max(work), float(sum(work))
    for _ in range(60):
        middle = (low + high) / 2
        if len(fill(middle)) <= k:
            high = middle
        else:
            low = middle
    blocks = fill(high)
    while len(blocks) < k:  # more workers than blocks: split the heaviest block of several nodes at its middle
        j = max((b for b in range(len(blocks)) if len(blocks[b]) > 1),
                key=lambda b: sum(work[i] for i in blocks[b]))
        block, half, total = blocks[j], sum(work[i] for i in blocks[j]) / 2, 0.0
        cut = 1
        for cut in range(1, len(block)):
            total += work[block[cut - 1]]
            if total >= half:
                break
        blocks[j:j + 1] = [block[:cut], block[cut:]]
    return blocks


def balanced_groups(work: Sequence[float], k: int, *, refine_up_to: int = 100) -> list[list[int]]:
    """Split node positions ``0..n-1`` into ``min(k, n)`` non-empty groups (each in node order, the groups ordered
    by their first node) whose largest total ``work`` is small: the heaviest node first to the lightest group
    (LPT), then moves and swaps of single nodes between the heaviest group and another while they lower the
    heavier of the two (for up to ``refine_up_to`` nodes; LPT alone is within 4/3 of the optimum). Not contiguous:
    on case2869pegase's 16 zones the best contiguous split by variables puts 19,395 and 18,880 on two workers,
    these groups 19,154 and 19,121 (the best split: 19,138 and 19,137). Equal work gives :func:`balanced_blocks` (contiguous, equal counts)."""
    n = len(work)
    if n == 0:
        return []
    k = min(k, n)
    if len(set(work)) == 1:
        return balanced_blocks(work, k)
    w = [float(x) for x in work]
    heap = [(0.0, j) for j in range(k)]  # (load, group): the lightest group first, ties to the lower index
    groups: list[list[int]] = [[] for _ in range(k)]
    for i in sorted(range(n), key=lambda i: (-w[i], i)):
        load, j = heapq.heappop(heap)
        groups[j].append(i)
        heapq.heappush(heap, (load + w[i], j))
    loads = [sum(w[i] for i in g) for g in groups]
    for _ in range(2 * n if n <= refine_up_to else 0):  # each step lowers the heaviest pair
        h = max(range(k), key=lambda j: (loads[j], -j))
        best: tuple[float, int, int, int | None] | None = None
        for g in range(k):
            if g == h:
                continue
            for a in groups[h]:
                for b in [None, *groups[g]]:  # move a, or swap a for a lighter b
                    d = w[a] - (0.0 if b is None else w[b])
                    if d <= 0:
                        continue
                    top = max(loads[h] - d, loads[g] + d)
                    if top < loads[h] * (1 - 1e-12) and (best is None or top < best[0]):
                        best = (top, g, a, b)
        if best is None:
            break
        _, g, a, b = best
        groups[h].remove(a)
        groups[g].append(a)
        if b is not None:
            groups[g].remove(b)
            groups[h].append(b)
        loads[h], loads[g] = sum(w[i] for i in groups[h]), sum(w[i] for i in groups[g])
    return sorted((sorted(g) for g in groups), key=lambda g: g[0])


def method_name(method: Callable[..., Any]) -> str:
    """The name a backend calls on each node: ``method`` must be a method of :class:`cvxdp.model.Node` or of a
    node class (a function defined in a class), e.g. ``Node.step``."""
    name, qualname = getattr(method, "__name__", None), getattr(method, "__qualname__", "")
    if not callable(method) or not name or "." not in qualname or name.startswith("_"):
        raise fail("method", "Backend.call", "a public method of a node class, e.g. cvxdp.model.Node.step", method)
    return name


class Backend(ABC):
    """Lifecycle: :meth:`start` (nodes built where they run), :meth:`call` per round, :meth:`close`."""

    @abstractmethod
    def start(self, specs: Sequence[NodeSpec], agents: Sequence[Any] | None, seeds: Sequence[Any] | None) -> None:
        """Build one node per spec (in order) with ``spec.make(agent, seed)``. A simulation passes every party's
        agent and seed; a federation passes None and each party supplies its own."""

    @abstractmethod
    def call(self, method: Callable[..., Any], args: Sequence[tuple] | None = None, *,
             round: int | None = None) -> list[Any]:
        """``method`` on every node with ``args[i]``: a method of :class:`cvxdp.model.Node` or of the node class
        the family built (``Node.step``, ``ConsensusNode.polished``), dispatched to each node's own class; the
        results in node order.

        ``args=None`` calls every node without arguments. ``round`` is only used to name the round in errors.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    @property
    def placement(self) -> str | None:
        """A one-line note on where the nodes of the current run live when it is worth saying (the progress line
        shows it), e.g. why a Ray backend runs them serially; None otherwise."""
        return None


class SerialBackend(Backend):
    """Runs the nodes in order in the calling process (the embedded default)."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.names: list[str] = []

    def start(self, specs: Sequence[NodeSpec], agents: Sequence[Any] | None, seeds: Sequence[Any] | None) -> None:
        self.names = [s.name for s in specs]
        self.nodes = [s.make(a, seed) for s, a, seed in zip(specs, agents, seeds)]

    def call(self, method: Callable[..., Any], args: Sequence[tuple] | None = None, *,
             round: int | None = None) -> list[Any]:
        name = method_name(method)
        if args is None:
            return [getattr(node, name)() for node in self.nodes]
        return [getattr(node, name)(*a) for node, a in zip(self.nodes, args)]
