"""Fixtures shared by the equal-total study tests (helpers handed out as session fixtures)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from cvxdp.studies.total import run_total_study


def _run_quietly(path: Path, out: Path, **kwargs) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few rounds: the runs' convergence warnings are expected
        return run_total_study(path, out, progress=False, **kwargs)


def _with_entry(path: Path, body: str) -> Path:
    key = body.split(" =")[0]
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith(key + " "))
    path.write_text(text.replace("[run]", body + "\n\n[run]") if "[run]" in text else text + "\n" + body + "\n")
    return path


@pytest.fixture(scope="session")
def run_quietly():
    """``run_total_study(path, out, **kwargs)`` without a progress bar, its runs' convergence warnings ignored."""
    return _run_quietly


@pytest.fixture(scope="session")
def with_entry():
    """``with_entry(path, "key = value")``: the study file with that [study] entry replaced (or added)."""
    return _with_entry
