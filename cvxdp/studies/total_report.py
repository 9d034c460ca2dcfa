"""The tables, verdicts, figures and report of an equal-total study (:mod:`cvxdp.studies.total`): method x total
epsilon means and standard errors, the winner of a column only when it wins on every data set, per-round
iteration against the one-shot release, what distribution costs, and the report that leads the main job's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..run import jsonable
from .figures import figure_files, utility_vs_total_epsilon
from .tables import cost_lines, markdown_table
from .total_keys import ONE_SHOT, OPTIMUM, TOTAL_FIGURE, _slug

if TYPE_CHECKING:  # annotations only: the study module imports this one
    from .total import TotalStudy

__all__ = ["column_winner", "consortium_figures", "distribution_cost", "lead_lines",
           "method_table", "summarise", "total_report_lines", "verdict", "write_total_figure"]


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
