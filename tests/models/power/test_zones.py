"""Zone partitions: shipped ones, validation messages, the automatic connected partitioner."""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp_models.power import zones as zones_module  # noqa: E402
from cvxdp_models.power.network import load_case  # noqa: E402
from cvxdp_models.power.zones import (  # noqa: E402
    auto_zones,
    branch_strength,
    bus_graph,
    clear_auto_zones_cache,
    cut_strength,
    parse_zones,
    zone_of_bus,
)

CASE14_ZONES = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]
CASE118_ZONES = [
    [b for b in range(1, 33) if b != 24] + [113, 114, 115, 117],
    list(range(33, 68)),
    [24, *range(68, 113), 116, 118],
]


@pytest.fixture(scope="module")
def case14():
    return load_case("case14")


@pytest.fixture(scope="module")
def case118():
    return load_case("case118")


def test_shipped_partitions(case14, case118):
    zones = parse_zones(case14, CASE14_ZONES)
    assert [case14.bus_number[z].tolist() for z in zones] == CASE14_ZONES
    zones = parse_zones(case118, CASE118_ZONES)
    assert [len(z) for z in zones] == [35, 35, 48]
    owner = zone_of_bus(case118, zones)
    assert np.all(owner >= 0) and np.bincount(owner).tolist() == [35, 35, 48]


def test_shipped_case_files_hold_the_paper_partitions(case14, case118):
    from cvxdp.config.build import load_case as load_case_file

    assert load_case_file("case14_3zones").model["zones"] == CASE14_ZONES
    assert [sorted(z) for z in load_case_file("case118_3zones").model["zones"]] == [
        sorted(z) for z in CASE118_ZONES
    ]


def test_bus_in_two_zones(case14):
    with pytest.raises(ConfigError, match="Bus 5 of case14 is in zone 1 and in zone 2"):
        parse_zones(case14, [[1, 2, 3, 4, 5], [5, 6, 10, 11, 12, 13], [7, 8, 9, 14]])


def test_bus_in_no_zone(case14):
    with pytest.raises(ConfigError, match=r"Buses 14 of case14 are in no zone \(1 missing\)"):
        parse_zones(case14, [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9]])


def test_empty_zone(case14):
    with pytest.raises(ConfigError, match="Zone 3 of case14 is empty"):
        parse_zones(case14, [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11, 12, 13, 14], []])


def test_disconnected_zone_is_named(case14):
    # bus 14 connects only to buses 9 and 13, neither of which is in zone 2
    with pytest.raises(
        ConfigError, match=r"Zone 2 of case14 \(buses 6, 10, 11, 12, 14\) is not connected.*14"
    ):
        parse_zones(case14, [[1, 2, 3, 4, 5], [6, 10, 11, 12, 14], [7, 8, 9, 13]])


def test_unknown_bus_and_bad_entries(case14):
    with pytest.raises(ConfigError, match="Zone 2: Bus 99 is not a bus of case14"):
        parse_zones(case14, [[1, 2, 3, 4, 5], [99]])
    with pytest.raises(
        ConfigError, match="Zone 1 in the 'zones' entry of \\[model\\] must list integer bus numbers"
    ):
        parse_zones(case14, [["1", 2]])
    with pytest.raises(ConfigError, match="must be a list of lists of bus numbers"):
        parse_zones(case14, [1, 2, 3])


@pytest.mark.parametrize(
    "name,ks", [("case14", [1, 2, 3, 4, 5, 14]), ("case118", [2, 3, 8]), ("case300", [6])]
)
def test_auto_zones_exact_connected_deterministic(name, ks):
    case = load_case(name)
    graph = bus_graph(case)
    for k in ks:
        zones = auto_zones(case, k)
        assert len(zones) == k
        assert sorted(np.concatenate(zones).tolist()) == sorted(graph.nodes)
        assert all(nx.is_connected(graph.subgraph(z.tolist())) for z in zones)
        clear_auto_zones_cache()  # partition again, not a cache hit
        again = auto_zones(case, k)
        assert all(np.array_equal(a, b) for a, b in zip(zones, again))


def test_auto_zones_case14_three_is_balanced(case14):
    sizes = sorted(len(z) for z in auto_zones(case14, 3))
    assert sizes[0] >= 3


def test_auto_zones_bad_k(case14):
    with pytest.raises(
        ConfigError, match=r"'auto_zones' entry of \[model\] must be an int in \[1, inf\). Got 0"
    ):
        auto_zones(case14, 0)
    with pytest.raises(ConfigError, match=r"must be at most the number of buses \(14\) of case14. Got 15"):
        auto_zones(case14, 15)
    with pytest.raises(ConfigError):
        auto_zones(case14, 2.5)  # type: ignore[arg-type]


def test_auto_zones_large_case_gives_k_zones_covering_every_bus():
    # the partitioner's speed is measured in benchmarks/bench_timings.py, not asserted here
    case = load_case("case1354pegase")
    zones = auto_zones(case, 8)
    assert len(zones) == 8
    assert sorted(int(b) for z in zones for b in z) == list(range(len(case.bus_number)))
    graph = bus_graph(case)
    assert all(nx.is_connected(graph.subgraph(int(b) for b in z)) for z in zones)


def test_branch_strength_is_admittance_summed_over_parallel_branches(case14):
    graph = branch_strength(case14)
    on = case14.branch_status
    expected: dict[tuple[int, int], float] = {}
    for f, t, r, x in zip(case14.f_bus[on], case14.t_bus[on], case14.r[on], case14.x[on]):
        key = (min(int(f), int(t)), max(int(f), int(t)))
        expected[key] = expected.get(key, 0.0) + 1.0 / np.hypot(r, x)
    assert {(min(u, v), max(u, v)): d["strength"] for u, v, d in graph.edges(data=True)} == pytest.approx(
        expected
    )


def test_branch_strength_zero_impedance_is_ten_times_the_strongest(case14):
    r, x = case14.r.copy(), case14.x.copy()
    r[0] = x[0] = 0.0
    graph = branch_strength(dataclasses.replace(case14, r=r, x=x))
    finite = [
        d["strength"]
        for u, v, d in graph.edges(data=True)
        if {u, v} != {int(case14.f_bus[0]), int(case14.t_bus[0])}
    ]
    assert graph[int(case14.f_bus[0])][int(case14.t_bus[0])]["strength"] == pytest.approx(10 * max(finite))


def test_auto_zones_cut_weak_branches_not_strong_ones(case14):
    # make the branches the partition cuts today the strongest of the network: the new partition avoids them
    zones = auto_zones(case14, 3)
    owner = zone_of_bus(case14, zones)
    cut = np.flatnonzero(case14.branch_status & (owner[case14.f_bus] != owner[case14.t_bus]))
    r, x = case14.r.copy(), case14.x.copy()
    r[cut], x[cut] = r[cut] / 1000, x[cut] / 1000
    strong = dataclasses.replace(case14, r=r, x=x)
    again = auto_zones(strong, 3)
    owner2 = zone_of_bus(strong, again)
    assert not np.any(owner2[case14.f_bus[cut]] != owner2[case14.t_bus[cut]])
    graph = branch_strength(strong)
    assert cut_strength(graph, again) < cut_strength(graph, zones)


@pytest.mark.parametrize("name,k", [("case118", 3), ("case300", 4)])
def test_auto_zones_cut_no_more_admittance_than_unweighted_modularity(name, k):
    case = load_case(name)
    graph = branch_strength(case)
    greedy = nx.algorithms.community.greedy_modularity_communities(bus_graph(case), cutoff=k, best_n=k)
    zones = auto_zones(case, k)
    n = graph.number_of_nodes()
    assert all(n / (3 * k) <= len(z) <= 3 * n / k for z in zones)  # BALANCE = 3
    assert cut_strength(graph, zones) <= cut_strength(graph, [set(c) for c in greedy])


def test_auto_zones_partitions_a_network_once_per_process(case14, monkeypatch):
    clear_auto_zones_cache()
    calls = []
    partition = zones_module._partition
    monkeypatch.setattr(zones_module, "_partition", lambda case, k: calls.append(k) or partition(case, k))
    first = auto_zones(case14, 3)
    first[0][:] = -1  # the caller's copy: mutating it does not touch the kept partition
    second = auto_zones(dataclasses.replace(case14), 3)  # an equal network, another object
    assert calls == [3]
    assert -1 not in np.concatenate(second)
    assert sorted(np.concatenate(second).tolist()) == list(range(14))
    auto_zones(case14, 2)  # another k
    r = case14.r.copy()
    r[0] *= 2
    auto_zones(dataclasses.replace(case14, r=r), 3)  # another impedance
    assert calls == [3, 2, 3]
    clear_auto_zones_cache()
    auto_zones(case14, 3)
    assert calls == [3, 2, 3, 3]


def test_auto_zones_cache_is_bounded(case14, monkeypatch):
    clear_auto_zones_cache()
    monkeypatch.setattr(zones_module, "CACHE_SIZE", 2)
    for k in (2, 3, 4):
        auto_zones(case14, k)
    assert [k for _, k in zones_module._CACHE] == [3, 4]
