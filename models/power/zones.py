"""Zone partitions of a network: shipped ones (lists of MATPOWER bus numbers) and automatic ones.

A partition is a list of arrays of bus positions. A valid partition puts every non-isolated bus in exactly
one zone, and every zone is non-empty and connected through in-service branches inside the zone.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from numbers import Integral

import networkx as nx
import numpy as np

from cvxdp.errors import ConfigError

from .network import PowerCase

__all__ = [
    "bus_graph",
    "branch_strength",
    "cut_strength",
    "parse_zones",
    "validate_zones",
    "auto_zones",
    "clear_auto_zones_cache",
    "zone_of_bus",
]


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


#: names :func:`auto_zones`' method and the networkx release that runs it (Louvain's output for a fixed seed may
#: change between releases); the power template's resolved settings carry it, so runs and study cells made with
#: another partitioner are refused on resume (the unweighted greedy partitioner before this one)
PARTITIONER = f"louvain-admittance-1 (networkx {nx.__version__})"

#: Louvain resolutions and seeds :func:`auto_zones` tries (fixed, so the partition is deterministic)
LOUVAIN_RESOLUTIONS = (0.05, 0.1, 0.2, 0.5, 1.0)
LOUVAIN_SEEDS = tuple(range(6))
#: :func:`auto_zones` keeps zones of ``n / (BALANCE k)`` to ``BALANCE n / k`` buses when it can
BALANCE = 3.0
#: how many partitions :func:`auto_zones` keeps per process (least recently used dropped first)
CACHE_SIZE = 16
_CACHE: OrderedDict[tuple[str, int], list[np.ndarray]] = OrderedDict()


def _network_key(case: PowerCase) -> str:
    """Digest of everything :func:`auto_zones` reads: the bus types, the branches' end buses, status and
    impedance (and the partitioner's version). Two cases with equal digests get the same partition."""
    h = hashlib.sha256(PARTITIONER.encode())
    for array, dtype in (
        (case.bus_type, np.int64),
        (case.branch_status, np.bool_),
        (case.f_bus, np.int64),
        (case.t_bus, np.int64),
        (case.r, np.float64),
        (case.x, np.float64),
    ):
        a = np.ascontiguousarray(array, dtype=dtype)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def clear_auto_zones_cache() -> None:
    """Forget the partitions :func:`auto_zones` has kept in this process."""
    _CACHE.clear()


def branch_strength(case: PowerCase) -> nx.Graph:
    """:func:`bus_graph` with each edge's ``strength``: the admittance magnitude ``1/|r + jx|`` (per unit) of
    the in-service branches joining the two buses, summed over parallel branches. Network data only (no load
    or cost). A zero-impedance branch gets ten times the strongest finite one."""
    g = bus_graph(case)
    on = case.branch_status
    z = np.hypot(case.r[on], case.x[on])
    finite = z > 0
    y = np.empty_like(z)
    y[finite] = 1.0 / z[finite]
    y[~finite] = 10.0 * (y[finite].max() if finite.any() else 1.0)
    for u, v in g.edges:
        g[u][v]["strength"] = 0.0
    for f, t, value in zip(case.f_bus[on].tolist(), case.t_bus[on].tolist(), y.tolist()):
        g[f][t]["strength"] += value
    return g


def _exactly(
    graph: nx.Graph, communities: Sequence[set[int]], k: int, *, split: bool = True
) -> list[set[int]] | None:
    """``communities`` made connected and brought to exactly ``k`` zones: the smallest zone is merged into the
    neighbour it is most strongly tied to (summed ``strength``), the largest split in two (None instead when
    ``split`` is False), until ``k`` remain."""
    zones: dict[int, set[int]] = {}
    for c in communities:  # make every community connected
        for piece in nx.connected_components(graph.subgraph(c)):
            zones[len(zones)] = set(piece)
    owner = {b: i for i, z in zones.items() for b in z}
    ties: dict[int, dict[int, float]] = {i: {} for i in zones}
    for u, v, d in graph.edges(data=True):
        a, b = owner[u], owner[v]
        if a != b:
            ties[a][b] = ties[a].get(b, 0.0) + d["strength"]
            ties[b][a] = ties[b].get(a, 0.0) + d["strength"]
    while len(zones) > k:
        small = min(zones, key=lambda i: (len(zones[i]), min(zones[i])))
        into = max(ties[small], key=lambda j: (ties[small][j], -min(zones[j])))
        zones[into] |= zones.pop(small)
        for j, value in ties.pop(small).items():
            ties[j].pop(small)
            if j != into:
                ties[into][j] = ties[into].get(j, 0.0) + value
                ties[j][into] = ties[j].get(into, 0.0) + value
    out = list(zones.values())
    if len(out) < k and not split:
        return None
    while len(out) < k:
        out.sort(key=lambda z: (-len(z), min(z)))
        a, b = _split(graph, out.pop(0))
        out += [a, b]
    return out


def cut_strength(graph: nx.Graph, zones: Sequence[set[int]] | Sequence[np.ndarray]) -> float:
    """Total ``strength`` (:func:`branch_strength`) of the branches between zones."""
    owner = {int(b): i for i, z in enumerate(zones) for b in z}
    return float(sum(d["strength"] for u, v, d in graph.edges(data=True) if owner[u] != owner[v]))


def auto_zones(case: PowerCase, k: int) -> list[np.ndarray]:
    """A deterministic partition into exactly ``k`` connected zones that cuts weak branches.

    Candidates: networkx's Louvain communities of the bus graph weighted by branch admittance
    (:func:`branch_strength`), for the fixed resolutions :data:`LOUVAIN_RESOLUTIONS` and seeds
    :data:`LOUVAIN_SEEDS`, plus the unweighted greedy modularity communities (Clauset-Newman-Moore); each is
    made connected and brought to exactly ``k`` zones (:func:`_exactly`; a Louvain result with fewer than ``k``
    communities is dropped). Among the candidates whose zones all have between ``n / (3 k)`` and ``3 n / k``
    buses (:data:`BALANCE` = 3; all of them if none has), the one whose cut branches have the least
    total admittance is kept (ties: fewer cut branches, then the bus lists).

    Why admittance: a cut branch's flows are shared between two zones, and in the SOC model they are the
    branch's admittance times the shared voltage products, so a strong cut branch turns a small voltage
    disagreement into a large flow disagreement. Measured against the unweighted greedy partition (exact ADMM,
    default settings, rounds to PowerModelsADA's rule; benchmarks/bench_power.py --acceptance and
    bench_large_cases.py admm): case300 in 4 zones 18 -> 16, PGLib's case300 55 -> 35, case1354pegase in 8
    zones 45 -> 31, case2869pegase in 16 zones 58 -> 36. Uses network data only (branch impedances), no load
    or cost; about 6 s on case2869pegase (the greedy partition alone: 0.5 s).

    The result is kept per process, keyed on a digest of the branch data and ``k`` (:data:`CACHE_SIZE`
    partitions; :func:`clear_auto_zones_cache`), so building the same network again (a study's cells, a
    benchmark, a notebook) does not partition it again. Callers get their own copies of the arrays.
    """
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise ConfigError(f"The 'auto_zones' entry of [model] must be an int in [1, inf). Got {k!r} instead.")
    key = (_network_key(case), int(k))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return [zone.copy() for zone in _CACHE[key]]
    out = _partition(case, int(k))
    _CACHE[key] = [zone.copy() for zone in out]
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def _partition(case: PowerCase, k: int) -> list[np.ndarray]:
    """:func:`auto_zones` without its cache."""
    graph = branch_strength(case)
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
    community = nx.algorithms.community
    candidates = [_exactly(graph, community.greedy_modularity_communities(graph, cutoff=k, best_n=k), k)]
    seen = {frozenset(frozenset(z) for z in candidates[0])}
    for resolution in LOUVAIN_RESOLUTIONS:
        for seed in LOUVAIN_SEEDS:
            found = community.louvain_communities(graph, weight="strength", resolution=resolution, seed=seed)
            zones = _exactly(graph, found, k, split=False)
            if zones is None:  # too few communities at this resolution
                continue
            key = frozenset(frozenset(z) for z in zones)
            if key not in seen:
                seen.add(key)
                candidates.append(zones)
    balanced = [
        c
        for c in candidates
        if min(len(z) for z in c) >= n / (BALANCE * k) and max(len(z) for z in c) <= BALANCE * n / k
    ] or candidates

    def score(zones: list[set[int]]) -> tuple:
        owner = {b: i for i, z in enumerate(zones) for b in z}
        cut = sum(1 for u, v in graph.edges if owner[u] != owner[v])
        return round(cut_strength(graph, zones), 9), cut, sorted(sorted(z) for z in zones)

    out = _order(min(balanced, key=score))
    validate_zones(case, out)
    return out


def zone_of_bus(case: PowerCase, zones: Sequence[np.ndarray]) -> np.ndarray:
    """Zone index (0-based) of every bus position (-1 for isolated buses)."""
    owner = np.full(case.n_bus, -1, dtype=int)
    for z, zone in enumerate(zones):
        owner[np.asarray(zone, dtype=int)] = z
    return owner
