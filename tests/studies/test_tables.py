"""Report tables: every row and column, no optional dependency."""

from __future__ import annotations

import math

import pandas as pd

from cvxdp.studies.tables import markdown_table


def test_markdown_table_keeps_every_row():
    df = pd.DataFrame({"cell": [f"c{i}" for i in range(120)], "eps": [0.1 * i for i in range(120)],
                       "ok": [i % 2 == 0 for i in range(120)]})
    df.loc[3, "eps"] = math.nan
    lines = markdown_table(df).splitlines()
    assert len(lines) == 122 and lines[0] == "| cell | eps | ok |" and lines[-1].startswith("| c119 |")
    assert "| c3 | n/a | no |" in lines
