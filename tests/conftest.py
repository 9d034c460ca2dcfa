"""Shared fixtures: small generated consensus problems."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def toy_agents():
    from cvxdp_models.toy import make_agents

    return make_agents(agents=3, dim=5, samples=20, seed=0)


@pytest.fixture
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not present")
    return path
