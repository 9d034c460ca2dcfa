"""Figures in the layout of Ryu & Kim's Figures 3-6 from a study's tidy tables (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

STYLE = {"ObjL": ("tab:blue", "-"), "ObjG": ("tab:green", "-"), "OutL": ("tab:orange", "--"),
         "OutG": ("tab:red", "--"), "none": ("black", ":")}


def _style(mech: str) -> dict:
    color, ls = STYLE.get(mech, ("tab:gray", "-"))
    return {"color": color, "linestyle": ls}


def metric_vs_epsilon(results: pd.DataFrame, metric: str, path: Path, *, title: str, logy: bool = True) -> Path:
    """One panel per J: mean (over seeds) of ``metric`` vs epsilon, a line per mechanism, min-max band."""
    private = results[results["mechanism"] != "none"]
    js = sorted(private["local_updates"].unique())
    fig, axes = plt.subplots(1, len(js), figsize=(4.2 * len(js), 3.4), squeeze=False)
    for ax, J in zip(axes[0], js):
        sub = private[private["local_updates"] == J]
        for mech, grp in sub.groupby("mechanism"):
            stats = grp.groupby("epsilon")[metric].agg(["mean", "min", "max"]).sort_index()
            ax.plot(stats.index, stats["mean"], marker="o", label=mech, **_style(mech))
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.15, color=_style(mech)["color"])
        base = results[(results["mechanism"] == "none") & (results["local_updates"] == J)]
        if len(base) and metric in base and (base[metric].mean() > 0 or not logy):
            ax.axhline(base[metric].mean(), label="non-private", **_style("none"))
        ax.set_xscale("log")
        if logy and (sub[metric] > 0).all():
            ax.set_yscale("log")
        ax.set_xlabel("epsilon (per local update)")
        ax.set_title(f"J = {J}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(metric.replace("_", " "))
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def metric_vs_rounds(histories: pd.DataFrame, metric: str, path: Path, *, J: int, title: str,
                     mechanisms: list[str] | None = None, by_j: bool = False) -> Path:
    """One panel per epsilon: mean (over seeds) of ``metric`` vs round, a line per mechanism (or per J)."""
    private = histories[histories["mechanism"] != "none"]
    if mechanisms:
        private = private[private["mechanism"].isin(mechanisms)]
    if not by_j:
        private = private[private["local_updates"] == J]
    eps = sorted(private["epsilon"].unique())
    fig, axes = plt.subplots(1, len(eps), figsize=(3.6 * len(eps), 3.3), squeeze=False, sharey=True)
    for ax, e in zip(axes[0], eps):
        sub = private[private["epsilon"] == e]
        group = "local_updates" if by_j else "mechanism"
        for key, grp in sub.groupby(group):
            mean = grp.groupby("round")[metric].mean()
            style = {} if by_j else _style(key)
            ax.plot(mean.index, mean.values, label=f"J = {key}" if by_j else key, **style)
        if not by_j:
            base = histories[(histories["mechanism"] == "none") & (histories["local_updates"] == J)]
            if len(base):
                mean = base.groupby("round")[metric].mean()
                ax.plot(mean.index, mean.values, label="non-private", **_style("none"))
        ax.set_yscale("symlog" if (sub[metric] <= 0).any() else "log")
        ax.set_title(f"eps = {e:g}")
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(metric.replace("_", " "))
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
