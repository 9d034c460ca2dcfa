"""One utility's party module: its own zone of the IEEE 14-bus network, with its own loads.

Each of the three utilities keeps a copy of this file in its party folder, next to a party file such as::

    [party]
    name = "zone1"
    module = "zone_party.py"
    function = "zone1"            # zone2, zone3 for the other utilities
    state = "state"

    [privacy]                     # the utility's own policy: what it releases, whatever the coordinator asks
    mechanism = "ObjG"
    epsilon = 1.0
    delta = 1e-6

The network (lines, generators, limits) and the zones are public: the utilities agree on them. The loads are each
utility's private data: ``loads.csv`` in the party folder (columns ``bus,p_mw,q_mvar``, the utility's own buses
only) replaces the public case's loads at those buses; without it the case's own loads are used (a demonstration).
The agent is the power template's zone agent (``cases/case14_3zones.toml``: squared balance deviations, loads
alpha-adjacent at 10 MW), so a federation of these three parties computes what ``cvxdp run`` simulates.
"""

from __future__ import annotations

import csv
from pathlib import Path

import cvxdp
from cvxdp_models.power import build_agents, load_network, parse_zones

#: public: the network, the zones (bus numbers) and the template's options the utilities agreed on
NETWORK = "case14"
ZONES = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]
OPTIONS = {"objective": "balance", "penalty": 1.0, "alpha": 0.1}


def _own_loads(case, folder: Path, own_buses: list[int]):
    """The public case with this utility's private loads at its own buses (MW/MVAr -> p.u.)."""
    path = folder / "loads.csv"
    if not path.is_file():
        return case
    pd_, qd = case.pd.copy(), case.qd.copy()
    position = {int(b): i for i, b in enumerate(case.bus_number)}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            bus = int(row["bus"])
            if bus not in own_buses:
                raise ValueError(f"{path}: bus {bus} is not in this utility's zone {own_buses}.")
            pd_[position[bus]] = float(row["p_mw"]) / case.base_mva
            qd[position[bus]] = float(row["q_mvar"]) / case.base_mva
    return case.with_loads(pd_, qd)


def _zone(k: int) -> list[cvxdp.Agent]:
    folder = Path(__file__).resolve().parent  # the party's own folder: this file is its copy
    case = _own_loads(load_network(NETWORK), folder, ZONES[k])
    model = build_agents(case, parse_zones(case, ZONES), **OPTIONS)
    return [model.agents[k]]  # this utility's agent, and nobody else's


def zone1() -> list[cvxdp.Agent]:
    return _zone(0)


def zone2() -> list[cvxdp.Agent]:
    return _zone(1)


def zone3() -> list[cvxdp.Agent]:
    return _zone(2)
