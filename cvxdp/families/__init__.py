"""Algorithm families on the one round loop, and the registries of algorithms and mechanisms by case-file name.

* :mod:`.consensus` — LinearizedADMM and ADMM (SPEC §2);
* :mod:`.graph` — M-ADMM, DVP, R-ADMM, MR-ADMM over a graph (SPEC §3-§4);
* :mod:`.sharing` — ADMM sharing over vertically partitioned features (SPEC §5).

Each family folder holds ``params.py`` (its algorithms' declared parameters), ``server.py`` (the coordinator:
plan and aggregate on public values), ``node.py`` (what runs at a party) and its own theory. Families never import
each other; this module is the one place that knows them all.
"""

from __future__ import annotations

from typing import Any

from ..params import Algorithm, Parameterized
from ..privacy import MECHANISMS as PERTURBATIONS
from .consensus import ADMM, ConsensusFamily, LinearizedADMM
from .graph import DVP, MADMM, MRADMM, RADMM, GraphFamily, PenaltyPerturbation
from .sharing import ADMMSharing, SharingFamily

#: family name -> the coordinator class that runs its algorithms
FAMILIES: dict[str, type] = {"consensus": ConsensusFamily, "graph": GraphFamily, "sharing": SharingFamily}
#: case-file name -> algorithm class
ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (LinearizedADMM, ADMM, MADMM, DVP, RADMM, MRADMM,
                                                                     ADMMSharing)}
#: case-file name -> (mechanism class, fixed parameters): the privacy layer's perturbations, and the graph family's
#: penalty perturbation; "none" is the non-private run
MECHANISMS: dict[str, tuple[type[Parameterized], dict[str, Any]]] = {
    **{name: (cls, {"noise": noise}) for name, (cls, noise) in PERTURBATIONS.items()},
    "gamma": (PenaltyPerturbation, {}),
}


def family_class(algorithm: Algorithm) -> type:
    """The :class:`~cvxdp.run.family.Family` that runs ``algorithm`` (by its class's ``family``)."""
    return FAMILIES[type(algorithm).family]


__all__ = ["ALGORITHMS", "FAMILIES", "LinearizedADMM", "MECHANISMS", "family_class"]
