"""Markdown tables for reports: every row, every column, numbers formatted, no optional dependency."""

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


__all__ = ['ledger_caveats', 'markdown_table', 'MEANINGLESS_EPSILON', 'noise_caveats', 'privacy_caveats']
