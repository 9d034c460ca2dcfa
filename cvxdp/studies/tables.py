"""Markdown tables and sentences for reports: every row, every column, numbers formatted, no optional dependency;
and what privacy costs and what distribution costs, apart (:func:`cost_table`, :func:`cost_lines`).

The cross-silo report of an equal-total study (issue 50). At each total epsilon and data set, from the study's
table (means over seeds of one metric, lower is better):

* **what privacy costs**: the central DP anchor (a trusted curator's private model on the pooled data, ``central``)
  against the non-private optimum on the same pooled data (``optimum``);
* **what distribution costs**: the best federated method (per-round or one-shot) against the central DP anchor;
* **of which the P parties' independent noise**: the central anchor run with its noise multiplied by ``sqrt(P)``
  (``central-sqrtP``: what the sum of ``P`` parties' independently noised updates carries at the same per-party
  budget; secure aggregation would bring it back to one noise) against the central anchor. The rest of the
  distribution cost (best federated against ``central-sqrtP``) is the algorithm and the split of the data;
* and the best federated method against the non-private federated model (the study's baseline).

The rows need the anchors ``optimum``, ``central`` and ``central-sqrtP`` (a missing one leaves its columns empty).
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import pandas as pd


def _cell(value: object, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return format(float(value), floatfmt)
    return str(value).replace("|", "\\|")


def markdown_table(frame: pd.DataFrame, *, floatfmt: str = ".4g", index: bool = False) -> str:
    """``frame`` as a GitHub markdown table with all of its rows (never truncated)."""
    df = frame.reset_index() if index else frame
    header = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v, floatfmt) for v in row) + " |")
    return "\n".join(lines)


#: A total epsilon above this is reported as giving no meaningful protection (e^10 ~ 22,000).
MEANINGLESS_EPSILON = 10.0


def privacy_caveats(epsilon: float | None, delta: float | None, n_records: int | None = None, *,
                    what: str = "total") -> list[str]:
    """Sentences saying when an (epsilon, delta) guarantee is too weak to mean anything.

    Parameters
    ----------
    epsilon, delta : float or None
        A privacy total (e.g. the worst agent's whole-run PLD epsilon and the delta it is stated at).
    n_records : int, optional
        The smallest number of records (samples, loads) one agent protects; ``delta >= 1/n`` then allows
        the mechanism to publish a whole record with that probability.
    what : str
        What the numbers are, for the sentence ("total", "basic-composition total", ...).
    """
    out = []
    if epsilon is not None and math.isfinite(float(epsilon)) and float(epsilon) > MEANINGLESS_EPSILON:
        out.append(f"The {what} epsilon {float(epsilon):.4g} is above {MEANINGLESS_EPSILON:g}: the guarantee "
                   f"(a likelihood ratio of up to e^{float(epsilon):.3g}) means no meaningful privacy.")
    elif epsilon is not None and not math.isfinite(float(epsilon)):
        out.append(f"The {what} epsilon is infinite: no privacy guarantee.")
    if delta is not None and n_records and float(delta) >= 1.0 / n_records:
        out.append(f"The {what} delta {float(delta):.3g} is at least 1/n = 1/{n_records} (n = records of the "
                   "smallest agent): the guarantee allows publishing a whole record with that probability, "
                   "so it means no meaningful privacy.")
    elif delta is not None and float(delta) >= 0.01:
        out.append(f"The {what} delta {float(delta):.3g} is at least 0.01: too large to mean anything.")
    return out


def ledger_caveats(privacy: dict[str, Any] | None, n_records: int | None = None) -> list[str]:
    """:func:`privacy_caveats` for a ``Result.summary()["privacy"]`` dict (basic and PLD totals)."""
    if not privacy:
        return []
    basic = privacy.get("basic") or [None, None]
    pld = privacy.get("pld")
    out = privacy_caveats(pld if pld is not None else basic[0], None, n_records, what="PLD total")
    out += privacy_caveats(None, basic[1], n_records, what="basic-composition total")
    return out


def noise_caveats(noise_magnitude: float | None, solution: dict[str, Any], ratio: float = 100.0) -> list[str]:
    """A sentence when the mean noise norm per update exceeds ``ratio`` times the norm of the solution."""
    import numpy as np

    if not noise_magnitude or not solution:
        return []
    size = float(np.linalg.norm(np.concatenate([np.ravel(v) for v in solution.values()])))
    if noise_magnitude > ratio * max(size, 1e-12):
        return [f"The noise magnitude {noise_magnitude:.3g} (mean ||xi||_2 per update) is {noise_magnitude / max(size, 1e-12):.3g} "
                f"times the norm of the solution ({size:.3g}): the messages are dominated by noise."]
    return []



#: the kinds of the federated methods (what a consortium can run)
FEDERATED = ("per-round", "anchor")


def _value(rows: pd.DataFrame, kind: str, metric: str) -> float:
    sub = rows[rows["kind"] == kind]
    return float(sub[f"{metric}_mean"].iloc[0]) if len(sub) else math.nan


def cost_table(table: pd.DataFrame, baselines: dict[str, dict[str, float]], metric: str = "test_error",
               scale: float = 100.0) -> pd.DataFrame:
    """One row per data set and total epsilon: the references, the best federated method and the costs, in
    ``metric`` times ``scale`` (test error in percent, the costs in points).

    Parameters
    ----------
    table : DataFrame
        The study's summary (:func:`cvxdp.studies.total.summarise`).
    baselines : dict
        Data set -> metric -> the non-private federated run's value.
    """
    rows = []
    sets = list(dict.fromkeys(table["dataset"])) if "dataset" in table else [""]
    for ds in sets:
        sub = table[table["dataset"] == ds] if "dataset" in table else table
        for eps in sorted(sub["total_epsilon"].unique()):
            col = sub[sub["total_epsilon"] == eps].dropna(subset=[f"{metric}_mean"])
            fed = col[col["kind"].isin(FEDERATED)]
            best = fed.loc[fed[f"{metric}_mean"].idxmin()] if len(fed) else None
            opt, cen, noisy = (_value(col, k, metric) for k in ("reference", "central", "central-noise"))
            fed_value = float(best[f"{metric}_mean"]) if best is not None else math.nan
            plain = baselines.get(ds, {}).get(metric, math.nan)
            rows.append({"data set": ds, "total eps": eps, "non-private central": scale * opt,
                         "non-private federated": scale * plain, "central DP": scale * cen,
                         "central, sqrt(P) x noise": scale * noisy,
                         "best federated": scale * fed_value,
                         "best method": str(best["method"]) if best is not None else "n/a",
                         "privacy cost": scale * (cen - opt), "distribution cost": scale * (fed_value - cen),
                         "of which P parties' noise": scale * (noisy - cen),
                         "best federated - non-private federated": scale * (fed_value - plain)})
    return pd.DataFrame(rows)


def cost_lines(table: pd.DataFrame, baselines: dict[str, dict[str, float]], metric: str = "test_error"
               ) -> list[str]:
    """The report's section: the cost table and one sentence per data set on the share of the distribution cost
    that the parties' independent noise explains (empty without a central anchor)."""
    if "central" not in set(table["kind"]):
        return []
    costs = cost_table(table, baselines, metric)
    lines = [f"## What privacy costs and what distribution costs ({metric}, percent; costs in points)", "",
             "privacy cost = central DP anchor - non-private optimum, both on the pooled data; distribution cost = "
             "best federated method - central DP anchor; of which P parties' noise = the central anchor with its "
             "noise multiplied by sqrt(P) (what the sum of P independently noised updates carries at the same "
             "per-party budget; secure aggregation would remove it) - the central anchor. Means over seeds.", "",
             markdown_table(costs, floatfmt=".3g"), ""]
    noise = "of which P parties' noise"
    for ds, grp in costs.groupby("data set", sort=False):
        grp = grp.dropna(subset=["distribution cost", noise])
        if not len(grp):
            continue
        parts = [f"eps {eps:g}: {dist:+.3g} vs {share:+.3g}"
                 for eps, dist, share in zip(grp["total eps"], grp["distribution cost"], grp[noise])]
        absorbed = [f"{eps:g}" for eps, dist, share in zip(grp["total eps"], grp["distribution cost"], grp[noise])
                    if share > max(dist, 0.0)]
        helped = [f"{eps:g}" for eps, share in zip(grp["total eps"], grp[noise]) if share < 0]
        where = f"On {ds}" if ds else "Here"
        lines.append(f"- {where}, the distribution cost vs what sqrt(P) x the central anchor's noise alone costs it "
                     f"(points): {'; '.join(parts)}. The sqrt(P) share is the parties' independent noise, which only "
                     "secure aggregation would remove" + (
                         f"; where it exceeds the distribution cost (eps {', '.join(absorbed)}) the federated runs "
                         "absorb more of that noise than the anchor's fixed steps do" if absorbed else "") + (
                         f"; where it is negative (eps {', '.join(helped)}) the anchor did better with more noise, "
                         "so it is no measure of the noise there" if helped else "") + ".")
    return lines + [""]


__all__ = ['FEDERATED', 'cost_lines', 'cost_table', 'ledger_caveats', 'markdown_table', 'MEANINGLESS_EPSILON', 'noise_caveats', 'privacy_caveats']
