"""Markdown tables for reports: every row, every column, numbers formatted, no optional dependency."""

from __future__ import annotations

import math
from numbers import Integral, Real

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


__all__ = ["markdown_table"]
