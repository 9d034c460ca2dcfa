"""Equal-total-epsilon studies (``[study] kind = "total"``, issue 39): methods compared at the same whole-run privacy.

A study file with ``[study] kind = "total"`` (named by a grid study's ``total`` key, or run on its own). Its axis is each agent's **total** privacy over the whole run:

* the per-round mechanisms (ObjL, ObjG, OutL, OutG) are calibrated with ``calibrate = "total"`` (PLD) to it, with
  the rounds T and local updates J of the study's public ``schedule`` (below);
* the one-shot anchors perturb each agent's private data once (:class:`cvxdp.privacy.InputPerturbation`, ``InL``
  Laplace, ``InG`` Gaussian) at the template's declared adjacency and then run exact ADMM, which is
  post-processing: the whole run spends the one release (the power template's loads; a template without a
  ``perturbed_inputs`` hook has no anchor);
* the one-shot releases (``anchors = ["OutG-once"]``, also ObjL/ObjG/OutL-once; any template) are ONE release of
  a per-round mechanism: one round (T = 1) of ``one_shot_local_updates`` local updates (J = 1 by default: noise
  drawn once, after one update from the public start, where the stated sensitivity holds), the whole budget, the
  coordinator's global update of the copies as the model; the ledger holds one entry per party;
* the non-private line is exact ADMM on the true data (power), else the case's algorithm without noise;
* the central anchors (templates with the hooks): ``central``, the template's private model on the pooled data at
  the same total budget (``ModelInstance.central_private``; the logistic template's DP-SGD); ``central-sqrtP``, the
  same with its noise multiplied by ``sqrt(P)`` (P the data set's agents: the noise the sum of P parties'
  independent noises carries; a diagnostic whose ledger shows the smaller epsilon it spends); and ``optimum``, the
  non-private optimum on the pooled data (``ModelInstance.central``), one cell per data set and a reference row at
  every epsilon. The report then states what privacy costs and what distribution costs apart
  (:func:`cvxdp.studies.tables.cost_lines`). One-shot releases use every record: the case's ``sampling_rate`` and ``clip_norm``
  are for its per-round runs.

``mechanisms`` may hold variants: ``{ name = "ObjG-q0.1", mechanism = "ObjG", privacy = { sampling_rate = 0.1,
clip_norm = 1.0 } }`` (its own [privacy] entries). ``datasets = [{ name = "writers 0-9", model = {...} }, ...]``
runs every cell on each data set (the ``model`` entries replace the case's; ``writers`` replaces ``agents``); the
cell keys, ``results.csv`` and ``table.csv`` name the data set, and the report's winner row and verdict name a
winner only when the same method wins the column on every data set ("no ranking: X wins on A (...), Y wins on B
(...)" otherwise).

Every private cell runs for each seed; the report's first table is method x total epsilon (mean +- standard error
over seeds), with the winner per column and the anchors' rows. Utility is measured on the TRUE data (for the power
template: the balance deviation at the true loads and the dispatch-cost error against the central optimum).

How T and J are chosen (public information only): ``schedule`` is a list of ``[max_epsilon, rounds,
local_updates]`` rows, sorted by ``max_epsilon``; a total epsilon takes the first row whose ``max_epsilon`` is at
least it (the last row past the end). It is part of the study file, fixed before any run and read from nothing but
the declared budget, so the choice costs no privacy. (A choice made by comparing runs on the private data would
have to be charged to the budget: this study does not do that.)

Layout of ``--out DIR``: ``runs/<cell>/`` (resumable cells, :mod:`.cells`), ``results.csv`` (one row per cell),
``table.csv`` (method x total epsilon: mean and standard error of each metric), ``histories.csv``,
``ledger.json``, ``utility_vs_total_epsilon.png`` (and ``.pdf``), ``report.md``. :func:`load_total_table` reloads the table.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..config.build import (
    case_instance,
    kept_instances,
    load_case,
    load_toml,
    run_case,
    settings_context,
    study_base_case,
)
from ..errors import ConfigError
from ..metrics import TemplateMetrics, template_metrics
from ..privacy import InputPerturbation, PrivacyLedger
from ..run import Result, jsonable
from .cells import CellJob, cell_config
from .figures import figure_files, utility_vs_total_epsilon
from .study import Study, StudyKey, register_study
from .tables import cost_lines, markdown_table
from .total_keys import (
    _ONE_SHOT_DROPS,
    _STUDY_SET,
    ANCHOR_NAMES,
    ANCHORS,
    CENTRAL,
    CENTRAL_NOISE,
    ONE_SHOT,
    OPTIMUM,
    OPTIMUM_SECONDS,
    TOTAL_FIGURE,
    TOTAL_KEYS,
    _slug,
)


@dataclass(frozen=True)
class TotalCell:
    """One run of an equal-total study: a method (a per-round mechanism, an anchor or ``"none"``) at a total
    epsilon (None: non-private) for one seed, with its rounds and local updates, on one data set (``""``: the
    case's own data, the study declares no ``datasets``)."""

    method: str
    epsilon: float | None
    seed: int
    rounds: int
    local_updates: int
    dataset: str = ""

    @property
    def key(self) -> str:
        eps = "none" if self.epsilon is None else f"{self.epsilon:g}"
        head = f"{_slug(self.dataset)}__" if self.dataset else ""
        return f"{head}{self.method}_total{eps}_T{self.rounds}_J{self.local_updates}_seed{self.seed}"


@register_study
@dataclass
class TotalStudy(Study):
    """A loaded ``kind = "total"`` study file (see the module docstring)."""

    kind: ClassVar[str] = "total"
    title: ClassVar[str] = "equal-total"
    schema_table: ClassVar[str] = "[study] total (kind = total)"
    keys: ClassVar[tuple[StudyKey, ...]] = TOTAL_KEYS
    sections: ClassVar[frozenset[str]] = frozenset({"algorithm", "privacy", "run"})
    options: ClassVar[frozenset[str]] = frozenset({"data", "workers"})
    rank: ClassVar[int] = 1
    no_rounds: ClassVar[str] = "its schedule sets the rounds per total epsilon"

    path: Path
    name: str
    case_path: Path
    mechanisms: list[str]
    anchors: list[str]
    epsilons: list[float]
    delta: float
    seeds: list[int]
    schedule: list[tuple[float, int, int]]
    anchor_rounds: int
    baseline: bool
    overrides: dict[str, dict]
    #: per-round method name -> (mechanism, its own [privacy] entries), e.g. "ObjG-q0.1" -> ("ObjG", {...})
    variants: dict[str, tuple[str, dict]] = field(default_factory=dict)
    #: (name, [model] overrides of the case) per data set; empty: the case's own data only
    datasets: list[tuple[str, dict]] = field(default_factory=list)
    #: the public J of the one-shot anchors (ObjG-once, ...)
    one_shot_local_updates: int = 1

    @functools.cached_property
    def metrics(self) -> TemplateMetrics:
        """What the case's template declares its runs measure (the table's headline metrics, labels, sentences)."""
        return template_metrics(load_case(self.case_path).template)

    def schedule_for(self, epsilon: float) -> tuple[int, int]:
        """``(rounds, local_updates)`` of a total ``epsilon``: the first schedule row whose ``max_epsilon`` is at
        least it, else the last row (public: reads only the declared budget)."""
        for max_eps, rounds, js in self.schedule:
            if epsilon <= max_eps:
                return rounds, js
        return self.schedule[-1][1], self.schedule[-1][2]

    def cells(self) -> list[TotalCell]:
        """Every cell, per data set: the non-private baseline (first seed, ``anchor_rounds`` rounds), then each
        method x total epsilon x seed."""
        out = []
        for ds in [name for name, _ in self.datasets] or [""]:
            out += [TotalCell("none", None, self.seeds[0], self.anchor_rounds, 1, ds)] if self.baseline else []
            out += [TotalCell(OPTIMUM, None, self.seeds[0], 1, 1, ds)] if OPTIMUM in self.anchors else []
            for eps in self.epsilons:
                rounds, js = self.schedule_for(eps)
                out += [TotalCell(m, eps, s, rounds, js, ds) for m in self.mechanisms for s in self.seeds]
                for a in self.anchors:
                    if a == OPTIMUM:
                        continue
                    t, j = (1, self.one_shot_local_updates) if a in ONE_SHOT else \
                        ((1, 1) if a in (CENTRAL, CENTRAL_NOISE) else (self.anchor_rounds, 1))
                    out += [TotalCell(a, eps, s, t, j, ds) for s in self.seeds]
        return out


    @classmethod
    def load(cls, path: str | Path) -> TotalStudy:
        """Load and check a ``kind = "total"`` study file (a [study] table plus optional [algorithm]/[privacy]/[run]
        overrides of the per-round cells)."""
        path, raw, values, case_path = cls.read(path)
        if not values["mechanisms"] and not values["anchors"]:
            raise ConfigError(f"{path}: an equal-total study needs at least one mechanism or anchor.")
        return cls(path=path, name=str(values["name"] or path.stem), case_path=case_path,
                   mechanisms=list(values["mechanisms"]), anchors=list(values["anchors"]),
                   epsilons=values["epsilons"], delta=float(values["delta"]), seeds=values["seeds"],
                   schedule=values["schedule"], anchor_rounds=values["anchor_rounds"], baseline=values["baseline"],
                   overrides={k: dict(raw.get(k, {})) for k in ("algorithm", "privacy", "run")},
                   variants=values["mechanisms"], datasets=values["datasets"],
                   one_shot_local_updates=values["one_shot_local_updates"])

    # --------------------------------------------------------------------------- hooks
    def prepare(self, out: Path, stack: contextlib.ExitStack, *, run: dict | None = None,
                data: str | Path | None = None, **options: Any) -> list[CellJob]:
        """The cells as jobs (the anchors' template hooks are checked here, before any run)."""
        stack.enter_context(kept_instances())
        case = study_base_case(self, run=run, data=data)
        self.exact = self.metrics.exact_baseline  # the non-private line: exact ADMM, else the case's algorithm
        bases = {name: _dataset_case(case, model) for name, model in self.datasets} or {"": case}
        self.described = {"study": str(self.path), "case": case.to_dict(), "schedule": self.schedule,
                          "datasets": self.datasets}
        contexts = {dataset: _checked_context(self, base) for dataset, base in bases.items()}
        self.grid, jobs = self.cells(), []
        for cell in self.grid:
            base = bases[cell.dataset]
            cell_case = _total_case(self, base, cell, self.exact)
            compute = functools.partial(_total_cell, base, cell_case, cell.method, cell.epsilon, self.delta,
                                        cell.seed, headline=self.metrics.headline)
            self.movable = self.movable and cell_case.run.get("backend", "serial") != "ray"
            jobs.append(CellJob(cell.key, _cell_config(self, cell, cell_case), compute, contexts[cell.dataset],
                                work=float(cell.rounds * (1 + cell.local_updates)),
                                prepare=functools.partial(case_instance, base)))
        return jobs

    def row(self, index: int, result: Any, summary: dict[str, Any]) -> tuple[dict, pd.DataFrame, Any]:
        cell = self.grid[index]
        priv = summary.get("privacy") or {}
        cols = {"cell": cell.key, "dataset": cell.dataset or self.case_path.stem, "method": cell.method,
                "kind": _kind(cell.method), "total_epsilon": cell.epsilon,
                "delta": None if cell.epsilon is None else self.delta, "seed": cell.seed,
                "rounds": cell.rounds, "local_updates": cell.local_updates}
        flat = {k: v for k, v in summary.items() if k not in cols and not isinstance(v, (dict, list))}
        row = {**cols, **flat, "eps_pld": priv.get("pld")}
        history = result.history.assign(cell=cell.key, dataset=cols["dataset"], method=cell.method,
                                        total_epsilon=cell.epsilon, seed=cell.seed)
        return {**row, **self.metrics.headline_values(row)}, history, result.privacy

    def report(self, results: pd.DataFrame, history: pd.DataFrame, out: Path) -> list[str]:
        """``table.csv``, the figures and ``report.md``."""
        headline = self.metrics.headline
        table = summarise(results, headline)
        table.to_csv(out / "table.csv", index=False)
        baselines = _total_baselines(results, headline)
        figures = write_total_figure(table, self, baselines, self.exact, out)
        if "central" in set(table["kind"]):  # the consortium's figures: test error, anchors drawn
            figures += consortium_figures(table, self, baselines, out)
        (out / "report.md").write_text("\n".join(total_report_lines(results, table, self)) + "\n")
        return ["results.csv", "table.csv", "histories.csv", "ledger.json", *figures, "report.md"]


def _checked_context(study: TotalStudy, base: Any) -> dict:
    """A data set's fingerprint context (:func:`~cvxdp.config.build.settings_context`), the anchors' template hooks
    checked first (before any run)."""
    context, instance = settings_context(base)
    for needed, hook, what in (
            (bool({CENTRAL, CENTRAL_NOISE} & set(study.anchors)), "central_private", "centralized "
             "private anchor (the logistic template's models have one); remove 'central' and "
             f"'{CENTRAL_NOISE}' from anchors in [study]"),
            (OPTIMUM in study.anchors, "central", "centralized non-private optimum; remove "
             f"'{OPTIMUM}' from anchors in [study]"),
            (any(a in ANCHORS for a in study.anchors), "perturbed_inputs", "one-shot input perturbation; "
             f"remove InL and InG from anchors in [study] (the one-shot releases {', '.join(ONE_SHOT)} need "
             "no hook)")):
        if needed:
            instance = case_instance(base, instance)
            if getattr(instance, hook) is None:
                raise ConfigError(f"{study.path}: the {base.template!r} template (with these [model] "
                                  f"settings) has no {what} (ModelInstance.{hook}).")
    if instance is not None:
        case_instance(base, instance)
    return context


def _cell_config(study: TotalStudy, cell: TotalCell, case: Any) -> dict:
    """A cell's configuration: its case's, with what an anchor cell runs besides it."""
    config = cell_config(case)
    if cell.method in ANCHORS:
        mech = InputPerturbation(ANCHORS[cell.method], cell.epsilon, study.delta)
        config["input_perturbation"] = {"noise": mech.noise, "epsilon": mech.epsilon, "delta": mech.delta}
    if cell.method in (CENTRAL, CENTRAL_NOISE):
        config["central_private"] = {"epsilon": cell.epsilon, "delta": study.delta,
                                     "noise": "x sqrt(agents)" if cell.method == CENTRAL_NOISE else "calibrated"}
    if cell.method == OPTIMUM:
        config["central"] = {"tol": 1e-6, "time_limit": OPTIMUM_SECONDS}
    return config


def consortium_figures(table: pd.DataFrame, study: TotalStudy, baselines: dict[str, dict[str, float]],
                       out: Path) -> list[str]:
    """The consortium's figures: test error vs total epsilon, anchors drawn, one per data set (their errors differ
    by decades)."""
    figures: list[str] = []
    for ds, sub in table.groupby("dataset", sort=False):
        figures += figure_files(utility_vs_total_epsilon(
            sub, ["test_error"], out / f"test_error_vs_total_epsilon_{_slug(str(ds))}.png", labels=study.metrics.labels(),
            baseline=baselines.get(ds, {}), baseline_label="non-private federated (no noise)",
            title=f"{ds}: test error at equal total (epsilon, delta = {study.delta:g}) per party\ncentral, "
                  f"central-sqrtP, optimum: pooled data; mean +- standard error over {len(study.seeds)} "
                  "seeds"))
    return figures


def is_total_study(path: str | Path) -> bool:
    """Whether ``path`` is a study file with ``[study] kind = "total"``."""
    raw = load_toml(path)
    return isinstance(raw.get("study"), dict) and raw["study"].get("kind") == "total"


def load_total_study(path: str | Path) -> TotalStudy:
    """Load and check a ``kind = "total"`` study file (:meth:`TotalStudy.load`)."""
    return TotalStudy.load(path)


def _dataset_case(base: Any, model: dict) -> Any:
    """The case of one data set: ``model`` replaces [model] entries of ``base`` (``writers`` replaces ``agents``:
    they are exclusive)."""
    case = base.with_overrides()
    if "writers" in model and "agents" not in model:
        case.model.pop("agents", None)
    case.model.update(model)
    return case


def _total_case(study: TotalStudy, base: Any, cell: TotalCell, exact_baseline: bool = True) -> Any:
    """The case of a cell: a per-round mechanism (or a one-shot release of one: T = 1) calibrated to the total, or
    exact ADMM (input-perturbation anchors; the baseline when ``exact_baseline``), or the case's own algorithm
    without noise (the baseline otherwise)."""
    run = {**study.overrides["run"], "seed": cell.seed}
    if cell.method in (CENTRAL, CENTRAL_NOISE, OPTIMUM):  # no federated run: the case fingerprints data and model
        case = base.with_overrides(run=run)
        case.privacy = {"mechanism": "none"}
        return case
    if cell.method in ANCHORS or (cell.method == "none" and exact_baseline):
        case = base.with_overrides(run=run)
        case.algorithm = {"name": "admm", "rounds": cell.rounds}
        case.privacy = {"mechanism": "none"}
        return case
    case = base.with_overrides(algorithm={**study.overrides["algorithm"], "rounds": cell.rounds,
                                          "local_updates": cell.local_updates}, run=run)
    if cell.method == "none":
        case.privacy = {"mechanism": "none"}
        return case
    one_shot = cell.method in ONE_SHOT
    mechanism, extra = (ONE_SHOT[cell.method], {}) if one_shot else study.variants.get(cell.method, (cell.method, {}))
    drop = _STUDY_SET + (_ONE_SHOT_DROPS if one_shot else ())
    case.privacy = {**{k: v for k, v in {**base.privacy, **study.overrides["privacy"]}.items() if k not in drop},
                    **extra, "mechanism": mechanism, "epsilon": cell.epsilon, "delta": study.delta,
                    "calibrate": "total"}
    return case


def _anchor_run(case: Any, instance: Any, mechanism: InputPerturbation, seed: int) -> tuple[Any, dict[str, Any]]:
    """Exact ADMM on the data perturbed once; evaluated on the true data; the ledger holds the one release."""
    with instance.perturbed_inputs(mechanism, seed) as releases:
        outcome = run_case(case, instance=instance)  # exact ADMM: post-processing of the perturbed data
    result = outcome.result
    ledger = PrivacyLedger([a.name for a in instance.agents], target_delta=mechanism.delta or 1e-5)
    for name, release in releases.items():
        ledger.record(name, release.event, 1, claim=(release.epsilon, release.delta))
    result.ledger, result.privacy = ledger, ledger.summary()
    result.config["input_perturbation"] = {
        "mechanism": mechanism.name, "noise": mechanism.noise, "epsilon": mechanism.epsilon, "delta": mechanism.delta,
        "per_agent": {n: {"scale": r.scale, "sensitivity": r.sensitivity} for n, r in releases.items()}}
    summary = {k: v for k, v in outcome.summary.items() if k != "privacy"}
    summary.update(instance.evaluate(result))  # on the TRUE data (restored on leaving the block)
    summary.update(result.summary())
    summary["objective"] = summary.get("zone_objective", summary.get("objective"))  # the true data's objective
    summary["mechanism"], summary["epsilon"] = mechanism.name, mechanism.epsilon
    return result, summary


def _central_run(instance: Any, epsilon: float, delta: float, seed: int, headline: Sequence[str],
                 noise_scale: float = 1.0) -> tuple[Any, dict[str, Any]]:
    """The template's centralized private anchor (``ModelInstance.central_private``) as a study cell: a one-row
    history of its metrics and a ledger of its one pooled release (its ``steps`` composed events). ``noise_scale``
    (> 1: :data:`CENTRAL_NOISE`) multiplies its noise; the ledger then holds the smaller epsilon it spends."""
    out = instance.central_private(epsilon, delta, seed, **({"noise_scale": noise_scale} if noise_scale != 1.0
                                                            else {}))
    metrics = {k: float(v) for k, v in out.items() if k in headline or k == "train_error"}
    ledger = PrivacyLedger([CENTRAL], target_delta=delta)
    ledger.record(CENTRAL, out["event"], int(out["steps"]), claim=(float(out.get("epsilon", epsilon)), delta))
    history = pd.DataFrame([{"round": 1, **metrics}])
    config = {"central_private": {k: out[k] for k in ("method", "noise_multiplier", "sampling_rate", "steps")
                                  if k in out}, "seed": seed, "noise_scale": noise_scale}
    result = Result(history=history, agent_history=pd.DataFrame([{"round": 1, "agent": CENTRAL}]),
                    solution={"theta": np.asarray(out["solution"], dtype=float)}, local={}, privacy=ledger.summary(),
                    config=config, stop_reason="rounds", ledger=ledger)
    summary = {**metrics, **result.summary(), "mechanism": out.get("method", CENTRAL), "epsilon": epsilon}
    return result, summary


def _optimum_run(instance: Any, time_limit: float) -> tuple[Any, dict[str, Any]]:
    """The template's non-private optimum on the pooled data (``ModelInstance.central``, to a projected gradient
    of 1e-6 within ``time_limit`` seconds) as a study cell, with its test metrics."""
    out = instance.central(tol=1e-6, time_limit=time_limit, solution=True)
    metrics = {"train_cost": float(out["objective"]), **{k: float(out[k]) for k in ("test_error", "train_error")
                                                          if k in out}}
    result = Result(history=pd.DataFrame([{"round": 1, **metrics}]),
                    agent_history=pd.DataFrame([{"round": 1, "agent": OPTIMUM}]),
                    solution={k: np.asarray(v, dtype=float) for k, v in out["solution"].items()}, local={},
                    privacy={}, config={"central": {k: out[k] for k in ("solver", "status", "time_s") if k in out}},
                    stop_reason="rounds")
    return result, {**metrics, "mechanism": OPTIMUM, "status": str(out.get("status", ""))}


def _total_cell(base: Any, case: Any, method: str, epsilon: float | None, delta: float, seed: int,
                cell_dir: Path, *, headline: Sequence[str] = ()) -> tuple[Any, dict[str, Any]]:
    """Run one cell of an equal-total study (in a worker process or the study's): a centralized anchor (private,
    its sqrt(P) twin or the non-private optimum; ``headline``: the template's metrics it reports), a one-shot
    input-perturbation anchor, or a run of the cell's case (checkpointed into ``cell_dir``)."""
    instance = case_instance(base)
    if method == CENTRAL:
        return _central_run(instance, epsilon, delta, seed, headline)
    if method == CENTRAL_NOISE:
        return _central_run(instance, epsilon, delta, seed, headline, noise_scale=math.sqrt(len(instance.agents)))
    if method == OPTIMUM:
        return _optimum_run(instance, OPTIMUM_SECONDS)
    if method in ANCHORS:
        return _anchor_run(case, instance, InputPerturbation(ANCHORS[method], epsilon, delta), seed)
    outcome = run_case(case, instance=instance, checkpoint=cell_dir)
    return outcome.result, outcome.summary


def write_total_figure(table: pd.DataFrame, study: TotalStudy, baselines: dict[str, dict[str, float]],
                       exact: bool, out: Path) -> list[str]:
    """The study's figure (:func:`cvxdp.studies.figures.utility_vs_total_epsilon`): utility vs total epsilon per method, the
    non-private line (``baselines``: data set -> metric -> value; ``exact``: it is exact ADMM). Returns the files."""
    anchors = "; anchors = one-shot releases (noise drawn once)" if study.anchors else ""
    figure = utility_vs_total_epsilon(
        table, list(study.metrics.headline), Path(out) / TOTAL_FIGURE, labels=study.metrics.labels(),
        baseline=next(iter(baselines.values()), {}), baselines=baselines,
        baseline_label="non-private (" + ("exact ADMM" if exact else "no noise") + ")",
        title=f"{study.name}: final utility at equal total (epsilon, delta = {study.delta:g}) per agent\n"
              f"mean +- standard error over {len(study.seeds)} seeds{anchors}")
    return figure_files(figure)


def run_total_study(path: str | Path, out: str | Path, *, progress: bool = True, run: dict | None = None,
                    data: str | Path | None = None, workers: int | None = None) -> dict:
    """Run (or resume) an equal-total study and write its tables, figure and report into ``out``
    (:meth:`TotalStudy.run`).

    Parameters
    ----------
    path : str or Path
        The ``kind = "total"`` study file.
    out : str or Path
        Output directory (see the module docstring).
    progress : bool
        Show a progress bar (with the time left).
    run : dict, optional
        [run] overrides of every cell (None values ignored).
    data : str or Path, optional
        A local file or directory: the case's ``[model] path`` (e.g. a LEAF FEMNIST directory), for every data set.
    workers : int, optional
        Processes running cells at once (:func:`~cvxdp.studies.cells.run_cells`): default every core; ``1`` one
        after another. Cells on Ray run one after another (Ray spreads each run itself).

    Returns
    -------
    dict
        ``{"study", "out", "runs", "computed", "reused", "files"}``.
    """
    return TotalStudy.load(path).run(out, progress=progress, run=run, data=data, workers=workers)


def _kind(method: str) -> str:
    """A cell's kind in the tables: per-round, anchor (one-shot), central, central-noise, reference (the
    non-private optimum) or non-private (the federated run without noise)."""
    if method == CENTRAL:
        return "central"
    if method == CENTRAL_NOISE:
        return "central-noise"
    if method == OPTIMUM:
        return "reference"
    if method in ANCHORS or method in ONE_SHOT:
        return "anchor"
    return "non-private" if method == "none" else "per-round"

def summarise(results: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Data set x method x total epsilon: count, mean and standard error (``std(ddof=1) / sqrt(n)``, NaN for one
    seed) of each metric, and the PLD total (worst agent, largest over seeds)."""
    private = results[results["method"] != "none"]
    if "dataset" not in private:
        private = private.assign(dataset="")
    reference = private[private["method"] == OPTIMUM]
    private = private[private["method"] != OPTIMUM]
    epsilons = sorted(private["total_epsilon"].dropna().unique())
    # the non-private optimum is one cell per data set: its row repeats at every epsilon of the table
    private = pd.concat([private, *[reference.assign(total_epsilon=e) for e in epsilons]], ignore_index=True) \
        if len(reference) else private
    rows = []
    for (dataset, method, eps), grp in private.groupby(["dataset", "method", "total_epsilon"], sort=False):
        row = {"dataset": dataset, "method": method, "kind": grp["kind"].iloc[0], "total_epsilon": float(eps),
               "seeds": len(grp),
               "rounds": int(grp["rounds"].iloc[0]), "local_updates": int(grp["local_updates"].iloc[0]),
               "eps_pld": pd.to_numeric(grp["eps_pld"], errors="coerce").max()}
        for metric in metrics:
            values = pd.to_numeric(grp[metric], errors="coerce").dropna()
            row[f"{metric}_mean"] = float(values.mean()) if len(values) else float("nan")
            row[f"{metric}_se"] = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 \
                else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def load_total_table(out: str | Path) -> pd.DataFrame:
    """The method x total-epsilon table of a finished equal-total study directory (``table.csv``)."""
    file = Path(out) / "table.csv"
    if not file.is_file():
        raise ConfigError(f"{str(out)!r} holds no finished equal-total study (no table.csv); run it with "
                          "cvxdp study STUDY.toml --out DIR.")
    return pd.read_csv(file)


def _total_baselines(results: pd.DataFrame, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """Data set -> metric -> the non-private run's value (empty without a baseline)."""
    base = results[results["method"] == "none"]
    if "dataset" not in base:
        base = base.assign(dataset="")
    return {ds: {m: float(pd.to_numeric(grp[m], errors="coerce").mean()) for m in metrics}
            for ds, grp in base.groupby("dataset", sort=False)}


def _pm(mean: float, se: float, fmt: str = ".3g") -> str:
    if not np.isfinite(mean):
        return "n/a"
    return f"{mean:{fmt}} +- {se:{fmt}}" if np.isfinite(se) else f"{mean:{fmt}}"


def _datasets(table: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(table["dataset"])) if "dataset" in table else [""]


def column_winner(table: pd.DataFrame, metric: str, epsilon: float, kinds: tuple[str, ...] | None = None
                  ) -> tuple[str | None, str]:
    """The method with the lowest mean ``metric`` at total ``epsilon`` (among ``kinds``, None: every method),
    stated only when the same method wins on every data set of ``table``.

    Returns
    -------
    tuple
        ``(winner, text)``: the winner's name and the name again, or ``(None, "no ranking: X wins on A (mean +- se),
        Y on B (...)")`` when the winners differ (or a data set has no value), or ``(None, "n/a")``.
    """
    col = table[table["total_epsilon"] == epsilon].dropna(subset=[f"{metric}_mean"])
    if kinds is not None:
        col = col[col["kind"].isin(kinds)]
    if not len(col):
        return None, "n/a"
    sets = _datasets(table)
    if "dataset" not in col:
        col = col.assign(dataset="")
    best = {ds: grp.loc[grp[f"{metric}_mean"].idxmin()] for ds, grp in col.groupby("dataset", sort=False)}
    names = {str(r["method"]) for r in best.values()}
    if len(names) == 1 and len(best) == len(sets):
        winner = names.pop()
        return winner, winner
    parts = [f"{r['method']} wins on {ds} ({_pm(r[f'{metric}_mean'], r[f'{metric}_se'])})" for ds, r in best.items()]
    parts += [f"no value on {ds}" for ds in sets if ds not in best]
    return None, "no ranking: " + ", ".join(parts)


def method_table(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``metric`` as method (rows: per-round mechanisms, then the one-shot anchors, then the centralized private
    anchor; one row per data set when the table holds several) x total epsilon (columns), each ``mean +- se``, with a
    last row naming the federated winner (lowest mean of the per-round and one-shot methods; the centralized anchor
    is the reference of what distribution costs) of each column -- only when the same method wins it on every data
    set (:func:`column_winner`)."""
    eps = sorted(table["total_epsilon"].unique())
    rank = {"per-round": 0, "anchor": 1, "central": 2, "central-noise": 3, "reference": 4}
    order = list(dict.fromkeys(table.sort_values("kind", key=lambda k: k.map(rank).fillna(0),
                                                 kind="stable")["method"]))
    sets = _datasets(table)
    rows = []
    for method in order:
        for ds in sets:
            sub = table[table["method"] == method]
            if len(sets) > 1:
                sub = sub[sub["dataset"] == ds]
            if not len(sub):
                continue
            sub = sub.set_index("total_epsilon")
            kind = {"anchor": "one-shot anchor", "central": "central anchor, pooled data",
                    "central-noise": "central, sqrt(P) x noise", "reference": "non-private, pooled data"
                    }.get(sub["kind"].iloc[0], "per round")
            rows.append({"method": f"{method} ({kind})", **({"data set": ds} if len(sets) > 1 else {}), **{
                f"eps={e:g}": _pm(sub.loc[e, f"{metric}_mean"], sub.loc[e, f"{metric}_se"]) if e in sub.index
                else "n/a" for e in eps}})
    rows.append({"method": "**winner**", **({"data set": "every one"} if len(sets) > 1 else {}),
                 **{f"eps={e:g}": column_winner(table, metric, e, ("per-round", "anchor"))[1] for e in eps}})
    return pd.DataFrame(rows)


def verdict(table: pd.DataFrame, metrics: Sequence[str]) -> list[str]:
    """Per total epsilon and metric: the best per-round method against the best one-shot anchor (lowest means;
    standard errors shown; per data set when there are several, and a winner only when it wins on every one), and
    one sentence when iteration never beats the one-shot baseline."""
    lines, beaten = [], []
    cost = distribution_cost(table, metrics)
    if not len(table[table["kind"] == "per-round"]) or not len(table[table["kind"] == "anchor"]):
        return cost
    sets = _datasets(table)
    for eps in sorted(table["total_epsilon"].unique()):
        for ds in sets:
            sub = table[table["dataset"] == ds] if len(sets) > 1 else table
            per_round, anchors = sub[sub["kind"] == "per-round"], sub[sub["kind"] == "anchor"]
            parts = []
            for m in metrics:
                pr = per_round[per_round["total_epsilon"] == eps].dropna(subset=[f"{m}_mean"])
                an = anchors[anchors["total_epsilon"] == eps].dropna(subset=[f"{m}_mean"])
                if not len(pr) or not len(an):
                    continue
                a, b = pr.loc[pr[f"{m}_mean"].idxmin()], an.loc[an[f"{m}_mean"].idxmin()]
                wins = bool(a[f"{m}_mean"] <= b[f"{m}_mean"])
                if wins:
                    beaten.append(f"{m} at total eps {eps:g}" + (f" on {ds}" if len(sets) > 1 else ""))
                parts.append(f"{m}: {a['method']} (T = {int(a['rounds'])}, J = {int(a['local_updates'])}) "
                             f"{_pm(a[f'{m}_mean'], a[f'{m}_se'])} vs {b['method']} "
                             f"{_pm(b[f'{m}_mean'], b[f'{m}_se'])}" + (" (per-round lower)" if wins else ""))
            if parts:
                where = f" on {ds}" if len(sets) > 1 else ""
                lines.append(f"- total eps = {eps:g}{where}, best per-round vs best one-shot: " + "; ".join(parts))
        if len(sets) > 1:  # the ranking, stated only when it holds on every data set
            for m in metrics:
                winner, text = column_winner(table, m, eps, ("per-round", "anchor"))
                lines.append(f"- total eps = {eps:g}, {m}, every data set: "
                             + (f"**{winner}** wins on every data set" if winner else text))
    if lines and not beaten:
        lines.append("**No per-round mechanism beat the one-shot baseline on any metric at any total epsilon of "
                     "this study" + (" on any data set" if len(sets) > 1 else "") + "** (numbers above): at equal "
                     "total privacy, releasing once is the better use of the budget here.")
    elif lines:
        lines.append(f"A per-round mechanism had the lower mean only for: {', '.join(beaten)} (compare the standard "
                     "errors before calling it a win).")
    return lines + ([""] + cost if lines and cost else cost)


def distribution_cost(table: pd.DataFrame, metrics: Sequence[str]) -> list[str]:
    """Per total epsilon, data set and metric: the best federated method (per-round or one-shot) against the
    centralized private anchor on the pooled data (what distribution costs; empty without that anchor)."""
    central = table[table["kind"] == "central"]
    if not len(central):
        return []
    federated = table[table["kind"].isin(("per-round", "anchor"))]
    sets, lines = _datasets(table), []
    for eps in sorted(central["total_epsilon"].unique()):
        for ds in sets:
            fed_ds = federated[federated["dataset"] == ds] if len(sets) > 1 else federated
            cen_ds = central[central["dataset"] == ds] if len(sets) > 1 else central
            parts = []
            for m in metrics:
                fed = fed_ds[fed_ds["total_epsilon"] == eps].dropna(subset=[f"{m}_mean"])
                cen = cen_ds[cen_ds["total_epsilon"] == eps].dropna(subset=[f"{m}_mean"])
                if not len(fed) or not len(cen):
                    continue
                a, c = fed.loc[fed[f"{m}_mean"].idxmin()], cen.iloc[0]
                gap = a[f"{m}_mean"] - c[f"{m}_mean"]
                parts.append(f"{m}: {a['method']} {_pm(a[f'{m}_mean'], a[f'{m}_se'])} vs central "
                             f"{_pm(c[f'{m}_mean'], c[f'{m}_se'])} (federated {'higher' if gap > 0 else 'lower or equal'}"
                             f" by {abs(gap):.3g})")
            if parts:
                where = f" on {ds}" if len(sets) > 1 else ""
                lines.append(f"- total eps = {eps:g}{where}, what distribution costs (best federated vs the "
                             "centralized private anchor on the pooled data): " + "; ".join(parts))
    return lines


def lead_lines(out: str | Path, *, link: str = "") -> list[str]:
    """The head of another report (the main job's): the equal-total tables and verdict of the study in ``out``,
    read back from its ``report.md`` (everything above its '## Details' heading), headings one level down and
    ``link`` prefixed to the figure's path."""
    text = (Path(out) / "report.md").read_text()
    lines = []
    for line in text.split("\n## Details")[0].splitlines():
        if line.startswith("# Study "):
            line = f"## Equal TOTAL privacy per agent (study {line[len('# Study '):]})"
        elif line.startswith("#"):
            line = "#" + line
        lines.append(line.replace("](utility_vs_total_epsilon.png)", f"]({link}utility_vs_total_epsilon.png)"))
    return lines


def _one_shot_text(study: TotalStudy) -> str:
    """What the one-shot releases of the study are (empty without any)."""
    once = [a for a in study.anchors if a in ONE_SHOT]
    if not once:
        return ""
    j = study.one_shot_local_updates
    how = ("one local update from the public starting point, then noise drawn once: the mechanism's stated "
           "sensitivity (Delta / min c) holds for that step, so this is the per-round mechanism with T = 1, J = 1 "
           "(the same code path and release audits)") if j == 1 else \
        (f"J = {j} local updates in one round, each perturbed (the per-round mechanism with T = 1: noise drawn J "
         "times, composed)")
    return (f" One-shot releases {', '.join(once)}: each party makes ONE release of the mechanism, {how}, calibrated "
            "to the whole budget (calibrate = \"total\"); the coordinator's global update of the released copies "
            "is the model (post-processing). Its ledger holds one entry per party.")


def total_report_lines(results: pd.DataFrame, table: pd.DataFrame, study: TotalStudy) -> list[str]:
    """The report: the method x total-epsilon table first, then the verdict, the schedule and the privacy."""
    declared = study.metrics
    metrics = declared.headline
    bases = _total_baselines(results, metrics)
    sets = _datasets(table)
    on = (f" on {len(sets)} data sets ({', '.join(sets)}; a winner is named only when it wins on every one)"
          if len(sets) > 1 else "")
    lines = [f"# Study {study.name}", "",
             f"Case `{study.case_path.name}`{on}; each agent's whole-run budget (epsilon, delta = {study.delta:g}), "
             f"epsilon in {study.epsilons}; {len(study.seeds)} seeds {study.seeds}; mean +- standard error over "
             "seeds; lower is better.", "",
             f"## {metrics[0]} by method and total epsilon", "", markdown_table(method_table(table, metrics[0])), ""]
    for m in metrics[1:]:
        lines += [f"## {m} by method and total epsilon", "", markdown_table(method_table(table, m)), ""]
    what = "exact ADMM on the true data" if declared.exact_baseline else "the case's algorithm without noise"
    lines += ([f"Non-private reference ({what}): " + "; ".join(
        (f"{ds}: " if len(sets) > 1 else "") + ", ".join(f"{m} {v:.4g}" for m, v in base.items())
        for ds, base in bases.items())] if bases else ["No non-private reference (baseline = false)."]) + [""]
    verdicts = verdict(table, metrics)
    if verdicts:
        lines += ["## Per-round iteration vs one-shot release", "", *verdicts, ""]
    elif len(sets) > 1:
        lines += ["## Ranking (stated only when it holds on every data set)", "",
                  *[f"- total eps = {e:g}, {m}: " + (f"**{w}** wins on every data set" if w else text)
                    for e in sorted(table["total_epsilon"].unique()) for m in metrics
                    for w, text in [column_winner(table, m, e)]], ""]
    lines += cost_lines(table, bases)  # with a central anchor only
    baseline_text = f"Anchors and the non-private line: exact ADMM, {study.anchor_rounds} rounds." if \
        declared.exact_baseline else \
        f"The non-private line: the case's own algorithm without noise, {study.anchor_rounds} rounds, J = 1."
    lines += ["![utility vs total epsilon](utility_vs_total_epsilon.png)", "", "## Details", "",
              declared.total_definitions + _one_shot_text(study), ""]
    if study.datasets:
        lines += ["Data sets ([model] entries replaced in the case): " + "; ".join(
            f"{name}: {jsonable(model)}" for name, model in study.datasets), ""]
    variants = {n: v for n, v in study.variants.items() if v[1]}
    if variants:
        lines += ["Mechanism variants: " + "; ".join(f"{n} = {m} with {jsonable(p)}" for n, (m, p) in
                                                     variants.items()), ""]
    columns = (["dataset"] if len(sets) > 1 else []) + ["method", "total_epsilon", "rounds", "local_updates",
                                                        "eps_pld"]
    lines += ["Rounds T and local updates J per total epsilon (public rule: the study file's schedule, "
              "[max_epsilon, T, J] rows, first row whose max_epsilon >= epsilon; fixed before any run, read from "
              f"the declared budget only, so it costs no privacy): {[list(r) for r in study.schedule]}. "
              + baseline_text, "",
              "## Privacy (worst agent, whole run, PLD; largest over seeds)", "",
              markdown_table(table[columns], floatfmt=".4g"), "",
              "Seeded runs are for research, not release: anyone who knows a seed can replay the noise.", ""]
    return lines


__all__ = ["ANCHORS", "ANCHOR_NAMES", "CENTRAL", "CENTRAL_NOISE", "ONE_SHOT", "OPTIMUM", "TOTAL_FIGURE", "TotalCell", "TotalStudy", "column_winner", "distribution_cost", "is_total_study", "lead_lines", "load_total_study", "load_total_table", "method_table", "run_total_study", "summarise", "total_report_lines", "verdict", "write_total_figure"]
