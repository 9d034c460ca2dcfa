"""Network topologies for the decentralized algorithms (SPEC §3-§4): connected undirected graphs.

The nodes of a graph are the agents' names. Builders:

* :func:`random_connected_graph` — Erdos-Renyi ``G(n, p)`` drawn with one seeded generator until connected
  (the generator is created once and never reseeded);
* :func:`ring_graph`, :func:`grid_graph`, :func:`complete_graph`;
* :func:`make_graph` — any of them by name, or a given :class:`networkx.Graph` passed through.

:func:`check_graph` is what the algorithms call: it refuses a graph that is not a networkx ``Graph``, is
disconnected, has a node without an agent or an agent without a node, and returns the neighbour lists and
degrees ``V_i = |V_i|`` in the agents' order.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from ...errors import DeclarationError, InvalidParameterError, check_choice, check_float, check_int, fail

TOPOLOGIES = ("random", "ring", "grid", "complete")

__all__ = ["TOPOLOGIES", "Topology", "check_graph", "complete_graph", "default_edge_prob", "describe_graph",
           "grid_graph", "make_graph", "random_connected_graph", "ring_graph"]


def _names(nodes: int | Sequence[Hashable], owner: str) -> list:
    if isinstance(nodes, bool):
        raise fail("nodes", owner, "an int in [1, inf) or a sequence of node names", nodes)
    if isinstance(nodes, (int, np.integer)):
        n = check_int(int(nodes), "nodes", owner, 1)
        return [f"node{i}" for i in range(n)]
    names = list(nodes)
    if not names or len(set(names)) != len(names):
        raise fail("nodes", owner, "a non-empty sequence of unique node names", nodes)
    return names


def default_edge_prob(n: int) -> float:
    """``min(1, max(0.3, 2 ln(n) / n))``: comfortably above the connectivity threshold ``ln(n)/n``."""
    if n <= 2:
        return 1.0
    return min(1.0, max(0.3, 2.0 * math.log(n) / n))


def random_connected_graph(nodes: int | Sequence[Hashable], *, edge_prob: float | None = None, seed: int = 0,
                           max_tries: int = 1000) -> nx.Graph:
    """A connected Erdos-Renyi graph ``G(n, p)``: draws with one generator until the draw is connected.

    Parameters
    ----------
    nodes : int or sequence of names
        ``n`` (nodes named ``node0 .. node{n-1}``) or the node names.
    edge_prob : float, optional
        ``p`` in (0, 1]; default :func:`default_edge_prob`.
    seed : int
        Seed of the generator (created once). Same seed, same graph.
    max_tries : int
        Draws before giving up with an error that suggests a larger ``edge_prob``.
    """
    owner = "random_connected_graph"
    names = _names(nodes, owner)
    n = len(names)
    p = default_edge_prob(n) if edge_prob is None else check_float(edge_prob, "edge_prob", owner, 0.0, 1.0,
                                                                     closed="right")
    seed = check_int(seed, "seed", owner, 0)
    rng = np.random.default_rng(seed)
    iu, ju = np.triu_indices(n, k=1)
    for _ in range(check_int(max_tries, "max_tries", owner, 1)):
        keep = rng.random(iu.size) < p
        g = nx.Graph()
        g.add_nodes_from(names)
        g.add_edges_from((names[i], names[j]) for i, j in zip(iu[keep], ju[keep]))
        if nx.is_connected(g):
            g.graph["topology"] = "random"
            g.graph["edge_prob"] = p
            g.graph["seed"] = seed
            return g
    raise InvalidParameterError(f"{owner}: no connected graph on {n} nodes in {max_tries} draws with "
                                f"edge_prob={p:g}; use a larger edge_prob.")


def ring_graph(nodes: int | Sequence[Hashable]) -> nx.Graph:
    """The cycle ``node0 - node1 - ... - node{n-1} - node0`` (a single edge for n = 2, none for n = 1)."""
    names = _names(nodes, "ring_graph")
    g = nx.Graph()
    g.add_nodes_from(names)
    if len(names) > 1:
        g.add_edges_from(zip(names, names[1:] + names[:1]))
    g.graph["topology"] = "ring"
    return g


def grid_graph(nodes: int | Sequence[Hashable], *, rows: int | None = None) -> nx.Graph:
    """A ``rows x cols`` 2-D grid (4-neighbourhood) filled row by row with the nodes.

    ``rows`` defaults to the largest divisor of n not above sqrt(n) (a prime n gives a path).
    """
    owner = "grid_graph"
    names = _names(nodes, owner)
    n = len(names)
    if rows is None:
        rows = max(r for r in range(1, int(math.isqrt(n)) + 1) if n % r == 0)
    rows = check_int(rows, "rows", owner, 1, n)
    if n % rows:
        raise fail("rows", owner, f"a divisor of the number of nodes ({n})", rows)
    cols = n // rows
    g = nx.Graph()
    g.add_nodes_from(names)
    for r in range(rows):
        for c in range(cols):
            k = r * cols + c
            if c + 1 < cols:
                g.add_edge(names[k], names[k + 1])
            if r + 1 < rows:
                g.add_edge(names[k], names[k + cols])
    g.graph["topology"] = "grid"
    g.graph["rows"] = rows
    return g


def complete_graph(nodes: int | Sequence[Hashable]) -> nx.Graph:
    """Every pair of nodes connected."""
    names = _names(nodes, "complete_graph")
    g = nx.complete_graph(names)
    g.graph["topology"] = "complete"
    return g


def make_graph(kind: str | nx.Graph, nodes: int | Sequence[Hashable], *, seed: int = 0,
               edge_prob: float | None = None, rows: int | None = None) -> nx.Graph:
    """A topology by name ("random", "ring", "grid", "complete") over ``nodes``, or a given graph as is."""
    if isinstance(kind, nx.Graph):
        return kind
    check_choice(kind, "graph", "make_graph", TOPOLOGIES)
    if kind == "random":
        return random_connected_graph(nodes, edge_prob=edge_prob, seed=seed)
    if kind == "ring":
        return ring_graph(nodes)
    if kind == "grid":
        return grid_graph(nodes, rows=rows)
    return complete_graph(nodes)


@dataclass(frozen=True)
class Topology:
    """A checked graph in the agents' order: neighbour indices and degrees ``V_i``."""

    graph: nx.Graph
    names: tuple[str, ...]
    neighbors: tuple[tuple[int, ...], ...]
    degrees: np.ndarray  # V_i, float array

    @property
    def edges(self) -> list[tuple[int, int]]:
        """Edges as index pairs ``(i, j)``, ``i < j``."""
        return [(i, j) for i, nb in enumerate(self.neighbors) for j in nb if i < j]

    def describe(self) -> dict:
        return describe_graph(self.graph)


def describe_graph(graph: nx.Graph) -> dict:
    """JSON-able description: topology attributes, nodes, edges."""
    return {**{k: v for k, v in graph.graph.items() if isinstance(v, (str, int, float))},
            "nodes": [str(v) for v in graph.nodes], "edges": [[str(u), str(v)] for u, v in graph.edges]}


def check_graph(graph: object, names: Sequence[str], owner: str = "the graph") -> Topology:
    """Check ``graph`` against the agents' ``names`` and return its :class:`Topology`.

    Raises
    ------
    InvalidParameterError
        Not a networkx ``Graph`` (directed graphs and multigraphs are refused), or fewer than 2 nodes.
    DeclarationError
        Disconnected; a node without an agent; an agent without a node; a self-loop.
    """
    if not isinstance(graph, nx.Graph) or graph.is_directed() or graph.is_multigraph():
        raise fail("graph", owner, "an undirected networkx.Graph (or a topology name)", type(graph).__name__)
    names = list(names)
    nodes = set(graph.nodes)
    missing = [n for n in names if n not in nodes]
    if missing:
        raise DeclarationError(f"{owner}: agent(s) {', '.join(map(repr, missing))} have no node in the graph "
                               f"(its nodes are {sorted(map(str, nodes))}); the graph's nodes must be the agents' "
                               "names.")
    extra = [n for n in graph.nodes if n not in set(names)]
    if extra:
        raise DeclarationError(f"{owner}: node(s) {', '.join(map(repr, extra))} of the graph have no agent "
                               "(no data); every node needs an agent of the same name.")
    if len(names) < 2:
        raise InvalidParameterError(f"{owner}: a decentralized run needs at least 2 nodes. Got {len(names)}.")
    loops = list(nx.selfloop_edges(graph))
    if loops:
        raise DeclarationError(f"{owner}: self-loop at node {loops[0][0]!r}; neighbours exclude the node itself.")
    if not nx.is_connected(graph):
        parts = sorted((sorted(map(str, c)) for c in nx.connected_components(graph)), key=len)
        raise DeclarationError(f"{owner}: the graph is disconnected ({len(parts)} components, e.g. "
                               f"{parts[0]}); ADMM over a network needs a connected graph.")
    index = {n: i for i, n in enumerate(names)}
    neighbors = tuple(tuple(sorted(index[m] for m in graph.neighbors(n))) for n in names)
    degrees = np.array([len(nb) for nb in neighbors], dtype=float)
    return Topology(graph, tuple(names), neighbors, degrees)
