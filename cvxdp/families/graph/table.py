"""The [algorithm] table of a case file -> one of the graph algorithms (MADMM, DVP, RADMM, MRADMM).

Imports flow one way: :mod:`.madmm` <- :mod:`.radmm` <- this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from ...params import check_choice
from .madmm import DVP, MADMM, GraphADMM
from .radmm import MRADMM, RADMM

#: The [algorithm] names of the decentralized family and the keys each one reads from the table. A case file
#: can hold the keys of several of them (``cvxdp run CASE --algorithm radmm``); each takes its own and ignores
#: the others' (and the consensus algorithms' rho / local_updates / tol_primal / tol_dual).
GRAPH_ALGORITHMS = ("madmm", "dvp", "radmm", "mradmm")
GRAPH_KEYS = {"graph", "edges", "graph_seed", "edge_prob", "init_scale", "local_solver", "tol", "eta", "q",
              "theta", "theta_growth", "gamma"}
_COMMON = ("graph", "graph_seed", "edge_prob", "init_scale", "local_solver", "tol", "rounds")
_OWN = {"madmm": ("eta", "q", "theta", "theta_growth"), "dvp": ("theta",), "radmm": ("eta", "gamma"),
        "mradmm": ("eta", "q", "gamma")}


def graph_algorithm(name: str, table: Mapping[str, Any]) -> GraphADMM:
    """Build MADMM / DVP / RADMM / MRADMM from an [algorithm] table (without its ``name``).

    ``graph`` is a topology name; ``edges = [["node0", "node1"], ...]`` gives the graph itself.
    """
    from ...errors import ConfigError
    check_choice(name, "name", "graph_algorithm", GRAPH_ALGORITHMS)
    params = {k: table[k] for k in (*_COMMON, *_OWN[name]) if k in table}
    if "edges" in table:
        edges = table["edges"]
        if not isinstance(edges, list) or not all(isinstance(e, (list, tuple)) and len(e) == 2 for e in edges):
            raise ConfigError(f"The 'edges' entry of [algorithm] must be a list of [node, node] pairs. Got {edges!r}.")
        if "graph" in table:
            raise ConfigError("[algorithm]: give either 'graph' (a topology name) or 'edges', not both.")
        g = nx.Graph()
        g.add_edges_from((str(u), str(v)) for u, v in edges)
        g.graph["topology"] = "given"
        params["graph"] = g
    cls = {"madmm": MADMM, "dvp": DVP, "radmm": RADMM, "mradmm": MRADMM}[name]
    graph = params.pop("graph", None)
    return cls(graph, **params)
