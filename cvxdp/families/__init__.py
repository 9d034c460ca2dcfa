"""Algorithm families on the one round loop, and the registries of algorithms and mechanisms by case-file name.

* :mod:`.consensus` — LinearizedADMM and ADMM (SPEC §2);
* :mod:`.graph` — M-ADMM, DVP, R-ADMM, MR-ADMM over a graph (SPEC §3-§4);
* :mod:`.sharing` — ADMM sharing over vertically partitioned features (SPEC §5).

Each family folder holds ``params.py`` (its algorithms' declared parameters), ``server.py`` (the coordinator:
plan and aggregate on public values), ``node.py`` (what runs at a party) and its own theory. Families never import
each other; this module is the one place that knows them all, and derives the case file's [algorithm] and
[privacy] schema from their declared parameters.
"""

from __future__ import annotations

from ..params import Algorithm, schema_rows
from .catalog import (
    ALGORITHM_KEYS,
    ALGORITHMS,
    MECHANISMS,
    PRIVACY_KEYS,
    algorithm_from_table,
    mechanism_from_table,
    own_algorithm_table,
)
from .consensus import ConsensusFamily, LinearizedADMM
from .graph import ERMConstants, GraphFamily
from .sharing import SharingFamily

#: family name -> the coordinator class that runs its algorithms
FAMILIES: dict[str, type] = {"consensus": ConsensusFamily, "graph": GraphFamily, "sharing": SharingFamily}

def family_class(algorithm: Algorithm) -> type:
    """The :class:`~cvxdp.run.family.Family` that runs ``algorithm`` (by its class's ``family``)."""
    return FAMILIES[type(algorithm).family]

def algorithm_schema() -> list[tuple[str, str, str, str]]:
    """The [algorithm] rows of the case-file schema, derived from the algorithms' declared parameters
    (:data:`cvxdp.config.schema.SCHEMA` holds them as text, so that ``--help`` loads nothing; a test checks they
    are equal)."""
    rows = [("name", "str", "ladmm", " | ".join(ALGORITHMS))]
    rows += schema_rows(ALGORITHMS)
    takes_edges = ", ".join(name for name, cls in ALGORITHMS.items() if "edges" in cls.extra_file_keys)
    rows.append(("edges", "list of [str, str]", "none", f"{takes_edges}: the graph's edges themselves (instead of graph)"))
    return rows

def privacy_schema() -> list[tuple[str, str, str, str]]:
    """The [privacy] rows of the case-file schema, derived from the mechanisms' declared parameters."""
    rows = [("mechanism", "str", "none", "none | " + " | ".join(MECHANISMS)
             + " (each algorithm accepts its own: cvxdp run --help)")]
    by_class = {}
    for name, (cls, _) in MECHANISMS.items():
        by_class.setdefault(cls, []).append(name)
    classes = {"/".join(names): cls for cls, names in by_class.items()}
    rows += [r for r in schema_rows(classes) if r[0] != "noise"]
    return rows

__all__ = ["ALGORITHMS", "ALGORITHM_KEYS", "Algorithm", "PRIVACY_KEYS", "algorithm_from_table", "mechanism_from_table",
           "own_algorithm_table", "algorithm_schema", "privacy_schema", "ERMConstants", "FAMILIES", "LinearizedADMM", "MECHANISMS", "family_class"]
