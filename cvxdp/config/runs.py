"""One run of a case file: template -> agents -> solve -> template metrics (used by the CLI and studies)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine import solve
from ..run.checkpoint import CheckpointTarget, case_context
from ..run.results import Result
from ..templates import build_model, template_settings
from .build import Case, make_algorithm, make_backend, make_privacy


def build_instance(case: Case):
    """Build the template's agents for ``case`` through the template registry (:mod:`cvxdp.templates`)."""
    return build_model(case.template, case.model, base_dir=case.path.parent)


def power_case(network: str, zones: int, *, objective: str | None = None) -> Case:
    """An in-memory power case (``cvxdp run/central --network NAME --zones N``; NAME may also be a bundled
    PGLib-OPF case or a MATPOWER file path, relative to the current directory): ``network`` split into
    ``zones`` automatic connected zones, LinearizedADMM with rho = eta = 1, 300 rounds, non-private."""
    model = {"network": network, "auto_zones": int(zones)}
    if objective is not None:
        model["objective"] = objective
    stem = Path(network).stem  # a MATPOWER file path names the case by its file name
    return Case(path=Path.cwd() / f"{stem}_{zones}zones.toml", name=f"{stem}_{zones}zones", template="power",
                model=model, algorithm={"name": "ladmm", "rho": 1.0, "eta": 1.0, "local_updates": 1, "rounds": 300},
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
    """The fingerprint context of runs of ``case``: the data (:func:`cvxdp.run.checkpoint.case_context`) and the
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
             checkpoint_every: int = 5, backend: Any = None) -> CaseRun:
    """Run ``case`` once and return its result and a flat summary (final metrics + template metrics).

    With ``checkpoint`` (a directory) the run checkpoints every ``checkpoint_every`` rounds and resumes
    from a checkpoint of the same run found there. ``backend``: where it runs (default: the one the case's
    [run] table names; a study passes its kept one, :class:`cvxdp.config.build.StudyBackends`).
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
                   checkpoint=checkpoint, checkpoint_every=checkpoint_every,
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
