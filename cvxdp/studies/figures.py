"""Every figure of cvxdp's studies (matplotlib, Agg): the consensus study in the layout of Ryu & Kim's
Figures 3-6, the graph studies in the papers' layout (mean curves with min-max bars, P(t)) and the sharing
study in Hu et al.'s (Figs. 1-3), all from the studies' tidy tables.

Every axis carries its definition and unit (:func:`axis_label`); seeds are shown as a min-max band around the
mean; panels of one figure share their y range; legends sit outside the data (in a free slot of the panel grid
when there is one). When private runs plateau at a noise floor far above the non-private run, the y range is set by
the private curves and the non-private reference is drawn in its own panel (``reference="panel"``).

Figures are fit for a paper: matplotlib's constrained layout keeps every title, label, tick label and legend inside
the canvas without overlaps (long labels are wrapped), and each figure is written twice, a 300 dpi PNG and a vector
PDF beside it (:func:`figure_files`); ``tests/studies/test_figures.py`` checks every study figure's text against its
canvas with the renderer's extents.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

STYLE = {"ObjL": ("tab:blue", "-", "o"), "ObjG": ("tab:green", "-", "s"), "OutL": ("tab:orange", "--", "^"),
         "OutG": ("tab:red", "--", "v"), "none": ("black", ":", None),
         "InL": ("tab:purple", "-", "D"), "InG": ("tab:brown", "-", "P"),
         # the equal-total study's central anchors: DP on the pooled data (central-sqrtP hollow), the optimum
         "central": ("black", "-", "*"), "optimum": ("tab:gray", "-.", "x")}

#: metric -> (definition, unit): what a figure's axis says about a metric (a template's declaration,
#: :meth:`cvxdp.templates.metrics.TemplateMetrics.labels`; a metric it does not declare is labelled by its name)
Labels = Mapping[str, tuple[str, str]]


def axis_label(metric: str, labels: Labels | None = None, *, short: bool = False) -> str:
    """``"definition [unit]"`` of ``metric`` as ``labels`` (the template's declared metrics) define it; ``short``:
    name and unit."""
    definition, unit = (labels or {}).get(metric, (metric.replace("_", " "), ""))
    if short:
        definition = metric.replace("_", " ")
    return f"{definition} [{unit}]" if unit else definition


def _style(mech: str, **extra) -> dict:
    color, ls, marker = STYLE.get(mech, ("tab:gray", "-", None))
    return {"color": color, "linestyle": ls, "marker": marker, **extra}


#: resolution of the PNG of every figure (a PDF, vector, is written beside it)
DPI = 300
#: the vector format written beside every PNG
VECTOR = ".pdf"
#: characters per inch of figure width at the fonts used (titles wrap to the canvas)
_CHARS_PER_INCH = 13


def figure_files(name: str | Path) -> list[str]:
    """The files of one figure named ``name`` (``x.png``): the 300 dpi PNG and the vector PDF beside it."""
    name = Path(name).name
    return [name, str(Path(name).with_suffix(VECTOR))]


def _wrap(text: str, chars: float) -> str:
    """``text`` broken into lines of at most ``chars`` characters (existing line breaks kept)."""
    return "\n".join(textwrap.fill(line, max(int(chars), 12)) for line in text.split("\n"))


def _figure(nrows: int, ncols: int, width: float, height: float, **kwargs: Any):
    """A figure of ``nrows`` x ``ncols`` panels under matplotlib's constrained layout (nothing off the canvas)."""
    return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False, layout="constrained", **kwargs)


def _suptitle(fig, title: str, fontsize: float = 10) -> None:
    fig.suptitle(_wrap(title, fig.get_figwidth() * _CHARS_PER_INCH * 10 / fontsize), fontsize=fontsize)


def _ylabel(ax, text: str, fontsize: float = 10) -> None:
    """A y label wrapped to the panel's height."""
    height = ax.get_position().height * ax.figure.get_figheight()
    ax.set_ylabel(_wrap(text, height * _CHARS_PER_INCH * 10 / fontsize), fontsize=fontsize)


def _legend(fig, axes, spare=None) -> None:
    """One legend for the figure: in ``spare`` (an unused panel slot, then drawn without axes) or outside the
    panels on the right."""
    handles, labels = {}, []
    for ax in np.ravel(axes):
        if ax is spare:
            continue
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    entries = ([handles[lab] for lab in labels], labels)
    if spare is not None:
        spare.axis("off")
        spare.legend(*entries, loc="center", fontsize=8, frameon=False)
    else:
        fig.legend(*entries, loc="outside right center", fontsize=8, frameon=False)


def _save(fig, path: Path) -> Path:
    """Write ``fig`` as a 300 dpi PNG at ``path`` and a vector PDF beside it (:func:`figure_files`)."""
    path = Path(path)
    fig.savefig(path, dpi=DPI)
    fig.set_layout_engine("none")  # the layout of the PNG, kept: the PDF's drawing need not solve it again
    fig.savefig(path.with_suffix(VECTOR))
    plt.close(fig)
    return path


def _positive_range(values: np.ndarray) -> tuple[float, float] | None:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return None
    return float(v.min()) / 2.0, float(v.max()) * 2.0


def metric_vs_epsilon(results: pd.DataFrame, metric: str, path: Path, *, title: str, logy: bool = True,
                      labels: Labels | None = None, x: str = "step", rounds: int | None = None) -> Path:
    """Mean (over seeds) of the final ``metric`` vs epsilon with a min-max band; one panel per J, shared y.

    ``x="step"``: epsilon per local update. ``x="total"``: each agent's basic-composition total
    ``T * J * eps_step`` (``rounds`` = T), so runs with different J are compared at equal total privacy, in one
    panel. A panel whose curves do not depend on J (noise magnitude) is drawn once.
    """
    private = results[results["mechanism"] != "none"].copy()
    js = sorted(private["local_updates"].unique())
    if x == "total":
        private["x"] = private["epsilon"] * private["local_updates"] * (rounds or 1)
        groups = [("all J", private)]
    else:
        private["x"] = private["epsilon"]
        first = private[private["local_updates"] == js[0]].groupby(["mechanism", "epsilon"])[metric].mean()
        same = all(np.allclose(first.values, private[private["local_updates"] == J].groupby(
            ["mechanism", "epsilon"])[metric].mean().reindex(first.index).values, rtol=0.02, equal_nan=True)
            for J in js[1:])
        label = f"every J ({', '.join(map(str, js))}): the same within 2 %"
        groups = [(label, private[private["local_updates"] == js[0]])] if same and len(js) > 1 else \
            [(f"J = {J}", private[private["local_updates"] == J]) for J in js]
    fig, axes = _figure(1, len(groups), 4.4 * len(groups) + 1.6, 4.0, sharey=True)
    for ax, (label, sub) in zip(axes[0], groups):
        keys = ["mechanism", "local_updates"] if x == "total" else ["mechanism"]
        for key, grp in sub.groupby(keys):
            mech, J = ((key if isinstance(key, tuple) else (key,)) + (None,))[:2]
            stats = grp.groupby("x")[metric].agg(["mean", "min", "max"]).sort_index()
            name = f"{mech}, J = {J}" if x == "total" else mech
            style = _style(mech, markersize=7 if mech.startswith("Obj") else 4,
                           markerfacecolor="none" if mech.startswith("Obj") else None)
            if x == "total" and J != js[0]:
                style["linestyle"] = "-." if mech.startswith("Obj") else ":"
            ax.plot(stats.index, stats["mean"], label=name, **style)
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.15, color=style["color"])
        if x == "step":
            base = results[results["mechanism"] == "none"]
            if label.startswith("J = "):  # the non-private run with the same J
                base = base[base["local_updates"] == int(label[4:])]
            if len(base) and metric in base and base[metric].notna().any() and (base[metric].mean() > 0 or not logy):
                ax.axhline(base[metric].mean(), label="non-private (same J)", **{**_style("none"), "marker": None})
        ax.set_xscale("log")
        values = sub[metric].dropna()
        if logy and (values > 0).all() and len(values) and values.max() > 10 * values.min():
            ax.set_yscale("log")  # log only when the values span more than a decade
        ax.set_xlabel(_wrap("total epsilon per agent, T x J x eps_step (basic composition)" if x == "total"
                            else "epsilon per local update (eps_step)", 4.4 * _CHARS_PER_INCH))
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    _suptitle(fig, title)
    _ylabel(axes[0][0], axis_label(metric, labels, short=True))
    return _save(fig, path)


def metric_vs_rounds(histories: pd.DataFrame, metric: str, path: Path, *, J: int, title: str,
                     mechanisms: list[str] | None = None, by_j: bool = False, labels: Labels | None = None,
                     ylim: tuple[float, float] | None = None, reference: str = "panel") -> Path:
    """One panel per epsilon: mean (over seeds) of ``metric`` vs round with a min-max band, a line per
    mechanism (or per J with ``by_j``); all panels share ``ylim`` (default: the private curves' range).

    ``reference="panel"`` draws the non-private run in its own first panel with its own y range (it falls many
    orders of magnitude below the private noise floor); ``"none"`` leaves it out.
    """
    private = histories[histories["mechanism"] != "none"]
    if mechanisms:
        private = private[private["mechanism"].isin(mechanisms)]
    if not by_j:
        private = private[private["local_updates"] == J]
    eps = sorted(private["epsilon"].unique())
    base = histories[(histories["mechanism"] == "none") & (histories["local_updates"] == J)]
    with_ref = reference == "panel" and not by_j and len(base) > 0
    n = len(eps) + int(with_ref)
    ncols = min(3, n)
    nrows = -(-n // ncols)
    spare = nrows * ncols > n  # a free slot of the grid holds the legend
    fig, grid = _figure(nrows, ncols, 3.6 * ncols + (0 if spare else 1.2), 2.9 * nrows + 0.6)
    axes = list(grid.ravel())
    for ax in axes[n + 1:]:  # more than one free slot: no panel there
        fig.delaxes(ax)
    ylim = ylim or _positive_range(private[metric].values)
    label = axis_label(metric, labels, short=True)
    if with_ref:
        ax = axes[0]
        _band(ax, base, metric, "non-private", _style("none", marker=None))
        ax.set_yscale("log" if (base[metric] > 0).all() else "symlog")
        ax.set_title("non-private reference (own y range)", fontsize=9)
    for ax, e in zip(axes[int(with_ref):n], eps):
        sub = private[private["epsilon"] == e]
        group = "local_updates" if by_j else "mechanism"
        for i, (key, grp) in enumerate(sub.groupby(group)):
            style = {"color": f"C{i}", "linestyle": "-"} if by_j else _style(key, marker=None)
            _band(ax, grp, metric, f"J = {key}" if by_j else key, style)
        ax.set_yscale("log" if (sub[metric] > 0).all() else "symlog")
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_title(f"eps_step = {e:g}" + (" (shared y range)" if with_ref else ""), fontsize=9)
    _legend(fig, axes[:n + int(spare)], spare=axes[n] if spare else None)
    _suptitle(fig, title)
    for i, ax in enumerate(axes[:n]):
        ax.grid(alpha=0.3)
        if i % ncols == 0:
            _ylabel(ax, label)
        if i >= n - ncols:
            ax.set_xlabel("round t [rounds]")
    return _save(fig, path)


def _band(ax, frame: pd.DataFrame, metric: str, label: str, style: dict) -> None:
    """Mean over seeds per round, with the seeds' min-max band."""
    stats = frame.groupby("round")[metric].agg(["mean", "min", "max"])
    ax.plot(stats.index, stats["mean"], label=label, **style)
    if frame["seed"].nunique() > 1 if "seed" in frame else False:
        ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2, color=style.get("color"))


# --------------------------------------------------------------------------- graph and sharing studies
def _finish_panel(fig, ax, title: str, path: Path) -> list[str]:
    """Title, grid and legend (beside the panel) of a one-axis figure; saved to ``path`` (the files are
    returned)."""
    ax.set_title(_wrap(title, fig.get_figwidth() * _CHARS_PER_INCH * 0.8))
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    return figure_files(_save(fig, path))


def graph_study_figures(curves: pd.DataFrame, runs: pd.DataFrame, out: Path, study: Any, *,
                        metric_label: str) -> list[str]:
    """A graph study's figures (:mod:`cvxdp.studies.graph`): per panel the metric's mean curve with min-max
    bars and P(t); plus the test errors (mean, min-max). Returns the file names written into ``out``."""
    files = []
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {s.label: colors[k % len(colors)] for k, s in enumerate(study.settings)}
    panels = list(dict.fromkeys(p for s in study.settings for p in s.panels))
    for panel in panels:
        members = [s for s in study.settings if panel in s.panels]
        fig, ((ax,),) = _figure(1, 1, 8.5, 4.2)
        for k, s in enumerate(members):
            c = curves[curves["setting"] == s.label]
            if not len(c):
                continue
            every = study.bar_every or max(1, len(c) // 20)
            ax.plot(c["round"], c["mean"], color=color_of[s.label], label=s.label, lw=1.4)
            sel = c.iloc[::every]
            if (sel["max"] > sel["min"]).any():  # bars of the settings side by side (dodged), as in the papers
                shift = (k - (len(members) - 1) / 2) * every * 0.12
                ax.errorbar(sel["round"] + shift, sel["mean"],
                            yerr=[sel["mean"] - sel["min"], sel["max"] - sel["mean"]],
                            fmt="none", ecolor=color_of[s.label], capsize=2, lw=0.8)
        ax.set_xlabel("iteration t [iterations]")
        _ylabel(ax, f"{metric_label} (mean over runs, min-max bars)")
        if (curves[curves["setting"].isin([s.label for s in members])]["min"] > 0).all():
            ax.set_yscale("log")
        files += _finish_panel(fig, ax, f"{study.name}: {panel}", out / f"{study.metric}_{panel}.png")
        private = [s for s in members if s.private]
        if private and "P" in curves:
            fig, ((ax,),) = _figure(1, 1, 8.5, 4.2)
            for s in private:
                c = curves[curves["setting"] == s.label]
                ax.plot(c["round"], c["P"], color=color_of[s.label], label=s.label)
            ax.set_xlabel("iteration t [iterations]")
            _ylabel(ax, "privacy bound P(t): total epsilon so far, eq. (26)/(32) [epsilon, dimensionless]")
            files += _finish_panel(fig, ax, f"{study.name}: {panel}, privacy", out / f"privacy_{panel}.png")
    if "test_error" in runs and runs["test_error"].notna().any():
        stats = runs.groupby("setting", sort=False)["test_error"].agg(["mean", "min", "max"])
        stats = stats.reindex([s.label for s in study.settings if s.label in stats.index])
        fig, ((ax,),) = _figure(1, 1, 8.5, 1.2 + 0.35 * len(stats))
        y = np.arange(len(stats))[::-1]  # the settings top to bottom, labels beside their bars
        mean, low, high = (stats[k].to_numpy(dtype=float) for k in ("mean", "min", "max"))
        ax.barh(y, mean, color=[color_of[lbl] for lbl in stats.index], alpha=0.7)
        ax.errorbar(mean, y, xerr=np.vstack([mean - low, high - mean]), fmt="none", ecolor="black", capsize=3)
        ax.set_yticks(y, list(stats.index), fontsize=8)
        ax.set_xlabel("test error [fraction misclassified] (mean over runs, min-max)")
        ax.set_title(f"{study.name}: classification error")
        files += figure_files(_save(fig, out / "test_error.png"))
    return files


def sharing_study_figures(history: pd.DataFrame, baselines: dict[str, dict], f_star: float, out: Path, *,
                          title: str) -> list[str]:
    """The sharing study's figures (:mod:`cvxdp.studies.sharing`) in the paper's layout: Figs. 1-2 (objective
    and test log-loss per epoch) and Fig. 3 (noise levels)."""
    levels = sorted(history["noise"].unique())
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, len(levels)))
    mean = history.groupby(["noise", "epoch"], as_index=False)[["objective", "test_logloss"]].mean()

    def label(s: float) -> str:
        return "no noise" if s == 0 else f"sigma = {s:g}"

    fig, (axes,) = _figure(1, 2, 11.5, 4.2)
    for s, c in zip(levels, colors):
        sub = mean[mean["noise"] == s]
        axes[0].plot(sub["epoch"], sub["objective"], color=c, label=label(s))
        axes[1].plot(sub["epoch"], sub["test_logloss"], color=c, label=label(s))
    axes[0].axhline(f_star, color="black", linestyle=":", label="centralized optimum")
    axes[0].set_yscale("log")
    axes[0].set(xlabel="epoch [passes over the data]", title="(a) training objective")
    axes[1].set(xlabel="epoch [passes over the data]", title="(b) test log loss")
    _legend(fig, axes)
    _ylabel(axes[0], "training objective: mean log loss + l2 [nats]")
    _ylabel(axes[1], "test log loss: mean over test samples [nats]")
    for ax in axes:
        ax.grid(alpha=0.3)
    _suptitle(fig, f"{title}: ADMM sharing")
    files = figure_files(_save(fig, out / "figure_objective_logloss.png"))

    fig, ((ax,),) = _figure(1, 1, 8.5, 4.2)
    for s, c in zip(levels, colors):
        sub = mean[mean["noise"] == s]
        ax.plot(sub["epoch"], sub["test_logloss"], color=c, label=f"ADMM, {label(s)}")
    ax.axhline(baselines["all_features"]["test_logloss"], color="black", linestyle="--",
               label="all features (centralized, sklearn)")
    ax.axhline(baselines["party1_only"]["test_logloss"], color="tab:red", linestyle="--",
               label="party 1 features only (sklearn)")
    top = max(baselines["party1_only"]["test_logloss"], baselines["all_features"]["test_logloss"])
    ax.set_ylim(top=min(float(mean["test_logloss"].max()), 3.0 * top) * 1.05)
    ax.set(xlabel="epoch [passes over the data]", title=f"{title}: test loss under Gaussian noise")
    _ylabel(ax, "test log loss: mean over test samples [nats]")
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    return files + figure_files(_save(fig, out / "figure_noise_test_logloss.png"))





def _total_style(method: str) -> dict:
    """A line of the equal-total figure: the colour, line style and marker of the method's mechanism (``ObjG-q0.1``
    and ``OutG-once`` those of ObjG and OutG; a sampled variant hollow, a one-shot release dotted)."""
    base, _, variant = method.partition("-")
    style = _style(base if base in STYLE else method, markersize=5)
    if variant == "once":
        style["linestyle"] = ":"
    elif variant:
        style["markerfacecolor"] = "none"
    return style


def utility_vs_total_epsilon(table: pd.DataFrame, metrics: list[str], path: Path, *, title: str,
                             baseline: dict[str, float] | None = None, labels: Labels | None = None,
                             baseline_label: str = "non-private (exact ADMM)",
                             baselines: dict[str, dict[str, float]] | None = None) -> Path:
    """Final ``metrics`` vs each agent's whole-run epsilon: mean over seeds with standard-error bars, one panel per
    metric (log-log) -- one row of panels per data set when the table has a ``dataset`` column with several --,
    every method (per-round mechanisms and one-shot anchors) one line, and the non-private value as a horizontal
    line (``baseline``: metric -> value; ``baselines``: data set -> that, for a table of several data sets).

    ``table`` has columns ``method``, ``total_epsilon`` and, per metric, ``<metric>_mean`` and ``<metric>_se``."""
    sets = list(dict.fromkeys(table["dataset"])) if "dataset" in table and table["dataset"].nunique() > 1 else [None]
    fig, axes = _figure(len(sets), len(metrics), 4.6 * len(metrics) + 1.8, 3.6 * len(sets) + 0.8, sharey="col")
    eps = sorted(table["total_epsilon"].unique())
    for row, ds in zip(axes, sets):
        sub = table if ds is None else table[table["dataset"] == ds]
        line = baseline if ds is None else (baselines or {}).get(ds, {})
        for ax, metric in zip(row, metrics):
            for method, grp in sub.groupby("method", sort=False):
                grp = grp.sort_values("total_epsilon")
                ax.errorbar(grp["total_epsilon"], grp[f"{metric}_mean"], yerr=grp[f"{metric}_se"].fillna(0.0),
                            label=method, capsize=3, **_total_style(str(method)))
            if line and line.get(metric) is not None and np.isfinite(line[metric]) and line[metric] > 0:
                ax.axhline(line[metric], label=baseline_label, **{**_style("none"), "marker": None})
            ax.set_xscale("log")
            ax.set_xticks(eps, [f"{e:g}" for e in eps])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            values = table[f"{metric}_mean"].to_numpy(dtype=float)
            if np.all(values[np.isfinite(values)] > 0):
                ax.set_yscale("log")
            ax.set_xlabel("total epsilon per agent, whole run (PLD)")
            if ds is not None:
                ax.set_title(f"data set: {ds}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
    _suptitle(fig, title, fontsize=9)
    _legend(fig, axes)
    for row in axes:
        for ax, metric in zip(row, metrics):
            _ylabel(ax, axis_label(metric, labels), fontsize=8)
    return _save(fig, path)


__all__ = ["DPI", "Labels", "VECTOR", "axis_label", "figure_files", "graph_study_figures", "metric_vs_epsilon", "metric_vs_rounds", "utility_vs_total_epsilon",
           "sharing_study_figures"]
