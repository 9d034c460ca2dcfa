"""Zone partitions of a network: shipped ones (lists of MATPOWER bus numbers) and automatic ones.

A partition is a list of arrays of bus positions. A valid partition puts every non-isolated bus in exactly
one zone, and every zone is non-empty and connected through in-service branches inside the zone.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import networkx as nx
import numpy as np

from cvxdp.errors import ConfigError

from .network import PowerCase

__all__ = ["bus_graph", "parse_zones", "validate_zones", "auto_zones", "zone_of_bus"]


def bus_graph(case: PowerCase) -> nx.Graph:
    """Undirected graph of bus positions joined by in-service branches (isolated buses left out)."""
    g = nx.Graph()
    g.add_nodes_from(int(i) for i in np.flatnonzero(case.bus_type != 4))
    on = case.branch_status
    g.add_edges_from(zip(case.f_bus[on].tolist(), case.t_bus[on].tolist()))
    return g


def _fmt(numbers: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(int(n)) for n in list(numbers)[:limit])
    return shown + (", ..." if len(numbers) > limit else "")


def validate_zones(case: PowerCase, zones: Sequence[np.ndarray]) -> None:
    """Raise :class:`ConfigError` unless ``zones`` (bus positions) is a connected partition of the buses."""
    if len(zones) < 1:
        raise ConfigError(
            "The 'zones' entry of [model] must list at least one zone. Got an empty list instead."
        )
    graph = bus_graph(case)
    seen: dict[int, int] = {}
    for z, zone in enumerate(zones, start=1):
        if len(zone) == 0:
            raise ConfigError(f"Zone {z} of {case.name} is empty; every zone needs at least one bus.")
        for i in zone:
            i = int(i)
            if i in seen:
                raise ConfigError(
                    f"Bus {int(case.bus_number[i])} of {case.name} is in zone {seen[i]} and in zone {z}; "
                    "every bus must be in exactly one zone."
                )
            seen[i] = z
    missing = sorted(set(graph.nodes) - set(seen))
    if missing:
        raise ConfigError(
            f"Buses {_fmt(case.bus_number[missing])} of {case.name} are in no zone "
            f"({len(missing)} missing); every bus must be in exactly one zone."
        )
    for z, zone in enumerate(zones, start=1):
        sub = graph.subgraph(int(i) for i in zone)
        if sub.number_of_nodes() and not nx.is_connected(sub):
            parts = sorted(
                (sorted(case.bus_number[list(c)].tolist()) for c in nx.connected_components(sub)), key=len
            )
            raise ConfigError(
                f"Zone {z} of {case.name} (buses {_fmt(case.bus_number[np.sort(zone)])}) is not connected: "
                f"it falls into {len(parts)} pieces, e.g. buses {_fmt(parts[0])} are cut off."
            )


def parse_zones(case: PowerCase, zones: object) -> list[np.ndarray]:
    """Turn a list of lists of MATPOWER bus numbers into validated zones of bus positions."""
    if not isinstance(zones, (list, tuple)) or not all(isinstance(z, (list, tuple)) for z in zones):
        raise ConfigError(
            f"The 'zones' entry of [model] must be a list of lists of bus numbers. Got {zones!r} instead."
        )
    out = []
    for z, zone in enumerate(zones, start=1):
        bad = [b for b in zone if isinstance(b, bool) or not isinstance(b, Integral)]
        if bad:
            raise ConfigError(
                f"Zone {z} in the 'zones' entry of [model] must list integer bus numbers. "
                f"Got {bad[0]!r} instead."
            )
        try:
            out.append(case.bus_index(zone))
        except ConfigError as exc:
            raise ConfigError(f"Zone {z}: {exc}") from None
    validate_zones(case, out)
    return out


def _order(zones: list[set[int]]) -> list[np.ndarray]:
    return [np.array(sorted(z), dtype=int) for z in sorted(zones, key=min)]


def _split(graph: nx.Graph, zone: set[int]) -> tuple[set[int], set[int]]:
    """Split a connected zone into two connected halves by growing a BFS ball from a peripheral bus."""
    sub = graph.subgraph(zone)
    start = min(nx.periphery(sub)) if len(zone) > 2 else min(zone)
    target = len(zone) // 2
    part: set[int] = set()
    for node in nx.bfs_tree(sub, start):
        part.add(node)
        if len(part) >= target:
            break
    rest = zone - part
    # the remainder may fall apart: keep its largest piece, give the other pieces to the ball
    pieces = sorted(nx.connected_components(graph.subgraph(rest)), key=lambda c: (-len(c), min(c)))
    for piece in pieces[1:]:
        part |= piece
        rest -= piece
    return part, rest


def auto_zones(case: PowerCase, k: int) -> list[np.ndarray]:
    """A deterministic partition into exactly ``k`` connected zones.

    networkx's greedy modularity communities (Clauset-Newman-Moore; merges only adjacent communities, so
    each community is connected) stopped at ``k`` communities; if the graph itself has several components
    or the merging stops early, the smallest zone is merged into its most connected neighbour and the
    largest zone is split in two, until exactly ``k`` remain.
    """
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise ConfigError(f"The 'auto_zones' entry of [model] must be an int in [1, inf). Got {k!r} instead.")
    graph = bus_graph(case)
    n = graph.number_of_nodes()
    if k > n:
        raise ConfigError(
            f"The 'auto_zones' entry of [model] must be at most the number of buses ({n}) of "
            f"{case.name}. Got {k} instead."
        )
    if not nx.is_connected(graph):
        raise ConfigError(
            f"{case.name}: the network is not connected; automatic zones need a connected network."
        )
    comms = nx.algorithms.community.greedy_modularity_communities(graph, cutoff=k, best_n=k)
    zones = []
    for c in comms:  # guard: make every community connected
        zones += [set(p) for p in nx.connected_components(graph.subgraph(c))]
    while len(zones) > k:
        zones.sort(key=lambda z: (len(z), min(z)))
        small = zones.pop(0)
        links = [sum(1 for a in small for b in graph.neighbors(a) if b in z) for z in zones]
        zones[int(np.argmax(links))] |= small
    while len(zones) < k:
        zones.sort(key=lambda z: (-len(z), min(z)))
        a, b = _split(graph, zones.pop(0))
        zones += [a, b]
    out = _order(zones)
    validate_zones(case, out)
    return out


def zone_of_bus(case: PowerCase, zones: Sequence[np.ndarray]) -> np.ndarray:
    """Zone index (0-based) of every bus position (-1 for isolated buses)."""
    owner = np.full(case.n_bus, -1, dtype=int)
    for z, zone in enumerate(zones):
        owner[np.asarray(zone, dtype=int)] = z
    return owner
