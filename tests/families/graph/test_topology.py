"""Topologies of the decentralized algorithms: builders, seeds, and the clear errors of check_graph."""

from __future__ import annotations

import networkx as nx
import pytest

from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.families.graph.topology import (
    check_graph,
    complete_graph,
    describe_graph,
    grid_graph,
    make_graph,
    random_connected_graph,
    ring_graph,
)

NAMES = [f"node{i}" for i in range(6)]


def test_builders_give_connected_graphs_with_the_expected_degrees():
    ring = check_graph(ring_graph(NAMES), NAMES)
    grid = check_graph(grid_graph(NAMES), NAMES)  # 2 x 3
    full = check_graph(complete_graph(NAMES), NAMES)

    assert ring.degrees.tolist() == [2.0] * 6
    assert sorted(grid.degrees.tolist()) == [2.0, 2.0, 2.0, 2.0, 3.0, 3.0]
    assert full.degrees.tolist() == [5.0] * 6
    assert ring.neighbors[0] == (1, 5) and len(full.edges) == 15


def test_random_graph_is_connected_and_seeded():
    a = random_connected_graph(20, seed=3)
    b = random_connected_graph(20, seed=3)
    c = random_connected_graph(20, seed=4)

    assert nx.is_connected(a) and sorted(a.edges) == sorted(b.edges)
    assert sorted(a.edges) != sorted(c.edges)
    assert make_graph("random", 5, seed=0).graph["topology"] == "random"
    assert describe_graph(a)["nodes"][0] == "node0"


def test_grid_rows_must_divide():
    with pytest.raises(InvalidParameterError, match="'rows' parameter of grid_graph must be a divisor"):
        grid_graph(NAMES, rows=4)


@pytest.mark.parametrize("graph, match", [
    (nx.Graph([("node0", "node1"), ("node2", "node3"), ("node4", "node5")]), "disconnected"),
    (nx.path_graph(["node0", "node1", "node2", "node3", "node4", "node5", "node6"]), "have no agent"),
    (nx.path_graph(["node0", "node1", "node2", "node3", "node4"]), "have no node"),
])
def test_check_graph_errors_are_clear(graph, match):
    with pytest.raises(DeclarationError, match=match):
        check_graph(graph, NAMES)


def test_check_graph_refuses_directed_and_tiny_graphs():
    with pytest.raises(InvalidParameterError, match="undirected networkx.Graph"):
        check_graph(nx.DiGraph(ring_graph(NAMES)), NAMES)
    with pytest.raises(InvalidParameterError, match="at least 2 nodes"):
        check_graph(ring_graph(["a"]), ["a"])
    with pytest.raises(InvalidParameterError, match="'graph' parameter of make_graph"):
        make_graph("star", NAMES)
