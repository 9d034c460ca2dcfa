"""Studies: the grid mechanisms x eps x J x seeds over one case, resumable, with tables, figures, report.

Layout of ``--out DIR``::

    DIR/runs/<cell>/        one saved Result per cell (cvxdp.studies.cells: finished cells are skipped on a
                            rerun, a cell of a changed study -- or of a [model] the template now resolves
                            differently -- is refused, an interrupted cell resumes)
    DIR/results.csv         one row per cell (final metrics, template metrics, privacy totals)
    DIR/histories.csv       every round of every cell (tidy)
    DIR/ledger.json         each cell's privacy ledger summary
    DIR/*.png, DIR/*.pdf    the figures: 300 dpi PNG and vector PDF (cvxdp.studies.figures)
    DIR/report.md

Equal-total-epsilon studies (``[study] kind = "total"``) are :mod:`cvxdp.studies.total`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ..config.build import (
    MECHANISMS,
    StudyBackends,
    case_instance,
    kept_instances,
    load_case,
    make_algorithm,
    run_case,
    settings_context,
    study_base_case,
)
from ..errors import ConfigError
from ..privacy import PAPER_PRESET
from .figures import _positive_range, axis_label, figure_files, metric_vs_epsilon, metric_vs_rounds
from .study import (
    CellJob,
    Study,
    StudyKey,
    cell_config,
    default_workers,
    head_keys,
    in_parallel,
    is_bool,
    is_int_at_least,
    is_unit_float,
    number_list,
    refuse,
    register_study,
)
from .tables import MEANINGLESS_EPSILON, markdown_table, privacy_caveats
from .total import TOTAL_FIGURE, TotalStudy, is_total_study, lead_lines

_MECHANISM_NAMES = "names from ObjL, ObjG, OutL, OutG"


def _mechanisms(value: Any, path: Path) -> list[str]:
    if not isinstance(value, list) or not value:
        raise refuse(path, "mechanisms", f"a non-empty list of {_MECHANISM_NAMES}", value)
    bad = [m for m in value if m not in MECHANISMS or m == "none"]
    if bad:
        raise ConfigError(f"{path}: the 'mechanisms' entry of [study] must hold {_MECHANISM_NAMES}. "
                          f"Got {bad[0]!r} instead.")
    return value


def _total(value: Any, path: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not (path.parent / value).is_file() or not is_total_study(path.parent / value):
        raise ConfigError(f"{path}: the 'total' entry of [study] must name an equal-total study file (kind = "
                          f"\"total\") next to it. Got {value!r} instead.")
    return (path.parent / value).resolve()


@dataclass(frozen=True)
class Cell:
    mechanism: str
    epsilon: float | None
    local_updates: int
    seed: int

    @property
    def key(self) -> str:
        eps = "none" if self.epsilon is None else f"{self.epsilon:g}"
        return f"{self.mechanism}_eps{eps}_J{self.local_updates}_seed{self.seed}"


@register_study
@dataclass
class GridStudy(Study):
    """A grid study (``[study]`` without ``kind``): mechanisms x eps x J x seeds over one case (the module
    docstring)."""

    kind: ClassVar[str] = "grid"
    title: ClassVar[str] = "grid"
    schema_table: ClassVar[str] = "[study] grid (default kind)"
    keys: ClassVar[tuple[StudyKey, ...]] = (
        *head_keys(),
        StudyKey("mechanisms", "list of str", "[ObjL, ObjG, OutL, OutG]", "mechanisms compared",
                 value=["ObjL", "ObjG", "OutL", "OutG"], parse=_mechanisms),
        StudyKey("epsilons", "list of float > 0", "required", "per-step epsilon grid",
                 parse=number_list("epsilons", float, positive=True)),
        StudyKey("local_updates", "list of int >= 1", "[1]", "J values", value=[1],
                 parse=number_list("local_updates", int, positive=True)),
        StudyKey("seeds", "list of int >= 0", "[0]", "seeds per cell", value=[0],
                 parse=number_list("seeds", int, positive=False)),
        StudyKey("rounds", "int >= 1", "the case's", "rounds of every run (`--rounds` overrides)",
                 expected="an int in [1, inf)", accepts=is_int_at_least(1, optional=True)),
        StudyKey("delta", "float in (0, 1)", "the case's or 1e-6", "per-step delta of the Gaussian mechanisms",
                 expected="a float in (0, 1)", accepts=is_unit_float(optional=True)),
        StudyKey("baseline", "bool", "true", "add the non-private run for each J", value=True,
                 expected="true or false (a TOML boolean)", accepts=is_bool),
        StudyKey("total", "str", "none", "an equal-total study file (kind = total) run first into DIR/total; the "
                 "report leads with it", parse=_total),
    )
    sections: ClassVar[frozenset[str]] = frozenset({"algorithm", "privacy", "run"})
    options: ClassVar[frozenset[str]] = frozenset({"rounds", "data", "workers"})
    rank: ClassVar[int] = 0
    bar_without_terminal: ClassVar[bool] = True

    path: Path
    name: str
    case_path: Path
    mechanisms: list[str]
    epsilons: list[float]
    local_updates: list[int]
    seeds: list[int]
    rounds: int | None
    delta: float | None
    baseline: bool
    overrides: dict[str, dict]
    total: Path | None = None  # the equal-total companion study (kind = "total") the report leads with

    def cells(self) -> list[Cell]:
        cells = [Cell(m, float(e), int(j), int(s)) for m, e, j, s in
                 itertools.product(self.mechanisms, self.epsilons, self.local_updates, self.seeds)]
        if self.baseline:
            cells = [Cell("none", None, int(j), self.seeds[0]) for j in self.local_updates] + cells
        return cells

    @classmethod
    def load(cls, path: str | Path) -> GridStudy:
        """Load and check a study file (a [study] table plus optional [algorithm]/[privacy]/[run] overrides)."""
        path, raw, values, case_path = cls.read(path)
        delta = values["delta"]
        return cls(total=values["total"], path=path, name=str(values["name"] or path.stem), case_path=case_path,
                   mechanisms=values["mechanisms"], epsilons=values["epsilons"],
                   local_updates=values["local_updates"], seeds=values["seeds"], rounds=values["rounds"],
                   delta=None if delta is None else float(delta), baseline=values["baseline"],
                   overrides={k: dict(raw.get(k, {})) for k in ("algorithm", "privacy", "run")})

    # --------------------------------------------------------------------------- hooks
    def companions(self, out: Path, stack: contextlib.ExitStack, *, run: dict | None = None, **options: Any
                   ) -> list[Study]:
        """The equal-total companion (``total``), run first into ``out/total``: the report leads with it."""
        if self.total is None:
            self.lead: list[str] = []
            return []
        companion = TotalStudy.load(self.total)
        companion.out = out / "total"
        companion.options = {"run": run}
        self.companion = companion
        return [companion]

    def prepare(self, out: Path, stack: contextlib.ExitStack, *, rounds: int | None = None, run: dict | None = None,
                data: str | Path | None = None, **options: Any) -> list[CellJob]:
        base = study_base_case(self, run=run, data=data)
        self.base, self.rounds_run = base, rounds or self.rounds
        self.described = {"study": str(self.path), "case": base.to_dict(), "rounds": rounds or self.rounds}
        stack.enter_context(kept_instances())
        backends = stack.enter_context(StudyBackends())
        self.grid = self.cells()
        cases = [_cell_case(self, base, cell, rounds) for cell in self.grid]
        # the cells differ in algorithm, privacy and seed, never in [model]: one context (data + the template's
        # resolved settings) guards them all; the instance is built only when a cell must run (or here, for a
        # template without a settings hook)
        context, instance = settings_context(base)
        if instance is not None:
            case_instance(base, instance)
        self.instance = instance
        on_ray = any(case.run.get("backend", "serial") == "ray" for case in cases)
        self.movable = not on_ray
        return [CellJob(cell.key, cell_config(case), functools.partial(_grid_cell, base, case,
                                                                      backends=backends if on_ray else None),
                        context, work=cell_work(case))
                for cell, case in zip(self.grid, cases)]

    def finish(self, outcomes: Sequence[tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
        self.lead = []
        if self.total is not None:
            for name in figure_files(TOTAL_FIGURE):  # its figure next to the paper's per-step figures
                shutil.copyfile(self.out / "total" / name, self.out / name)
            self.lead = lead_lines(self.out / "total")
        if self.runner.computed:
            self.instance = case_instance(self.base)
        return super().finish(outcomes)

    def row(self, index: int, result: Any, summary: dict[str, Any]) -> tuple[dict, pd.DataFrame, Any]:
        cell = self.grid[index]
        cell_cols = {"cell": cell.key, "mechanism": cell.mechanism, "epsilon": cell.epsilon,
                     "local_updates": cell.local_updates, "seed": cell.seed}
        priv = summary.pop("privacy", None) or {}
        flat = {k: v for k, v in summary.items() if k not in cell_cols and not isinstance(v, (dict, list))}
        basic = priv.get("basic")
        return ({**cell_cols, **flat, "eps_basic": basic[0] if basic else None,
                 "delta_basic": basic[1] if basic else None, "eps_rdp": priv.get("rdp"), "eps_pld": priv.get("pld")},
                result.history.assign(**cell_cols), result.privacy)

    def report(self, results: pd.DataFrame, history: pd.DataFrame, out: Path) -> list[str]:
        instance = self.instance
        meta_file = out / "records.json"  # smallest agent's record count, kept for reports of resumed studies
        if instance is not None and isinstance(instance.info, dict) and instance.info.get("samples_per_agent"):
            meta_file.write_text(json.dumps({"n_records": int(min(instance.info["samples_per_agent"]))}))
        n_records = json.loads(meta_file.read_text())["n_records"] if meta_file.exists() else None
        workers = self.options.get("workers")
        files = ["results.csv", "histories.csv", "ledger.json"] \
            + write_figures(results, history, out, self, workers=default_workers() if workers is None else workers) \
            + [write_report(results, history, out, self, n_records=n_records, lead=self.lead)]
        if self.total is not None:
            files += [*figure_files(TOTAL_FIGURE), "total/report.md", "total/table.csv"]
        return files


def load_study(path: str | Path) -> GridStudy:
    """Load and check a grid study file (:meth:`GridStudy.load`)."""
    return GridStudy.load(path)


def _cell_case(study: GridStudy, base, cell: Cell, rounds: int | None):
    privacy = {"mechanism": cell.mechanism}
    if cell.epsilon is not None:
        privacy["epsilon"] = cell.epsilon
        if cell.mechanism.endswith("G"):
            privacy["delta"] = study.delta if study.delta is not None else base.privacy.get("delta", 1e-6)
    case = base.with_overrides(algorithm={**study.overrides["algorithm"], "local_updates": cell.local_updates,
                                          "rounds": rounds or study.rounds},
                               privacy={**study.overrides["privacy"]},
                               run={**study.overrides["run"], "seed": cell.seed})
    case.privacy = {k: v for k, v in case.privacy.items() if k not in ("mechanism", "epsilon", "delta")}
    if cell.mechanism == "none":
        case.privacy = {"mechanism": "none"}
    else:
        case.privacy.update(privacy)
    return case


def cell_work(case: Any) -> float:
    """A public estimate of a consensus cell's cost: rounds x (1 + local updates) of its algorithm (a round costs a
    global update and its local updates; on the main job a J = 5 cell takes about three times a J = 1 cell)."""
    algorithm = make_algorithm(case.algorithm)
    return float(algorithm.rounds * (1 + getattr(algorithm, "local_updates", 1)))


def _grid_cell(base: Any, case: Any, cell_dir: Path, backends: StudyBackends | None = None) -> tuple[Any, dict]:
    """Run one cell of the grid (in a worker process or the study's): the cell's case on the study's instance,
    checkpointed into ``cell_dir``; ``backends``: the study's kept backends (Ray), else the case's own backend."""
    outcome = run_case(case, instance=case_instance(base), checkpoint=cell_dir,
                       backend=None if backends is None else backends(case.run))
    return outcome.result, outcome.summary


def run_study(path: str | Path, out: str | Path, *, rounds: int | None = None, progress: bool = True,
              data: str | Path | None = None, run: dict | None = None, workers: int | None = None) -> dict:
    """Run (or resume) a study and write its tables, figures and report into ``out`` (:meth:`Study.run`).

    ``data`` (a local file or directory) becomes the case's ``[model] path`` (e.g. a LEAF FEMNIST directory).
    ``run`` overrides [run] entries of every cell (None values are ignored), e.g. ``{"backend": "ray"}``.
    ``workers``: processes running cells at once (:func:`~cvxdp.studies.cells.run_cells`; default every core, ``1``
    one after another; cells on Ray run one after another, Ray spreading each run itself). The equal-total companion
    study (``total``) runs first into ``out/total``, its cells in the same pool, and the report leads with it.
    """
    return GridStudy.load(path).run(out, rounds=rounds, progress=progress, data=data, run=run, workers=workers)


def _seeds(study: GridStudy) -> str:
    n = len(study.seeds)
    return f"mean of {n} seeds, band = min-max" if n > 1 else "1 seed: no spread shown"


def _rounds(history: pd.DataFrame) -> int:
    return int(history["round"].max()) if len(history) else 0


def write_figures(results: pd.DataFrame, history: pd.DataFrame, out: Path, study: GridStudy, *,
                  workers: int = 1) -> list[str]:
    """The paper's figure layout: noise vs eps, objective vs rounds (J = 1 and largest J, one y range), the
    residual of ObjG by J, the final metrics vs eps per step and vs the total epsilon T x J x eps_step.
    ``workers``: processes drawing them at once (:func:`~cvxdp.studies.cells.in_parallel`)."""
    labels = study.metrics.labels()
    files: list[str] = []
    calls: list[tuple] = []  # (function, args, kwargs) of every figure, drawn at the end

    def draw(function, *args, **kwargs) -> None:
        calls.append((function, args, kwargs))

    js = sorted(study.local_updates)
    draw(metric_vs_epsilon, results, "noise_magnitude", out / "noise_vs_epsilon.png",
         title=f"{study.name}: {axis_label('noise_magnitude', labels)}\n"
               f"({_seeds(study)}; ObjG and OutG coincide when the smallest prox weight min(c) is 1)",
         labels=labels)
    files += figure_files("noise_vs_epsilon.png")
    private = history[history["mechanism"] != "none"]
    shared = _positive_range(private["objective"].values)  # one y range for every J
    for J in sorted({js[0], js[-1]}):
        name = f"objective_vs_rounds_J{J}.png"
        draw(metric_vs_rounds, history, "objective", out / name, J=J, labels=labels, ylim=shared,
             title=f"{study.name}, J = {J}: {axis_label('objective', labels)} by round\n"
                   f"({_seeds(study)}; private panels share one y range across J)")
        files += figure_files(name)
    for mech in ("ObjG", "ObjL"):
        if mech in study.mechanisms:
            name = f"residual_{mech}_by_J.png"
            draw(metric_vs_rounds, history, "consensus_residual", out / name, J=js[0], mechanisms=[mech],
                 by_j=True, labels=labels, reference="none",
                 title=f"{study.name}: {axis_label('consensus_residual', labels)} of {mech}, "
                       f"J in {js}\nat equal eps_step: J = {js[-1]} spends {js[-1]}x the total privacy "
                       f"(see *_vs_total_epsilon.png)")
            files += figure_files(name)
            break
    T = _rounds(history)
    for metric in ("train_cost", "test_error", "objective", "consensus_residual"):
        if metric in results.columns and results[metric].notna().any():
            name = f"{metric}_vs_epsilon.png"
            draw(metric_vs_epsilon, results, metric, out / name, labels=labels, logy=metric != "test_error",
                 title=f"{study.name}: final {axis_label(metric, labels)}\n({_seeds(study)})")
            files += figure_files(name)
            if len(js) > 1 and metric in ("test_error", "consensus_residual", "train_cost"):
                name = f"{metric}_vs_total_epsilon.png"
                draw(metric_vs_epsilon, results, metric, out / name, labels=labels, logy=metric != "test_error",
                     x="total", rounds=T,
                     title=f"{study.name}: final {axis_label(metric, labels)}\nat equal TOTAL "
                           f"privacy per agent (basic composition; {_seeds(study)})")
                files += figure_files(name)
    in_parallel(calls, workers)
    return files


def _pairs(study: GridStudy) -> list[tuple[str, str]]:
    return [(o, p) for o, p in (("ObjL", "OutL"), ("ObjG", "OutG")) if o in study.mechanisms and p in study.mechanisms]


def compare_mechanisms(results: pd.DataFrame, study: GridStudy, metric: str = "objective") -> pd.DataFrame:
    """Mean final ``metric`` over seeds of ObjPert and OutPert per (noise, eps, J), and who was lower."""
    means = results[results["mechanism"] != "none"].groupby(["mechanism", "epsilon", "local_updates"])[metric].mean()
    rows = []
    for obj, outp in _pairs(study):
        for eps in sorted(study.epsilons):
            for J in sorted(study.local_updates):
                a, b = means.get((obj, eps, J)), means.get((outp, eps, J))
                if a is None or b is None:
                    continue
                rows.append({"pair": f"{obj} vs {outp}", "epsilon": eps, "local_updates": J, obj[:3]: a,
                             "Out": b, "objpert_lower": bool(a < b)})
    return pd.DataFrame(rows)


def residual_by_j(results: pd.DataFrame, study: GridStudy) -> pd.DataFrame:
    """Mean final consensus residual of the objective-perturbation mechanisms per eps and J."""
    sub = results[results["mechanism"].isin(["ObjG", "ObjL"])]
    return sub.groupby(["mechanism", "epsilon", "local_updates"])["consensus_residual"].mean().unstack()


def equal_total_privacy(results: pd.DataFrame, study: GridStudy, rounds: int, metric: str) -> pd.DataFrame:
    """Smallest and largest J compared at the same TOTAL epsilon T x J x eps_step: rows where the grid holds
    eps_step = e at J_max and eps_step = e x J_max / J_min at J_min."""
    js = sorted(study.local_updates)
    if len(js) < 2:
        return pd.DataFrame()
    lo, hi = js[0], js[-1]
    grouped = results[results["mechanism"] != "none"].groupby(["mechanism", "epsilon", "local_updates"])
    means = grouped[metric].mean()
    pld = grouped["eps_pld"].mean() if "eps_pld" in results.columns else pd.Series(dtype=float)
    eps_grid = sorted(study.epsilons)
    rows = []
    for mech in study.mechanisms:
        for e in eps_grid:
            match = [x for x in eps_grid if math.isclose(x, e * hi / lo, rel_tol=1e-9)]
            if not match or (mech, e, hi) not in means or (mech, match[0], lo) not in means:
                continue
            a, b = means[(mech, match[0], lo)], means[(mech, e, hi)]
            rows.append({"mechanism": mech, "total eps (basic)": rounds * hi * e, f"J={lo} eps_step": match[0],
                         f"J={lo} eps_pld": pld.get((mech, match[0], lo)), f"J={lo} {metric}": a,
                         f"J={hi} eps_step": e, f"J={hi} eps_pld": pld.get((mech, e, hi)), f"J={hi} {metric}": b,
                         f"J={hi} lower": bool(b < a)})
    return pd.DataFrame(rows)


def _mechanism_lines(results: pd.DataFrame, study: GridStudy, metric: str) -> list[str]:
    """The report's section: ObjPert vs OutPert at equal eps_step, per J and over the grid (and by test error)."""
    lines: list[str] = []
    cmp = compare_mechanisms(results, study, metric)
    if len(cmp):
        table = cmp.rename(columns={"epsilon": "eps_step", "local_updates": "J", "Obj": f"ObjPert {metric}",
                                    "Out": f"OutPert {metric}", "objpert_lower": "ObjPert lower"})
        lines += [f"## ObjPert vs OutPert (mean final {metric} over seeds; lower is better)", "",
                  markdown_table(table, floatfmt=".6g"), ""]
        for J in sorted(study.local_updates):
            cells = cmp[cmp["local_updates"] == J]
            wins = cells[cells["objpert_lower"]]
            lines.append(f"At J = {J}, ObjPert was lower in {len(wins)} of {len(cells)} (pair, eps) cells."
                         + ("" if len(wins) == len(cells) else " Not lower at: " + ", ".join(
                             f"{r['pair']} eps={r['epsilon']:g}" for _, r in cells[~cells["objpert_lower"]].iterrows())
                            + "."))
        lines.append(f"Over the whole grid: ObjPert lower in {int(cmp['objpert_lower'].sum())} of {len(cmp)} "
                     "(pair, eps, J) cells.")
        if "test_error" in results.columns and results["test_error"].notna().any():
            te = compare_mechanisms(results, study, "test_error")
            lines += ["", "Test error (mean over seeds; lower is better):", "",
                      markdown_table(te.rename(columns={"epsilon": "eps_step", "local_updates": "J",
                                                        "Obj": "ObjPert test error", "Out": "OutPert test error",
                                                        "objpert_lower": "ObjPert lower"}), floatfmt=".4g"), "",
                      f"By test error ObjPert was lower in {int(te['objpert_lower'].sum())} of {len(te)} cells."]
        lines.append("")
    return lines


def _local_update_lines(results: pd.DataFrame, study: GridStudy, T: int, metric: str) -> list[str]:
    """The report's section: J at equal eps_step (the residual) and at equal total privacy."""
    lines: list[str] = []
    res = residual_by_j(results, study)
    if len(res):
        lo, hi = min(study.local_updates), max(study.local_updates)
        lines += [f"## Consensus residual by J at equal eps_step (mean final value; J = {hi} spends {hi}x the "
                  "privacy of J = {lo})".replace("{lo}", str(lo)), "",
                  markdown_table(res.reset_index(), floatfmt=".4g"), ""]
        lower = [row.dropna().values[-1] < row.dropna().values[0] for _, row in res.iterrows()
                 if len(row.dropna()) > 1]
        lines.append(f"At equal eps_step, J = {hi} had a lower residual than J = {lo} in {sum(lower)} of "
                     f"{len(lower)} (mechanism, eps) cells. Caveat: at equal eps_step, J = {hi} spends {hi} times "
                     "the total privacy; the table below compares at equal total epsilon.")
    for m in dict.fromkeys(["consensus_residual", metric]):
        eq = equal_total_privacy(results, study, T, m)
        if len(eq):
            lines += ["", f"## J at equal TOTAL privacy (basic composition T x J x eps_step): final {m}", "",
                      markdown_table(eq, floatfmt=".4g"), "",
                      f"At equal total epsilon (basic composition), J = {max(study.local_updates)} was lower in "
                      f"{int(eq.iloc[:, -1].sum())} of {len(eq)} (mechanism, total eps) cells. Under PLD the same "
                      "basic total is a smaller epsilon for the run with more, smaller steps (column eps_pld)."]
    lines.append("")
    return lines


def write_report(results: pd.DataFrame, history: pd.DataFrame, out: Path, study: GridStudy,
                 n_records: int | None = None, lead: list[str] | None = None) -> str:
    """A markdown report that states, with numbers, where ObjPert beat OutPert and where not (every table in
    full), compares J at equal per-step and at equal total privacy, and says when totals mean nothing. ``lead``:
    lines placed first (the equal-total companion study's table and verdict)."""
    T = _rounds(history)
    lines = [f"# Study {study.name}", ""]
    if lead:
        lines += [*lead, "", "## The paper's view: mechanisms at equal PER-STEP epsilon", ""]
    lines += [f"Case: `{study.case_path.name}`; mechanisms {study.mechanisms}; "
             f"eps_step {study.epsilons}; J {study.local_updates}; seeds {study.seeds}; {T} rounds.", "",
             study.metrics.definitions, ""]
    sens = study.overrides["privacy"].get("sensitivity") or load_case(study.case_path).privacy.get("sensitivity",
                                                                                                   "exact")
    lines += [f"Calibration: sensitivity = '{sens}' " + (
        "(the model's declared sensitivity: ObjPert noise on the gradient sensitivity, OutPert noise on the output "
        "sensitivity Delta / min(c); every run is a DP guarantee for the stated relation)." if sens == "exact" else
        "(the papers' preset, used as is: it reproduces their figures and is only a guarantee where the preset "
        "bounds the true sensitivity)."), ""]
    base = results[results["mechanism"] == "none"]
    metric = "train_cost" if "train_cost" in results.columns and results["train_cost"].notna().any() else "objective"
    if len(base):
        cols = [c for c in ("objective", "train_cost", "test_error") if c in base.columns]
        lines += ["Non-private reference (final values): " + "; ".join(
            f"J={int(r['local_updates'])}: " + ", ".join(f"{c} {r[c]:.6g}" for c in cols)
            for _, r in base.iterrows()), ""]
    lines += _mechanism_lines(results, study, metric)
    viol = results[results["mechanism"] != "none"].groupby("mechanism")["max_violation"].max()
    if len(viol):
        lines += ["## Feasibility of the communicated iterates (max violation over the grid)", "",
                  ", ".join(f"{m}: {v:.3g}" for m, v in viol.items()), ""]
    if len(study.local_updates) > 1:
        lines += _local_update_lines(results, study, T, metric)
    priv = results[results["mechanism"] != "none"][["cell", "eps_basic", "delta_basic", "eps_rdp", "eps_pld"]]
    lines += ["## Privacy (worst agent, whole run; every run)", "", markdown_table(priv, floatfmt=".4g"), ""]
    if len(priv):
        big = priv[priv["eps_pld"].fillna(priv["eps_basic"]) > MEANINGLESS_EPSILON]
        if len(big):
            lines.append(f"{len(big)} of {len(priv)} private runs have a worst-agent PLD total above "
                         f"{MEANINGLESS_EPSILON:g} (largest {big['eps_pld'].max():.4g}): such totals mean no "
                         "meaningful privacy; the comparisons above are about the per-step mechanisms.")
        worst_delta = priv["delta_basic"].max()
        lines += privacy_caveats(None, worst_delta, n_records, what="largest basic-composition total")
    if "guarantee" in results.columns and (results["guarantee"] == False).any():  # noqa: E712
        lines += [f"**{PAPER_PRESET[0].upper() + PAPER_PRESET[1:]}.** The ledgers of these cells record "
                  "guarantee = false.", ""]
    lines += ["Seeded runs are for research, not release: anyone who knows a seed can replay the noise "
              "(a default run draws fresh secret entropy).", ""]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return "report.md"


__all__ = ["Cell", "GridStudy", "load_study", "run_study", "write_figures", "write_report", "compare_mechanisms", "residual_by_j", "equal_total_privacy"]
