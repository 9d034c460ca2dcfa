"""Equal-total-epsilon studies (issue 39): every method at the same whole-run (epsilon, delta) per agent.

A study file with ``[study] kind = "total"``. Its axis is each agent's **total** privacy over the whole run:

* the per-round mechanisms (ObjL, ObjG, OutL, OutG) are calibrated with ``calibrate = "total"`` (PLD) to it, with
  the rounds T and local updates J of the study's public ``schedule`` (below);
* the one-shot anchors perturb each agent's private data once (:class:`cvxdp.privacy.InputPerturbation`, ``InL``
  Laplace, ``InG`` Gaussian) at the template's declared adjacency and then run exact ADMM, which is
  post-processing: the whole run spends the one release (the power template's loads; a template without a
  ``perturbed_inputs`` hook has no anchor);
* the non-private line is exact ADMM on the true data.

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
``ledger.json``, ``utility_vs_total_epsilon.png``, ``report.md``. :func:`load_total_table` reloads the table.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..config.build import (
    MECHANISMS,
    build_instance,
    load_case,
    load_toml,
    read_study_file,
    run_case,
    settings_context,
)
from ..errors import ConfigError
from ..plots import utility_vs_total_epsilon
from ..privacy import InputPerturbation, PrivacyLedger
from ..run import jsonable, locks_output
from .cells import CellRunner, cell_config, collecting_warnings, report_warnings
from .tables import markdown_table

__all__ = ["TotalCell", "TotalStudy", "is_total_study", "lead_lines", "load_total_study", "load_total_table", "method_table",
           "run_total_study", "summarise", "verdict"]

_KEYS = {"kind", "name", "description", "case", "mechanisms", "anchors", "epsilons", "delta", "seeds", "schedule",
         "anchor_rounds", "baseline"}
#: the one-shot anchors: name -> noise of the input perturbation
ANCHORS = {"InL": "laplace", "InG": "gaussian"}
#: the table's metrics per template family, the first one decides the winner
METRICS = {"power": ["balance_deviation", "cost_error"], "fl": ["train_cost", "test_error"]}


@dataclass(frozen=True)
class TotalCell:
    """One run of an equal-total study: a method (a per-round mechanism, an anchor or ``"none"``) at a total
    epsilon (None: non-private) for one seed, with its rounds and local updates."""

    method: str
    epsilon: float | None
    seed: int
    rounds: int
    local_updates: int

    @property
    def key(self) -> str:
        eps = "none" if self.epsilon is None else f"{self.epsilon:g}"
        return f"{self.method}_total{eps}_T{self.rounds}_J{self.local_updates}_seed{self.seed}"


@dataclass
class TotalStudy:
    """A loaded ``kind = "total"`` study file (see the module docstring)."""

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

    def schedule_for(self, epsilon: float) -> tuple[int, int]:
        """``(rounds, local_updates)`` of a total ``epsilon``: the first schedule row whose ``max_epsilon`` is at
        least it, else the last row (public: reads only the declared budget)."""
        for max_eps, rounds, js in self.schedule:
            if epsilon <= max_eps:
                return rounds, js
        return self.schedule[-1][1], self.schedule[-1][2]

    def cells(self) -> list[TotalCell]:
        """Every cell: the non-private baseline (first seed), then each method x total epsilon x seed."""
        out = [TotalCell("none", None, self.seeds[0], self.anchor_rounds, 1)] if self.baseline else []
        for eps in self.epsilons:
            rounds, js = self.schedule_for(eps)
            out += [TotalCell(m, eps, s, rounds, js) for m in self.mechanisms for s in self.seeds]
            out += [TotalCell(a, eps, s, self.anchor_rounds, 1) for a in self.anchors for s in self.seeds]
        return out


def is_total_study(path: str | Path) -> bool:
    """Whether ``path`` is a study file with ``[study] kind = "total"``."""
    raw = load_toml(path)
    return isinstance(raw.get("study"), dict) and raw["study"].get("kind") == "total"


def _numbers(table: dict, key: str, path: Path, kind: type, default: Any = None) -> list:
    values = table.get(key, default)
    ok = isinstance(values, list) and values and all(
        not isinstance(v, bool) and isinstance(v, (int, float) if kind is float else int) and math.isfinite(v)
        and (v > 0 if kind is float else v >= 0) for v in values)
    if not ok:
        what = "positive numbers" if kind is float else "non-negative ints"
        raise ConfigError(f"{path}: the '{key}' entry of [study] must be a non-empty list of {what}. "
                          f"Got {values!r} instead.")
    return [kind(v) for v in values]


def _schedule(value: object, path: Path) -> list[tuple[float, int, int]]:
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


def load_total_study(path: str | Path) -> TotalStudy:
    """Load and check a ``kind = "total"`` study file (a [study] table plus optional [algorithm]/[privacy]/[run]
    overrides of the per-round cells)."""
    path, raw, table, case_path = read_study_file(path, keys=_KEYS, sections={"algorithm", "privacy", "run"},
                                                  kind="total")
    mechanisms = table.get("mechanisms", ["ObjG", "OutG"])
    if not isinstance(mechanisms, list) or any(m not in MECHANISMS or m == "none" for m in mechanisms):
        raise ConfigError(f"{path}: the 'mechanisms' entry of [study] must be a list of names from ObjL, ObjG, OutL, "
                          f"OutG. Got {mechanisms!r} instead.")
    anchors = table.get("anchors", list(ANCHORS))
    if not isinstance(anchors, list) or any(a not in ANCHORS for a in anchors):
        raise ConfigError(f"{path}: the 'anchors' entry of [study] must be a list of names from "
                          f"{', '.join(ANCHORS)}. Got {anchors!r} instead.")
    if not mechanisms and not anchors:
        raise ConfigError(f"{path}: an equal-total study needs at least one mechanism or anchor.")
    delta = table.get("delta", 1e-5)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ConfigError(f"{path}: the 'delta' entry of [study] must be a float in (0, 1). Got {delta!r} instead.")
    anchor_rounds = table.get("anchor_rounds", 100)
    if isinstance(anchor_rounds, bool) or not isinstance(anchor_rounds, int) or anchor_rounds < 1:
        raise ConfigError(f"{path}: the 'anchor_rounds' entry of [study] must be an int in [1, inf). "
                          f"Got {anchor_rounds!r} instead.")
    baseline = table.get("baseline", True)
    if not isinstance(baseline, bool):
        raise ConfigError(f"{path}: the 'baseline' entry of [study] must be true or false. Got {baseline!r} instead.")
    seeds = _numbers(table, "seeds", path, int, [0, 1, 2])
    return TotalStudy(path=path, name=str(table.get("name", path.stem)), case_path=case_path,
                      mechanisms=list(mechanisms), anchors=list(anchors),
                      epsilons=_numbers(table, "epsilons", path, float, [0.5, 1.0, 4.0]), delta=float(delta),
                      seeds=seeds, schedule=_schedule(table.get("schedule"), path), anchor_rounds=anchor_rounds,
                      baseline=baseline, overrides={k: dict(raw.get(k, {})) for k in ("algorithm", "privacy", "run")})


def _case(study: TotalStudy, base: Any, cell: TotalCell) -> Any:
    """The case of a cell: a per-round mechanism calibrated to the total, or exact ADMM (anchors, baseline)."""
    run = {**study.overrides["run"], "seed": cell.seed}
    if cell.method in ANCHORS or cell.method == "none":
        case = base.with_overrides(run=run)
        case.algorithm = {"name": "admm", "rounds": cell.rounds}
        case.privacy = {"mechanism": "none"}
        return case
    case = base.with_overrides(algorithm={**study.overrides["algorithm"], "rounds": cell.rounds,
                                          "local_updates": cell.local_updates}, run=run)
    case.privacy = {**{k: v for k, v in base.privacy.items() if k not in ("mechanism", "epsilon", "delta")},
                    **study.overrides["privacy"], "mechanism": cell.method, "epsilon": cell.epsilon,
                    "delta": study.delta, "calibrate": "total"}
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


def _metrics(row: dict[str, Any], family: str) -> dict[str, float]:
    if family == "power":
        cost_gap = row.get("cost_gap")
        return {"balance_deviation": row.get("balance_deviation"),
                "cost_error": abs(cost_gap) if cost_gap is not None and np.isfinite(cost_gap) else float("nan")}
    return {m: row.get(m) for m in METRICS["fl"]}


@locks_output("study directory")  # a second study writing the same directory is refused
def run_total_study(path: str | Path, out: str | Path, *, progress: bool = True, run: dict | None = None) -> dict:
    """Run (or resume) an equal-total study and write its tables, figure and report into ``out``.

    Parameters
    ----------
    path : str or Path
        The ``kind = "total"`` study file.
    out : str or Path
        Output directory (see the module docstring).
    progress : bool
        Show a progress bar.
    run : dict, optional
        [run] overrides of every cell (None values ignored).

    Returns
    -------
    dict
        ``{"study", "out", "runs", "computed", "reused", "files"}``.
    """
    study = load_total_study(path)
    study.overrides["run"].update({k: v for k, v in (run or {}).items() if v is not None})
    out = Path(out)
    runner = CellRunner(out)
    base = load_case(study.case_path)
    family = "power" if base.template == "power" else "fl"
    context, instance = settings_context(base)
    if study.anchors:
        instance = instance or build_instance(base)
        if instance.perturbed_inputs is None:
            raise ConfigError(f"{study.path}: the {base.template!r} template has no one-shot input perturbation "
                              "(ModelInstance.perturbed_inputs); set anchors = [] in [study].")
    (out / "study.json").write_text(json.dumps(jsonable({"study": str(study.path), "case": base.to_dict(),
                                                          "schedule": study.schedule}), indent=2))
    rows, histories, ledgers = [], [], {}
    collected: dict[tuple, list] = {}
    cells = study.cells()
    bar = tqdm(cells, disable=not progress, desc=f"study {study.name}", unit="run")
    for cell in bar:
        bar.set_postfix_str(cell.key)
        case = _case(study, base, cell)
        config = cell_config(case)
        if cell.method in ANCHORS:
            mech = InputPerturbation(ANCHORS[cell.method], cell.epsilon, study.delta)
            config["input_perturbation"] = {"noise": mech.noise, "epsilon": mech.epsilon, "delta": mech.delta}

        def compute(cell_dir: Path, case=case, cell=cell) -> tuple:
            nonlocal instance
            instance = instance or build_instance(base)
            with collecting_warnings(collected):
                if cell.method in ANCHORS:
                    return _anchor_run(case, instance, InputPerturbation(ANCHORS[cell.method], cell.epsilon,
                                                                         study.delta), cell.seed)
                outcome = run_case(case, instance=instance, checkpoint=cell_dir)
            return outcome.result, outcome.summary

        result, summary = runner.run(cell.key, config, compute, context=context)
        priv = summary.get("privacy") or {}
        cols = {"cell": cell.key, "method": cell.method, "kind": "anchor" if cell.method in ANCHORS else
                ("non-private" if cell.method == "none" else "per-round"), "total_epsilon": cell.epsilon,
                "delta": None if cell.epsilon is None else study.delta, "seed": cell.seed, "rounds": cell.rounds,
                "local_updates": cell.local_updates}
        flat = {k: v for k, v in summary.items() if k not in cols and not isinstance(v, (dict, list))}
        row = {**cols, **flat, "eps_pld": priv.get("pld")}
        rows.append({**row, **_metrics(row, family)})
        histories.append(result.history.assign(cell=cell.key, method=cell.method, total_epsilon=cell.epsilon,
                                               seed=cell.seed))
        ledgers[cell.key] = result.privacy
    bar.close()
    report_warnings(collected)
    results = pd.DataFrame(rows)
    results.to_csv(out / "results.csv", index=False)
    with warnings.catch_warnings():  # all-NaN privacy columns of the non-private baseline are expected
        warnings.simplefilter("ignore", FutureWarning)
        pd.concat([h for h in histories if len(h)], ignore_index=True).to_csv(out / "histories.csv", index=False)
    (out / "ledger.json").write_text(json.dumps(jsonable(ledgers), indent=2))
    table = summarise(results, family)
    table.to_csv(out / "table.csv", index=False)
    baseline = _baseline(results, family)
    figure = utility_vs_total_epsilon(
        table, METRICS[family], out / "utility_vs_total_epsilon.png", family=family, baseline=baseline,
        title=f"{study.name}: final utility at equal total (epsilon, delta = {study.delta:g}) per agent\n"
              f"mean +- standard error over {len(study.seeds)} seeds; anchors = one-shot input perturbation + exact "
              "ADMM")
    (out / "report.md").write_text("\n".join(report_lines(results, table, study, family)) + "\n")
    return {"study": study.name, "out": str(out), "runs": len(cells), "computed": runner.computed,
            "reused": runner.reused, "files": ["results.csv", "table.csv", "histories.csv", "ledger.json",
                                               figure.name, "report.md"]}


def summarise(results: pd.DataFrame, family: str) -> pd.DataFrame:
    """Method x total epsilon: count, mean and standard error (``std(ddof=1) / sqrt(n)``, NaN for one seed) of
    each metric, and the PLD total (worst agent, largest over seeds)."""
    private = results[results["method"] != "none"]
    rows = []
    for (method, eps), grp in private.groupby(["method", "total_epsilon"], sort=False):
        row = {"method": method, "kind": grp["kind"].iloc[0], "total_epsilon": float(eps), "seeds": len(grp),
               "rounds": int(grp["rounds"].iloc[0]), "local_updates": int(grp["local_updates"].iloc[0]),
               "eps_pld": pd.to_numeric(grp["eps_pld"], errors="coerce").max()}
        for metric in METRICS[family]:
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


def _baseline(results: pd.DataFrame, family: str) -> dict[str, float]:
    base = results[results["method"] == "none"]
    return {m: float(pd.to_numeric(base[m], errors="coerce").mean()) for m in METRICS[family]} if len(base) else {}


def _pm(mean: float, se: float, fmt: str = ".3g") -> str:
    if not np.isfinite(mean):
        return "n/a"
    return f"{mean:{fmt}} +- {se:{fmt}}" if np.isfinite(se) else f"{mean:{fmt}}"


def method_table(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``metric`` as method (rows: per-round mechanisms, then the anchors) x total epsilon (columns), each
    ``mean +- se``, with a last row naming the winner (lowest mean) of each column."""
    eps = sorted(table["total_epsilon"].unique())
    order = list(dict.fromkeys(table.sort_values("kind", key=lambda k: k == "anchor", kind="stable")["method"]))
    rows = []
    for method in order:
        sub = table[table["method"] == method].set_index("total_epsilon")
        kind = "one-shot anchor" if sub["kind"].iloc[0] == "anchor" else "per round"
        rows.append({"method": f"{method} ({kind})", **{
            f"eps={e:g}": _pm(sub.loc[e, f"{metric}_mean"], sub.loc[e, f"{metric}_se"]) if e in sub.index else "n/a"
            for e in eps}})
    winners = {}
    for e in eps:
        col = table[table["total_epsilon"] == e].dropna(subset=[f"{metric}_mean"])
        winners[f"eps={e:g}"] = col.loc[col[f"{metric}_mean"].idxmin(), "method"] if len(col) else "n/a"
    rows.append({"method": "**winner**", **winners})
    return pd.DataFrame(rows)


def verdict(table: pd.DataFrame, family: str) -> list[str]:
    """Per total epsilon and metric: the best per-round method against the best one-shot anchor (lowest means;
    standard errors shown), and one sentence when iteration never beats the one-shot baseline."""
    lines, beaten = [], []
    per_round, anchors = table[table["kind"] == "per-round"], table[table["kind"] == "anchor"]
    if not len(per_round) or not len(anchors):
        return []
    for eps in sorted(table["total_epsilon"].unique()):
        parts = []
        for m in METRICS[family]:
            pr = per_round[per_round["total_epsilon"] == eps].dropna(subset=[f"{m}_mean"])
            an = anchors[anchors["total_epsilon"] == eps].dropna(subset=[f"{m}_mean"])
            if not len(pr) or not len(an):
                continue
            a, b = pr.loc[pr[f"{m}_mean"].idxmin()], an.loc[an[f"{m}_mean"].idxmin()]
            wins = bool(a[f"{m}_mean"] <= b[f"{m}_mean"])
            if wins:
                beaten.append(f"{m} at total eps {eps:g}")
            parts.append(f"{m}: {a['method']} (T = {int(a['rounds'])}, J = {int(a['local_updates'])}) "
                         f"{_pm(a[f'{m}_mean'], a[f'{m}_se'])} vs {b['method']} {_pm(b[f'{m}_mean'], b[f'{m}_se'])}"
                         + (" (per-round lower)" if wins else ""))
        if parts:
            lines.append(f"- total eps = {eps:g}, best per-round vs best one-shot: " + "; ".join(parts))
    if lines and not beaten:
        lines.append("**No per-round mechanism beat the one-shot input-perturbation baseline on any metric at any "
                     "total epsilon of this study** (numbers above): at equal total privacy, perturbing the data "
                     "once and running exact ADMM is the better use of the budget here.")
    elif lines:
        lines.append(f"A per-round mechanism had the lower mean only for: {', '.join(beaten)} (compare the standard "
                     "errors before calling it a win).")
    return lines


def lead_lines(out: str | Path, *, link: str = "") -> list[str]:
    """The head of another report (the main job's): the equal-total tables and verdict of the study in ``out``,
    read back from its ``report.md`` (everything above its '## Details' heading), headings one level down and
    ``link`` prefixed to the figure's path."""
    text = (Path(out) / "report.md").read_text()
    lines = []
    for line in text.split("\n## Details")[0].splitlines():
        if line.startswith("# Study "):
            line = f"## Equal TOTAL privacy per agent (study {line[len('# Study '):]}, in {link or './'})"
        elif line.startswith("#"):
            line = "#" + line
        lines.append(line.replace("](utility_vs_total_epsilon.png)", f"]({link}utility_vs_total_epsilon.png)"))
    return lines


def report_lines(results: pd.DataFrame, table: pd.DataFrame, study: TotalStudy, family: str) -> list[str]:
    """The report: the method x total-epsilon table first, then the verdict, the schedule and the privacy."""
    metrics = METRICS[family]
    base = _baseline(results, family)
    lines = [f"# Study {study.name}", "",
             f"Case `{study.case_path.name}`; each agent's whole-run budget (epsilon, delta = {study.delta:g}), "
             f"epsilon in {study.epsilons}; {len(study.seeds)} seeds {study.seeds}; mean +- standard error over "
             "seeds; lower is better.", "",
             f"## {metrics[0]} by method and total epsilon", "", markdown_table(method_table(table, metrics[0])), ""]
    for m in metrics[1:]:
        lines += [f"## {m} by method and total epsilon", "", markdown_table(method_table(table, m)), ""]
    lines += ["Non-private reference (exact ADMM on the true data): " + ", ".join(
        f"{m} {v:.4g}" for m, v in base.items()) if base else "No non-private reference (baseline = false).", ""]
    verdicts = verdict(table, family)
    if verdicts:
        lines += ["## Per-round iteration vs one-shot input perturbation", "", *verdicts, ""]
    lines += ["![utility vs total epsilon](utility_vs_total_epsilon.png)", "", "## Details", "",
              "Definitions: `balance_deviation` = sum over buses of the squared P and Q mismatches at the TRUE loads "
              "(p.u.^2); `cost_error` = |generation cost - the central optimum's cost| ($/h, for the cost "
              "objective). Per-round mechanisms: calibrate = \"total\" (PLD), so each agent's whole run of T x J "
              "local updates spends the column's (epsilon, delta). Anchors: InL / InG perturb each zone's own loads "
              "once (Laplace / analytic Gaussian; alpha-adjacent loads: Delta_1 = 2 alpha, Delta_2 = sqrt(2) alpha) "
              "and run exact ADMM on them: post-processing, so the release is the whole run's cost." if family ==
              "power" else "Definitions: as in the consensus study's report.", "",
              "Rounds T and local updates J per total epsilon (public rule: the study file's schedule, "
              "[max_epsilon, T, J] rows, first row whose max_epsilon >= epsilon; fixed before any run, read from "
              f"the declared budget only, so it costs no privacy): {[list(r) for r in study.schedule]}. Anchors "
              f"and the non-private line: exact ADMM, {study.anchor_rounds} rounds.", "",
              "## Privacy (worst agent, whole run, PLD; largest over seeds)", "",
              markdown_table(table[["method", "total_epsilon", "rounds", "local_updates", "eps_pld"]],
                             floatfmt=".4g"), "",
              "Seeded runs are for research, not release: anyone who knows a seed can replay the noise.", ""]
    return lines
