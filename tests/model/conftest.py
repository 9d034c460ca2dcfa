"""Fixtures shared by the tests of ``cvxdp.model``."""

from __future__ import annotations

import cvxpy as cp
import pytest


@pytest.fixture
def count_compiles(monkeypatch):
    """Count every canonicalization CVXPY performs (``Problem.get_problem_data``, also used by ``solve``)."""
    calls = {"n": 0}
    original = cp.Problem.get_problem_data

    def spy(self, *args, **kwargs):
        calls["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "get_problem_data", spy)
    return calls
