"""The coordinator's side of a Flower federation without Flower's processes: how long it waits for parties to
connect (``cvxdp federate --wait``) and what it says meanwhile (issue 48)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flwr", reason="the federation extra: pip install -e '.[federation]'")

from cvxdp.errors import BackendError  # noqa: E402
from cvxdp.federation import server_app  # noqa: E402
from cvxdp.federation.parties import write_plan  # noqa: E402


class _EmptyGrid:
    """A Flower Grid no SuperNode ever connects to."""

    def get_node_ids(self):
        return []


def test_a_party_that_never_connects_ends_the_wait_naming_it_and_the_wait(monkeypatch):
    monkeypatch.setattr(server_app, "WAIT_NOTICE", 0.2)
    lines: list[str] = []
    with pytest.raises(BackendError, match=r"2 of the 2 parties \(zone1, zone2\) did not connect within 0\.6 s\.") \
            as info:
        server_app.FlowerChannel(_EmptyGrid(), ["zone1", "zone2"], wait=0.6, say=lines.append)
    assert info.value.agents == ("zone1", "zone2")
    assert lines and all(line.startswith("waiting for zone1, zone2 to connect (") for line in lines)
    assert lines[0].endswith(" of 0.6 s)")


def test_federate_wait_reaches_the_coordinators_plan(tmp_path):
    """``cvxdp federate --wait`` is written into the plan the ServerApp reads (``plan["wait"]``)."""
    from pathlib import Path

    from cvxdp.config.build import load_case

    case = load_case(Path(__file__).resolve().parents[2] / "cases" / "toy.toml")
    path = write_plan(case, tmp_path / "plan.json", parties=["agent0"], agents=["agent0"], out=tmp_path,
                      checkpoint=tmp_path / "checkpoint", timeout=30.0, wait=7.5)
    assert json.loads(path.read_text())["wait"] == 7.5
