"""The algorithms and mechanisms by case-file name, and how a plain table (a case file's, or a coordinator's message)
becomes one of them.

It imports the families' parameter modules only, never their coordinator code, so a party reads a coordinator's
public parameters with it: the same declared constraints and the same messages as a case file (:mod:`cvxdp.params`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..params import Algorithm, Parameterized
from ..privacy import MECHANISMS as PERTURBATIONS
from .consensus.params import ADMM, LinearizedADMM
from .graph.mechanism import PenaltyPerturbation
from .graph.params import DVP, MADMM, MRADMM, RADMM
from .sharing.params import ADMMSharing

#: case-file name -> algorithm class
ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (LinearizedADMM, ADMM, MADMM, DVP, RADMM, MRADMM,
                                                                     ADMMSharing)}
#: case-file name -> (mechanism class, fixed parameters): the privacy layer's perturbations, and the graph family's
#: penalty perturbation; "none" is the non-private run
MECHANISMS: dict[str, tuple[type[Parameterized], dict[str, Any]]] = {
    **{name: (cls, {"noise": noise}) for name, (cls, noise) in PERTURBATIONS.items()},
    "gamma": (PenaltyPerturbation, {}),
}


def accepted_mechanisms(cls: type[Algorithm]) -> tuple[str, ...]:
    """The case-file names of the mechanisms algorithm class ``cls`` runs ("none" first), as its
    :meth:`~cvxdp.params.Algorithm.accepts` says."""
    return tuple(name for name in ("none", *MECHANISMS) if cls.accepts(name))


for _cls in ALGORITHMS.values():  # the names a party's policy and the schema read, derived from accepts()
    _cls.mechanisms = accepted_mechanisms(_cls)

#: every key each algorithm reads from an [algorithm] table (a case file may hold several algorithms' keys)
OWN_ALGORITHM_KEYS = {name: set(cls.file_keys()) | set(cls.extra_file_keys) | set(cls.file_aliases)
                      for name, cls in ALGORITHMS.items()}
ALGORITHM_KEYS = {"name"}.union(*OWN_ALGORITHM_KEYS.values())
#: every key each mechanism reads from a [privacy] table
OWN_PRIVACY_KEYS = {name: set(cls.file_keys()) - set(fixed) for name, (cls, fixed) in MECHANISMS.items()}
PRIVACY_KEYS = {"mechanism"}.union(*OWN_PRIVACY_KEYS.values())


def algorithm_from_table(table: Mapping[str, Any], where: str = "[algorithm]") -> Algorithm:
    """The algorithm of an [algorithm] table (``name`` picks it; default "ladmm"). The keys of other algorithms in the
    same table are ignored; unknown keys and values outside their declared constraints raise a
    :class:`~cvxdp.errors.ConfigError` naming ``where`` and the key."""
    params = dict(table)
    name = params.pop("name", "ladmm")
    if name not in ALGORITHMS:
        raise ConfigError(f"The 'name' entry of {where} must be one of " + ", ".join(map(repr, ALGORITHMS))
                          + f". Got {name!r} instead.")
    # e.g. the CLI's --rounds as ADMMSharing's epochs; it overrides the case file's epochs
    for alias, key in ALGORITHMS[name].file_aliases.items():
        if alias in params:
            params[key] = params.pop(alias)
    others = ALGORITHM_KEYS - OWN_ALGORITHM_KEYS[name] - {"name"}
    return ALGORITHMS[name].from_config(params, where, ignore=others)


def own_algorithm_table(table: Mapping[str, Any]) -> dict[str, Any]:
    """An [algorithm] table reduced to the keys its algorithm reads (with its ``name``): what a coordinator sends."""
    name = table.get("name", "ladmm")
    own = OWN_ALGORITHM_KEYS.get(name, set())
    return {"name": name, **{k: v for k, v in table.items() if k in own}}


def mechanism_from_table(table: Mapping[str, Any], where: str = "[privacy]") -> Any:
    """The mechanism of a [privacy] table (None for ``mechanism = "none"``); a key the mechanism does not read is
    refused, naming it and the keys it reads."""
    params = dict(table)
    name = params.pop("mechanism", "none")
    if name == "none":
        return None
    if name not in MECHANISMS:
        raise ConfigError(f"The 'mechanism' entry of {where} must be one of "
                          + ", ".join(map(repr, ("none", *MECHANISMS))) + f". Got {name!r} instead.")
    cls, fixed = MECHANISMS[name]
    return cls.from_config({**fixed, **params}, where)


__all__ = ["ALGORITHMS", "ALGORITHM_KEYS", "MECHANISMS", "accepted_mechanisms", "OWN_ALGORITHM_KEYS", "OWN_PRIVACY_KEYS", "PRIVACY_KEYS",
           "algorithm_from_table", "mechanism_from_table", "own_algorithm_table"]
