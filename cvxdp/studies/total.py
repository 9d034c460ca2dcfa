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
    load_toml,
    run_case,
    settings_context,
    study_base_case,
)
from ..errors import ConfigError
from ..privacy import InputPerturbation, PrivacyLedger
from ..run import Result
from .study import CellJob, Study, StudyKey, cell_config, register_study
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
from .total_report import (
    _total_baselines,
    column_winner,
    consortium_figures,
    distribution_cost,
    lead_lines,
    method_table,
    summarise,
    total_report_lines,
    verdict,
    write_total_figure,
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
                                work=float(cell.rounds * (1 + cell.local_updates))))
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


def load_total_table(out: str | Path) -> pd.DataFrame:
    """The method x total-epsilon table of a finished equal-total study directory (``table.csv``)."""
    file = Path(out) / "table.csv"
    if not file.is_file():
        raise ConfigError(f"{str(out)!r} holds no finished equal-total study (no table.csv); run it with "
                          "cvxdp study STUDY.toml --out DIR.")
    return pd.read_csv(file)


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

__all__ = ["ANCHORS", "ANCHOR_NAMES", "CENTRAL", "CENTRAL_NOISE", "ONE_SHOT", "OPTIMUM", "TOTAL_FIGURE", "TotalCell", "TotalStudy", "column_winner", "distribution_cost", "is_total_study", "lead_lines", "load_total_study", "load_total_table", "method_table", "run_total_study", "summarise", "total_report_lines", "verdict", "write_total_figure"]
