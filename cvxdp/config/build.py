"""Case files (TOML): loading, schema checks with clear errors, and turning tables into cvxdp objects."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, CvxdpError
from ..families import ALGORITHMS
from ..families import MECHANISMS as MECHANISM_CLASSES
from ..params import Algorithm
from ..run.backends import BACKENDS, Backend, get_backend
from .files import load_toml, resolve_case_path, shipped_cases_dir  # noqa: F401 (stdlib-only; re-exported)

#: [privacy] mechanism names (the registry's, and "none")
MECHANISMS = ("none", *MECHANISM_CLASSES)
#: keys of [algorithm] tables that are not a declared parameter: the graph's edges; "rounds" is sharing's epochs
_EXTRA_ALGORITHM_KEYS = {"madmm": {"edges"}, "dvp": {"edges"}, "radmm": {"edges"}, "mradmm": {"edges"},
                         "sharing": {"rounds"}}
_CASE_KEYS = {"name", "template", "description"}
#: every key some registered algorithm reads (a case file may hold several algorithms' keys; each reads its own)
_OWN_ALGORITHM_KEYS = {name: set(cls.file_keys()) | _EXTRA_ALGORITHM_KEYS.get(name, set())
                       for name, cls in ALGORITHMS.items()}
_ALGORITHM_KEYS = {"name"}.union(*_OWN_ALGORITHM_KEYS.values())
_OWN_PRIVACY_KEYS = {name: set(cls.file_keys()) - set(fixed) for name, (cls, fixed) in MECHANISM_CLASSES.items()}
_PRIVACY_KEYS = {"mechanism"}.union(*_OWN_PRIVACY_KEYS.values())
_RUN_KEYS = {"seed", "accountant", "backend", "budget_epsilon", "budget_delta", "target_delta"}
_RUN_KEYS |= {"ray_cpus", "ray_address"}  # backend = "ray"
_SECTIONS = {"case": _CASE_KEYS, "model": None, "algorithm": _ALGORITHM_KEYS, "privacy": _PRIVACY_KEYS,
             "run": _RUN_KEYS}


def read_study_file(path: str | Path, *, keys: set[str], sections: set[str], kind: str | None = None,
                    ) -> tuple[Path, dict[str, Any], dict[str, Any], Path]:
    """The checks every study file shares: a [study] table (of ``kind`` if given), known sections and
    keys, and a ``case`` entry naming an existing case file next to it.

    Returns the resolved path, the raw TOML, the [study] table and the case file's path.
    """
    path = resolve_case_path(path)
    raw = load_toml(path)
    table = raw.get("study")
    if kind is not None and (not isinstance(table, dict) or table.get("kind") != kind):
        raise ConfigError(f"{path}: a {kind} study needs a [study] table with kind = \"{kind}\".")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: a study file needs a [study] table.")
    extra = sorted(set(raw) - sections - {"study"})
    if extra:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(f'[{e}]' for e in extra)}.")
    _check_keys(table, keys, "study", path)
    if "case" not in table:
        raise ConfigError(f"{path}: [study] needs a 'case' entry naming the case file.")
    case_path = (path.parent / table["case"]).resolve()
    if not case_path.is_file():
        raise ConfigError(f"{path}: the case file {table['case']!r} does not exist (looked in {path.parent}).")
    return path, raw, table, case_path


def _check_keys(table: dict, allowed: set[str], section: str, path: Path) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))} in [{section}]. "
                          f"Allowed: {', '.join(sorted(allowed))}.")


@dataclass
class Case:
    """A validated case file."""

    path: Path
    name: str
    template: str
    model: dict[str, Any]
    algorithm: dict[str, Any] = field(default_factory=dict)
    privacy: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, *, algorithm: dict | None = None, privacy: dict | None = None,
                       run: dict | None = None) -> Case:
        """A copy with the given entries replaced (None values are ignored)."""
        new = copy.deepcopy(self)
        for table, extra in ((new.algorithm, algorithm), (new.privacy, privacy), (new.run, run)):
            table.update({k: v for k, v in (extra or {}).items() if v is not None})
        return new

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "case": {"name": self.name, "template": self.template},
                "model": self.model, "algorithm": self.algorithm, "privacy": self.privacy, "run": self.run}


def load_case(path: str | Path) -> Case:
    """Load and check a case file (sections [case], [model], [algorithm], [privacy], [run])."""
    path = resolve_case_path(path)
    raw = load_toml(path)
    unknown = sorted(set(raw) - set(_SECTIONS))
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(f'[{u}]' for u in unknown)}. "
                          f"Allowed: {', '.join(f'[{s}]' for s in _SECTIONS)}.")
    for section, allowed in _SECTIONS.items():
        if section in raw and not isinstance(raw[section], dict):
            raise ConfigError(f"{path}: [{section}] must be a table.")
        if allowed is not None and section in raw:
            _check_keys(raw[section], allowed, section, path)
    case = raw.get("case", {})
    if "template" not in case:
        raise ConfigError(f"{path}: [case] needs a 'template' entry (e.g. \"power\" or \"logistic\").")
    mech = raw.get("privacy", {}).get("mechanism", "none")
    if mech not in MECHANISMS:
        raise ConfigError(f"{path}: the 'mechanism' entry of [privacy] must be one of "
                          f"{', '.join(map(repr, MECHANISMS))}. Got {mech!r} instead.")
    return Case(path=path, name=str(case.get("name", path.stem)), template=str(case["template"]),
                model=dict(raw.get("model", {})), algorithm=dict(raw.get("algorithm", {})),
                privacy=dict(raw.get("privacy", {})), run=dict(raw.get("run", {})))


def make_algorithm(table: dict[str, Any]) -> Algorithm:
    """Build the algorithm of an [algorithm] table (``name`` picks it from :data:`cvxdp.families.ALGORITHMS`; the
    keys of other algorithms in the same table are ignored, unknown keys are refused naming them)."""
    params = dict(table)
    name = params.pop("name", "ladmm")
    if name not in ALGORITHMS:
        raise ConfigError("The 'name' entry of [algorithm] must be one of " + ", ".join(map(repr, ALGORITHMS))
                          + f". Got {name!r} instead.")
    if name == "sharing" and "rounds" in params:  # the CLI's --rounds is the number of epochs here
        params["epochs"] = params.pop("rounds")
    others = _ALGORITHM_KEYS - _OWN_ALGORITHM_KEYS[name] - {"name"}
    return ALGORITHMS[name].from_config(params, "[algorithm]", ignore=others)


def make_backend(table: dict[str, Any], *, keep_actors: bool = False) -> Backend:
    """Build the backend of a [run] table: ``backend`` (serial | ray), with ``ray_cpus`` / ``ray_address``.

    ``keep_actors`` (Ray only) keeps the Ray instance and its actors from one run to the next on the returned
    backend (:class:`StudyBackends`); its ``shutdown()`` ends them."""
    name = table.get("backend", "serial")
    if name not in BACKENDS:
        raise ConfigError(f"The 'backend' entry of [run] must be one of {', '.join(map(repr, BACKENDS))}. "
                          f"Got {name!r} instead.")
    options = {"num_cpus": table.get("ray_cpus"), "address": table.get("ray_address")}
    given = sorted(f"ray_{k.replace('num_', '')}" for k, v in options.items() if v is not None)
    if name != "ray":
        if given:
            raise ConfigError(f"[run] {', '.join(given)} apply to backend = \"ray\"; the backend is {name!r}.")
        return get_backend(name)
    try:
        return get_backend(name, keep_actors=keep_actors, **{k: v for k, v in options.items() if v is not None})
    except CvxdpError as exc:
        raise ConfigError(f"[run]: {exc}") from None


class StudyBackends:
    """The backends of a study's cells: one per placement, so that a Ray study starts Ray and its worker
    processes once, not in every cell (the actors are emptied between cells and every node is built afresh from
    its spec, so the numbers are those of a fresh backend). A context manager: leaving it shuts down what it
    started.

    Examples
    --------
    >>> with StudyBackends() as backends:  # doctest: +SKIP
    ...     for case in cells:
    ...         run_case(case, backend=backends(case.run))
    """

    def __init__(self) -> None:
        self._kept: dict[tuple, Backend] = {}

    def __call__(self, table: dict[str, Any]) -> Backend:
        """The backend of a cell's [run] table (a new serial backend, or the study's kept Ray backend)."""
        if table.get("backend", "serial") != "ray":
            return make_backend(table)
        key = (table.get("ray_cpus"), table.get("ray_address"))
        if key not in self._kept:
            self._kept[key] = make_backend(table, keep_actors=True)
        return self._kept[key]

    def close(self) -> None:
        """Shut down every kept backend (its actors, and the Ray instance it started)."""
        kept, self._kept = list(self._kept.values()), {}
        for backend in kept:
            backend.shutdown()

    def __enter__(self) -> StudyBackends:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_privacy(table: dict[str, Any]) -> Any:
    """Build the mechanism of a [privacy] table (None for mechanism = "none"); a key the mechanism does not read is
    refused, naming it and the keys it reads."""
    params = dict(table)
    name = params.pop("mechanism", "none")
    if name == "none":
        return None
    if name not in MECHANISM_CLASSES:
        raise ConfigError("The 'mechanism' entry of [privacy] must be one of " + ", ".join(map(repr, MECHANISMS))
                          + f". Got {name!r} instead.")
    cls, fixed = MECHANISM_CLASSES[name]
    return cls.from_config({**fixed, **params}, "[privacy]")


def algorithm_schema() -> list[tuple[str, str, str, str]]:
    """The [algorithm] rows of the case-file schema, derived from the algorithms' declared parameters
    (:data:`cvxdp.config.schema.SCHEMA` holds them as text, so that ``--help`` loads nothing; a test checks they
    are equal)."""
    from ..params import schema_rows

    rows = [("name", "str", "ladmm", " | ".join(ALGORITHMS))]
    rows += schema_rows(ALGORITHMS)
    rows.append(("edges", "list of [str, str]", "none", "madmm, dvp, radmm, mradmm: the graph's edges themselves "
                 "(instead of graph)"))
    return rows


def privacy_schema() -> list[tuple[str, str, str, str]]:
    """The [privacy] rows of the case-file schema, derived from the mechanisms' declared parameters."""
    from ..params import schema_rows

    rows = [("mechanism", "str", "none", "none | " + " | ".join(MECHANISM_CLASSES)
             + " (each algorithm accepts its own: cvxdp run --help)")]
    by_class = {}
    for name, (cls, _) in MECHANISM_CLASSES.items():
        by_class.setdefault(cls, []).append(name)
    classes = {"/".join(names): cls for cls, names in by_class.items()}
    rows += [r for r in schema_rows(classes) if r[0] != "noise"]
    return rows
