"""Algorithm families on the one round loop, and the registry of algorithms by name.

* :mod:`.consensus` — LinearizedADMM and ADMM (SPEC §2);
* :mod:`.graph` — M-ADMM, DVP, R-ADMM, MR-ADMM over a graph (SPEC §3-§4);
* :mod:`.sharing` — ADMM sharing over vertically partitioned features (SPEC §5).

Each family folder holds ``params.py`` (its algorithms' declared parameters), ``server.py`` (the coordinator:
plan and aggregate on public values), ``node.py`` (what runs at a party) and its own theory. Families never import
each other.
"""

from __future__ import annotations

from typing import Any

from .consensus import ConsensusFamily
from .graph import GraphFamily
from .sharing import SharingFamily

#: algorithm class -> the family that runs it
FAMILIES: dict[str, type] = {"consensus": ConsensusFamily, "graph": GraphFamily, "sharing": SharingFamily}


def family_class(algorithm: Any) -> type:
    """The :class:`~cvxdp.run.family.Family` that runs ``algorithm`` (by its class's ``family``)."""
    return FAMILIES[type(algorithm).family]


__all__ = ["FAMILIES", "family_class"]
