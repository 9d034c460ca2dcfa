"""Case files (TOML): loading, schema checks with clear errors, and turning tables into cvxdp objects."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, CvxdpError
from ..families.consensus.admm import ADMM
from ..families.consensus.ladmm import LinearizedADMM
from ..families.consensus.updates import Algorithm
from ..families.graph.table import GRAPH_ALGORITHMS, GRAPH_KEYS, graph_algorithm
from ..families.sharing.params import ADMMSharing
from ..run.backends import BACKENDS, Backend, get_backend
from .files import load_toml, resolve_case_path, shipped_cases_dir  # noqa: F401 (stdlib-only; re-exported)

MECHANISMS = ("none", "ObjL", "ObjG", "OutL", "OutG")
GRAPH_MECHANISMS = ("gamma",)  # Gamma-norm noise of the decentralized algorithms (madmm, dvp, radmm, mradmm)
_CASE_KEYS = {"name", "template", "description"}
_ALGORITHM_KEYS = {"name", "rho", "eta", "local_updates", "rounds", "tol_primal", "tol_dual", "tol_mismatch", "relaxation",
                   "polish", "lam", "epochs", "loss"}  # the last three: name = "sharing" (ADMMSharing)
_PRIVACY_KEYS = {"mechanism", "epsilon", "delta", "calibration", "sensitivity", "calibrate", "budget", "noise_source"}
_PRIVACY_KEYS |= {"alpha", "growth"}  # mechanism = "gamma"
_ALGORITHM_KEYS |= GRAPH_KEYS  # name = "madmm" | "dvp" | "radmm" | "mradmm"
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
    if mech not in MECHANISMS + GRAPH_MECHANISMS:
        raise ConfigError(f"{path}: the 'mechanism' entry of [privacy] must be one of "
                          f"{', '.join(map(repr, MECHANISMS + GRAPH_MECHANISMS))}. Got {mech!r} instead.")
    return Case(path=path, name=str(case.get("name", path.stem)), template=str(case["template"]),
                model=dict(raw.get("model", {})), algorithm=dict(raw.get("algorithm", {})),
                privacy=dict(raw.get("privacy", {})), run=dict(raw.get("run", {})))


def make_algorithm(table: dict[str, Any]) -> Algorithm:
    """Build the algorithm of an [algorithm] table."""
    params = dict(table)
    name = params.pop("name", "ladmm")
    try:
        if name in GRAPH_ALGORITHMS:
            return graph_algorithm(name, params)
        if name == "ladmm":
            return LinearizedADMM(**params)
        if name == "admm":
            params.pop("eta", None)
            params.pop("local_updates", None)
            return ADMM(**params)
        if name == "sharing":  # labels come from the label-holding party of the template
            params.pop("eta", None)
            params.pop("local_updates", None)
            if "rounds" in params:  # the CLI's --rounds is the number of epochs here
                params["epochs"] = params.pop("rounds")
            return ADMMSharing(**params)
    except TypeError as exc:
        raise ConfigError(f"[algorithm]: {exc}.") from None
    raise ConfigError(f"The 'name' entry of [algorithm] must be one of 'ladmm', 'admm', 'sharing', "
                      "'madmm', 'dvp', 'radmm', 'mradmm'. "
                      f"Got {name!r} instead.")


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
    """Build the mechanism of a [privacy] table (None for mechanism = "none")."""
    from ..privacy.mechanisms import make_mechanism

    params = dict(table)
    mechanism = params.pop("mechanism", "none")
    if mechanism == "none":
        return None
    if mechanism in GRAPH_MECHANISMS:
        from ..families.graph.mechanism import penalty_perturbation_from_table

        try:
            return penalty_perturbation_from_table(params)
        except (TypeError, CvxdpError) as exc:
            raise ConfigError(f"[privacy]: {exc}") from None
    try:
        mech = make_mechanism(mechanism, **params)
        mech.validate()
    except TypeError as exc:
        raise ConfigError(f"[privacy]: {exc}.") from None
    except CvxdpError as exc:
        raise ConfigError(f"[privacy]: {exc}") from None
    return mech
