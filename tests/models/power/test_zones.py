"""Zone partitions: shipped ones, validation messages, the automatic connected partitioner."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

pytest.importorskip("pandapower")

from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp_models.power.network import load_case  # noqa: E402
from cvxdp_models.power.zones import auto_zones, bus_graph, parse_zones, zone_of_bus  # noqa: E402

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
    from cvxdp.config import load_case as load_case_file

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
