"""Case files (TOML): loading, schema checks with clear errors, and turning tables into cvxdp objects."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, CvxdpError
from ..families import ALGORITHM_KEYS as _ALGORITHM_KEYS
from ..families import ALGORITHMS, Algorithm, algorithm_from_table, mechanism_from_table
from ..families import MECHANISMS as MECHANISM_CLASSES
from ..families import PRIVACY_KEYS as _PRIVACY_KEYS
from ..families.solve import solve
from ..model import solve_central
from ..run import BACKENDS, Backend, CheckpointTarget, Result, case_context, get_backend, jsonable
from ..templates import build_model, template_reads_data, template_settings
from .files import load_toml, resolve_case_path, shipped_cases_dir  # noqa: F401 (stdlib-only; re-exported)

#: [privacy] mechanism names (the registry's, and "none")
MECHANISMS = ("none", *MECHANISM_CLASSES)
_CASE_KEYS = {"name", "template", "description"}
#: every key some registered algorithm reads (a case file may hold several algorithms' keys; each reads its own)
_RUN_KEYS = {"seed", "accountant", "backend", "budget_epsilon", "budget_delta", "target_delta"}
_RUN_KEYS |= {"ray_cpus", "ray_address", "ray_min_variables"}  # backend = "ray"
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

    def with_data(self, data: str | Path) -> Case:
        """A copy whose ``[model] path`` is ``data`` (resolved): what ``--data`` sets. Refused, naming the
        template, for a template registered with ``reads_data=False`` (its data is the network, or generated)."""
        if not template_reads_data(self.template):
            raise ConfigError(f"--data sets [model] path, which the {self.template} template does not read (it reads "
                              "no data file); it applies to templates with a data file (logistic cases, e.g. FEMNIST; "
                              "erm; vertical) and to sharing and graph studies.")
        new = copy.deepcopy(self)
        new.model["path"] = str(Path(data).resolve())
        return new

    def accepted_mechanisms(self) -> tuple[str, ...]:
        """The [privacy] mechanisms this case's algorithm runs, as its class's ``accepts`` says (every name for an
        algorithm name no family knows: the [algorithm] table's own check refuses that one)."""
        cls = ALGORITHMS.get(self.algorithm.get("name", "ladmm"))
        return MECHANISMS if cls is None else tuple(name for name in MECHANISMS if cls.accepts(name))

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


def study_base_case(study: Any, *, run: Mapping[str, Any] | None = None, data: str | Path | None = None) -> Case:
    """The case every cell of a grid or equal-total study starts from: the study's case file, with ``--data`` applied
    (:meth:`Case.with_data`); the command line's ``[run]`` entries (None values ignored) are added to the study's own
    ``[run]`` overrides (``study.overrides["run"]``), which every cell applies."""
    study.overrides["run"].update({k: v for k, v in (run or {}).items() if v is not None})
    case = load_case(study.case_path)
    return case if data is None else case.with_data(data)


def make_algorithm(table: dict[str, Any]) -> Algorithm:
    """Build the algorithm of an [algorithm] table (``name`` picks it from :data:`cvxdp.families.ALGORITHMS`; the
    keys of other algorithms in the same table are ignored, unknown keys are refused naming them)."""
    return algorithm_from_table(table)


def make_backend(table: dict[str, Any], *, keep_actors: bool = False) -> Backend:
    """Build the backend of a [run] table: ``backend`` (serial | ray), with ``ray_cpus`` / ``ray_address`` /
    ``ray_min_variables``.

    ``keep_actors`` (Ray only) keeps the Ray instance and its actors from one run to the next on the returned
    backend (:class:`StudyBackends`); its ``shutdown()`` ends them."""
    name = table.get("backend", "serial")
    if name not in BACKENDS:
        raise ConfigError(f"The 'backend' entry of [run] must be one of {', '.join(map(repr, BACKENDS))}. "
                          f"Got {name!r} instead.")
    # the file's key -> RayBackend's parameter
    keys = {"ray_cpus": "num_cpus", "ray_address": "address", "ray_min_variables": "min_variables"}
    given = sorted(key for key in keys if table.get(key) is not None)
    if name != "ray":
        if given:
            raise ConfigError(f"[run] {', '.join(given)} apply to backend = \"ray\"; the backend is {name!r}.")
        return get_backend(name)
    try:
        return get_backend(name, keep_actors=keep_actors, **{keys[key]: table[key] for key in given})
    except CvxdpError as exc:
        message = str(exc)
        for key, parameter in keys.items():  # name the key the user wrote, not the constructor's parameter
            message = message.replace(f"The {parameter!r} parameter of RayBackend", f"The {key!r} key")
        raise ConfigError(f"[run]: {message}") from None


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
        key = (table.get("ray_cpus"), table.get("ray_address"), table.get("ray_min_variables"))
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
    return mechanism_from_table(table)


def build_instance(case: Case):
    """Build the template's agents for ``case`` through the template registry (:mod:`cvxdp.templates`)."""
    return build_model(case.template, case.model, base_dir=case.path.parent)


def central_reference(instance: Any, *, time_limit: float = 300.0,
                      progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The centralized reference of a built case (evaluation: computed on every agent's private data, never
    released): the template's own ``central`` when it has one, else the agents' joint problem solved by
    :func:`cvxdp.solve_central` (its objective, solver, status and time)."""
    if instance.central is not None:
        return instance.central(time_limit=time_limit, progress=progress)
    ref = solve_central(instance.agents, time_limit=time_limit, progress=progress)
    return {k: ref[k] for k in ("objective", "solver", "status", "time_s")}


#: this process's template instances, per case (see :func:`case_instance`)
_INSTANCES: dict[str, Any] = {}


def case_instance(case: Case, instance: Any = None) -> Any:
    """The template instance of ``case`` (its agents and hooks), built once per process inside
    :func:`kept_instances` (a study's process, or each of its workers, builds its own from the case).
    ``instance``: one already built for ``case``, kept."""
    key = json.dumps(jsonable(case.to_dict()), sort_keys=True)
    if instance is not None:
        _INSTANCES[key] = instance
    elif key not in _INSTANCES:
        _INSTANCES[key] = build_instance(case)
    return _INSTANCES[key]


@contextlib.contextmanager
def kept_instances() -> Iterator[None]:
    """The block within which :func:`case_instance` keeps what it builds (a study's); they are dropped at its end."""
    try:
        yield
    finally:
        _INSTANCES.clear()


def power_case(network: str, zones: int, *, objective: str | None = None, algorithm: str | None = None) -> Case:
    """An in-memory power case (``cvxdp run/central --network NAME --zones N``; NAME may also be a bundled
    PGLib-OPF case or a MATPOWER file path, relative to the current directory): ``network`` split into
    ``zones`` automatic connected zones, 300 rounds, non-private. The default algorithm is LinearizedADMM with
    rho = eta = 1; any other ``algorithm`` (e.g. ``"admm"``) keeps its own defaults (ADMM: rho = "auto")."""
    model = {"network": network, "auto_zones": int(zones)}
    if objective is not None:
        model["objective"] = objective
    stem = Path(network).stem  # a MATPOWER file path names the case by its file name
    table: dict[str, Any] = ({"name": "ladmm", "rho": 1.0, "eta": 1.0, "local_updates": 1, "rounds": 300}
                             if algorithm in (None, "ladmm") else {"name": algorithm, "rounds": 300})
    return Case(path=Path.cwd() / f"{stem}_{zones}zones.toml", name=f"{stem}_{zones}zones", template="power",
                model=model, algorithm=table,
                privacy={"mechanism": "none", "delta": 1e-6}, run={"accountant": "pld"})


def default_run_dir(case: Case, root: str | Path = "runs") -> Path:
    """``runs/<case>-<algorithm>-<mechanism>[-eps<eps>]-seed<seed>``: runs that differ in algorithm, mechanism,
    epsilon or seed never share (and overwrite) a directory. An unseeded (secret-noise) run ends in
    ``-unseeded``: the same command still finds its checkpoint and resumes after a kill."""
    mech = case.privacy.get("mechanism", "none")
    parts = [case.name, str(case.algorithm.get("name", "ladmm")), str(mech)]
    if mech != "none" and case.privacy.get("epsilon") is not None:
        parts.append(f"eps{case.privacy['epsilon']:g}")
    seed = case.run.get("seed")
    parts.append(f"seed{seed}" if seed is not None else "unseeded")
    return Path(root) / "-".join(parts)


#: prefix of the fingerprint components that hold the template's resolved settings (one per setting)
SETTING_COMPONENT = "[model] setting {!r} as resolved by the template"


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float)) or \
        (isinstance(value, (list, tuple)) and all(_plain(v) for v in value))


def settings_components(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Fingerprint components of a template's resolved settings: one per plain (JSON-able scalar or list)
    entry, named after it, so a refusal names the setting that changed. Arrays and objects are left out (the
    data themselves are covered by each agent's problem hash and the data-file hashes)."""
    return {SETTING_COMPONENT.format(k): v for k, v in sorted(settings.items()) if _plain(v)}


def resolved_settings(instance: Any) -> dict[str, Any]:
    """Fingerprint components: the settings the template resolved for ``instance`` (defaults included) —
    ``instance.settings``, or for a template that sets none, the scalars of ``instance.info``. A default that
    changed between versions (e.g. the logistic template's ``dtype``) makes a resumed run or a cached study
    cell a different problem, which is then refused."""
    settings = getattr(instance, "settings", None)
    if settings is None:
        info = getattr(instance, "info", None) or {}
        settings = {k: v for k, v in info.items() if v is None or isinstance(v, (str, bool, int, float))}
    return settings_components(settings)


def settings_context(case: Case, instance: Any = None) -> tuple[dict[str, Any], Any]:
    """The fingerprint context of runs of ``case``: the data (:func:`cvxdp.run.storage.case_context`) and the
    template's resolved settings (the one source for run checkpoints and study cells).

    The settings come from ``instance`` when given, else from the template's settings hook
    (:func:`cvxdp.templates.template_settings`: cheap, no data loaded), else from the instance built here.

    Returns
    -------
    (dict, instance or None)
        The context, and the instance (``instance``, or the one built for a template without a hook, so the
        caller can reuse it; None when the hook answered).
    """
    if instance is None:
        settings = template_settings(case.template, case.model)
        if settings is not None:
            return {**case_context(case), **settings_components(settings)}, None
        instance = build_instance(case)
    return {**case_context(case), **resolved_settings(instance)}, instance


@dataclass
class CaseRun:
    result: Result
    summary: dict[str, Any]


def run_case(case: Case, *, progress: bool = False, instance: Any = None, checkpoint: Any = None,
             checkpoint_every: int = 5, backend: Any = None,
             callback: Callable[[int, dict], None] | None = None) -> CaseRun:
    """Run ``case`` once and return its result and a flat summary (final metrics + template metrics).

    With ``checkpoint`` (a directory) the run checkpoints every ``checkpoint_every`` rounds and resumes
    from a checkpoint of the same run found there. ``backend``: where it runs (default: the one the case's
    [run] table names; a study passes its kept one, :class:`cvxdp.config.build.StudyBackends`). ``callback``:
    as for :func:`cvxdp.solve`, called after every round.
    """
    instance = build_instance(case) if instance is None else instance
    if checkpoint is not None and not isinstance(checkpoint, CheckpointTarget):
        checkpoint = CheckpointTarget(checkpoint, settings_context(case, instance)[0])
    run = case.run
    budget = None
    if run.get("budget_epsilon") is not None:
        budget = (run["budget_epsilon"], run.get("budget_delta", 0.0))
    start = time.perf_counter()
    result = solve(instance.agents, algorithm=make_algorithm(case.algorithm), privacy=make_privacy(case.privacy),
                   accountant=run.get("accountant", "pld"), budget=budget,
                   backend=make_backend(run) if backend is None else backend,
                   seed=run.get("seed"), target_delta=run.get("target_delta"), progress=progress,
                   checkpoint=checkpoint, checkpoint_every=checkpoint_every, callback=callback,
                   # a case run is the data owner's simulation: private evaluation is asked for on every backend,
                   # labelled in the result, and dropped by --public / Result.release()
                   evaluate=True)
    result.config["case"] = case.to_dict()
    summary = {"case": case.name, "mechanism": case.privacy.get("mechanism", "none"),
               "epsilon": case.privacy.get("epsilon"), "local_updates": case.algorithm.get("local_updates", 1),
               "seed": run.get("seed"), **result.summary(), "elapsed_s": time.perf_counter() - start}
    if instance.evaluate is not None:
        summary.update(instance.evaluate(result))
    return CaseRun(result, summary)
