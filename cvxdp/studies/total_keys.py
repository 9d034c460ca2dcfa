"""The names and declared ``[study]`` keys of the equal-total studies (:mod:`cvxdp.studies.total`): the anchors, the
one-shot releases, and the checks of the structured keys (schedule, mechanism variants, data sets, anchors)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..config.build import MECHANISMS
from ..errors import ConfigError
from .study import StudyKey, head_keys, is_bool, is_int_at_least, is_unit_float, number_list

#: the one-shot anchors: name -> noise of the input perturbation
ANCHORS = {"InL": "laplace", "InG": "gaussian"}
#: the one-shot releases of a per-round mechanism (noise drawn once: T = 1, J = ``one_shot_local_updates``, the
#: whole budget, calibrate = "total"): anchor name -> mechanism
ONE_SHOT = {f"{m}-once": m for m in ("ObjL", "ObjG", "OutL", "OutG")}
#: the centralized private anchor: a trusted curator's model on the pooled data at the same total budget
#: (the template's ``ModelInstance.central_private``; the logistic template: DP-SGD)
CENTRAL = "central"
#: the central anchor with its noise multiplied by sqrt(P), P the data set's agents: the noise the sum of P
#: parties' independently noised updates carries at the same per-party budget (secure aggregation would give the
#: central anchor's); a diagnostic of what distribution costs, private at the smaller epsilon it reports
CENTRAL_NOISE = "central-sqrtP"
#: the non-private optimum on the pooled data (the template's ``central``): what privacy costs is the central
#: anchor against it; one cell per data set, a reference row at every epsilon of the table
OPTIMUM = "optimum"
#: every anchor name -> what it is (the study file's ``anchors``)
ANCHOR_NAMES = (*ANCHORS, *ONE_SHOT, CENTRAL, CENTRAL_NOISE, OPTIMUM)
#: [privacy] entries of the case that the one-shot releases leave out: they use every record once (the case's
#: subsampling is for its per-round runs)
_ONE_SHOT_DROPS = ("sampling_rate", "clip_norm")
#: seconds the non-private optimum (:data:`OPTIMUM`) may take
OPTIMUM_SECONDS = 600.0
#: the study's figure (a PNG, and a PDF beside it)
TOTAL_FIGURE = "utility_vs_total_epsilon.png"
#: [privacy] entries a mechanism variant of an equal-total study may not set (the study sets them)
_STUDY_SET = ("mechanism", "epsilon", "delta", "calibrate")


def _slug(name: str) -> str:
    """A data set's name as part of a cell key (a directory name)."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", name).strip("_")


def _total_schedule(value: object, path: Path) -> list[tuple[float, int, int]]:
    rows = value if value is not None else [[math.inf, 100, 1]]
    expected = "a non-empty list of [max_epsilon > 0, rounds >= 1, local_updates >= 1] rows"
    if not isinstance(rows, list) or not rows:
        raise ConfigError(f"{path}: the 'schedule' entry of [study] must be {expected}. Got {value!r} instead.")
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and not any(isinstance(v, bool) for v in row)
                and isinstance(row[0], (int, float)) and row[0] > 0 and isinstance(row[1], int) and row[1] >= 1
                and isinstance(row[2], int) and row[2] >= 1):
            raise ConfigError(f"{path}: the 'schedule' entry of [study] must be {expected}. Got the row {row!r}.")
        out.append((float(row[0]), int(row[1]), int(row[2])))
    if [r[0] for r in out] != sorted(r[0] for r in out):
        raise ConfigError(f"{path}: the rows of the 'schedule' entry of [study] must be sorted by max_epsilon. "
                          f"Got {[r[0] for r in out]} instead.")
    return out


def _total_methods(value: object, path: Path) -> dict[str, tuple[str, dict]]:
    """``mechanisms``: names (ObjG, ...) or tables ``{ name, mechanism, privacy }`` (a variant with its own
    [privacy] entries, e.g. ``sampling_rate``) -> name -> (mechanism, privacy entries)."""
    expected = ("a list of names from ObjL, ObjG, OutL, OutG, or of tables { name = \"ObjG-q0.1\", mechanism = "
                "\"ObjG\", privacy = { sampling_rate = 0.1, clip_norm = 1.0 } } with distinct names")
    if not isinstance(value, list):
        raise ConfigError(f"{path}: the 'mechanisms' entry of [study] must be {expected}. Got {value!r} instead.")
    out: dict[str, tuple[str, dict]] = {}
    for item in value:
        if isinstance(item, str):
            name, mech, priv = item, item, {}
        elif isinstance(item, dict) and {"name", "mechanism"} <= set(item) <= {"name", "mechanism", "privacy"}:
            name, mech, priv = item["name"], item["mechanism"], item.get("privacy", {})
        else:
            raise ConfigError(f"{path}: the 'mechanisms' entry of [study] must be {expected}. Got the entry {item!r}.")
        if mech not in MECHANISMS or mech == "none" or not isinstance(name, str) or not name or name in out \
                or name in ANCHORS or name in ONE_SHOT or name == "none":
            raise ConfigError(f"{path}: the 'mechanisms' entry of [study] must be {expected}. Got the entry {item!r}.")
        if not isinstance(priv, dict) or set(priv) & set(_STUDY_SET):
            raise ConfigError(f"{path}: the 'privacy' table of the mechanism {name!r} in [study] must be a table of "
                              f"[privacy] entries other than {', '.join(_STUDY_SET)} (the study sets those). Got "
                              f"{priv!r} instead.")
        out[name] = (mech, dict(priv))
    return out


def _total_datasets(value: object, path: Path) -> list[tuple[str, dict]]:
    """``datasets``: a non-empty list of ``{ name, model }`` tables with distinct names (and distinct keys)."""
    if value is None:
        return []
    expected = ("a non-empty list of tables { name = \"...\", model = { ... } } with distinct names (model: "
                "[model] entries of the case replaced for that data set)")
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{path}: the 'datasets' entry of [study] must be {expected}. Got {value!r} instead.")
    out: list[tuple[str, dict]] = []
    for item in value:
        if not (isinstance(item, dict) and set(item) == {"name", "model"} and isinstance(item["name"], str)
                and _slug(item["name"]) and isinstance(item["model"], dict)):
            raise ConfigError(f"{path}: the 'datasets' entry of [study] must be {expected}. Got the entry {item!r}.")
        if _slug(item["name"]) in {_slug(n) for n, _ in out}:
            raise ConfigError(f"{path}: the 'datasets' entry of [study] must be {expected}. The name "
                              f"{item['name']!r} appears twice (or two names differ only in punctuation).")
        out.append((item["name"], dict(item["model"])))
    return out


def _anchors(value: Any, path: Path) -> list[str]:
    if not isinstance(value, list) or any(a not in ANCHOR_NAMES for a in value) or len(set(value)) != len(value):
        raise ConfigError(f"{path}: the 'anchors' entry of [study] must be a list of distinct names from "
                          f"{', '.join(ANCHOR_NAMES)}. Got {value!r} instead.")
    return value


#: the declared [study] keys of an equal-total study
TOTAL_KEYS = (
    *head_keys("total"),
    StudyKey("epsilons", "list of float > 0", "[0.5, 1, 4]", "each agent's whole-run epsilon", value=[0.5, 1.0, 4.0],
             parse=number_list("epsilons", float, positive=True, convert=True)),
    StudyKey("delta", "float in (0, 1)", "1e-5", "each agent's whole-run delta", value=1e-5,
             expected="a float in (0, 1)", accepts=is_unit_float()),
    StudyKey("mechanisms", "list of str or table", "[ObjG, OutG]", "per-round mechanisms, calibrate = total (PLD); a "
             "table { name, mechanism, privacy = { ... } } is a variant with its own [privacy] entries (e.g. "
             "sampling_rate, clip_norm)", value=["ObjG", "OutG"], parse=_total_methods),
    StudyKey("anchors", "list of str", "[InL, InG]", "one-shot baselines: InL / InG (input perturbation + exact ADMM, "
             "templates with the hook) or ObjL/ObjG/OutL/OutG-once (one release of the mechanism: T = 1, noise drawn "
             "once with J = 1, on every record), central (a centralized private model on the pooled data at the same "
             "budget: the logistic template's DP-SGD; what distribution costs), central-sqrtP (the same with sqrt(P) "
             "x its noise: what P parties' independent noises cost) or optimum (the non-private pooled optimum: what "
             "privacy costs)", value=list(ANCHORS), parse=_anchors),
    StudyKey("one_shot_local_updates", "int >= 1", "1", "J of the -once anchors (J > 1: J noisy local updates, "
             "composed)", value=1, expected="an int in [1, inf)", accepts=is_int_at_least(1)),
    StudyKey("datasets", "list of tables", "none", "{ name, model = { ... } }: every cell runs on each data set "
             "([model] entries replaced; writers replaces agents); a winner is stated only when it wins on every one",
             parse=_total_datasets),
    StudyKey("seeds", "list of int >= 0", "[0, 1, 2]", "seeds per cell (mean +- standard error)", value=[0, 1, 2],
             parse=number_list("seeds", int, positive=False, convert=True)),
    StudyKey("schedule", "list of [float, int, int]", "[[inf, 100, 1]]", "public rule: [max_epsilon, rounds, "
             "local_updates] rows; an epsilon takes the first row with max_epsilon >= it", parse=_total_schedule),
    StudyKey("anchor_rounds", "int >= 1", "100", "rounds of InL/InG and of the non-private line (exact ADMM for "
             "power, else the case's algorithm without noise)", value=100, expected="an int in [1, inf)",
             accepts=is_int_at_least(1)),
    StudyKey("baseline", "bool", "true", "add the non-private exact-ADMM run", value=True,
             expected="true or false", accepts=is_bool),
)

__all__ = ["ANCHORS", "ANCHOR_NAMES", "CENTRAL", "CENTRAL_NOISE", "ONE_SHOT", "OPTIMUM", "OPTIMUM_SECONDS",
           "TOTAL_FIGURE", "TOTAL_KEYS"]
