"""The public view of every family holds released values and their post-processing only (issue 36, item 1).

Two contracts for every case of the registry (every algorithm x every mechanism it accepts, and the sharing preset):

* replay: the coordinator's side run again on recordings alone (the agents' public declarations, what the nodes
  answered to ``declare`` and every round's releases, with no node, data, seed or evaluation behind them) gives
  exactly ``result.release()``: history and agent history columns, solution, polished point, privacy, stop reason;
* neighbouring data: a run on other private data (same public declarations) whose releases are forced to be those of
  the first run gives exactly the first run's public view, although its nodes computed other values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.audits.release import _recording_backend
from cvxdp.model import Node
from cvxdp.run import SerialBackend

from .cases import CASES, ROUNDS, replay, run_case


def assert_same_public_view(a: cvxdp.Result, b: cvxdp.Result) -> None:
    """``a.release()`` and ``b.release()`` hold the same numbers (the backend's name aside)."""
    pa, pb = a.release(), b.release()
    pd.testing.assert_frame_equal(pa.history.reset_index(drop=True), pb.history.reset_index(drop=True),
                                  check_exact=True)
    pd.testing.assert_frame_equal(pa.agent_history.reset_index(drop=True), pb.agent_history.reset_index(drop=True),
                                  check_exact=True)
    assert pa.solution.keys() == pb.solution.keys()
    for key in pa.solution:
        np.testing.assert_array_equal(pa.solution[key], pb.solution[key])
    assert pa.local == pb.local == {}
    assert (pa.polished is None) == (pb.polished is None)
    if pa.polished is not None:
        assert pa.polished["round"] == pb.polished["round"]
        for key in pa.polished["solution"]:
            np.testing.assert_array_equal(pa.polished["solution"][key], pb.polished["solution"][key])
    assert pa.privacy == pb.privacy
    assert pa.stop_reason == pb.stop_reason
    config_a, config_b = ({k: v for k, v in p.config.items() if k != "backend"} for p in (pa, pb))
    assert config_a == config_b


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_public_view_replays_from_the_recorded_releases_alone(case):
    recorder = _recording_backend()
    result = run_case(case, recorder, evaluate=True)
    assert len(recorder.releases) == ROUNDS and len(recorder.declared) == len(result.agents)
    replayed = replay(case, [a.declaration() for a in result.agents], recorder.declared, recorder.releases)
    assert replayed.config["evaluation"]["evaluated"] is False and replayed.local == {}
    assert_same_public_view(result, replayed)


class ForcedBackend(SerialBackend):
    """Serial nodes on their own (neighbouring) data whose steps run, but whose releases are replaced by recorded
    ones: only the releases are forced equal; ``self.own`` keeps what the nodes would have released."""

    def __init__(self, releases: list[list[Any]]) -> None:
        super().__init__()
        self.forced = releases
        self.own: list[list[Any]] = []

    def call(self, method: Any, args: Any = None, *, round: int | None = None) -> list[Any]:
        results = super().call(method, args, round=round)
        if method is Node.step:
            self.own.append(list(results))
            return list(self.forced[round - 1])
        return results


@pytest.mark.parametrize("case", sorted(CASES))
def test_neighbouring_data_with_the_same_releases_give_the_same_public_view(case):
    recorder = _recording_backend()
    first = run_case(case, recorder, evaluate=True)
    forced = ForcedBackend(recorder.releases)
    neighbour = run_case(case, forced, neighbour=True, evaluate=True)
    # the data differ where they are private: the neighbour's nodes would have released other values
    assert any(not np.array_equal(own[k], rec[k]) for own_round, rec_round in zip(forced.own, recorder.releases)
               for own, rec in zip(own_round, rec_round) for k in rec.arrays)
    assert [a.declaration().to_dict() for a in first.agents] == \
        [a.declaration().to_dict() for a in neighbour.agents]  # the same public declarations
    assert_same_public_view(first, neighbour)


def test_both_contracts_catch_a_family_that_publishes_a_party_model(monkeypatch):
    """The sharing family before issue 36: its public solution also kept each party's model x_m."""
    from cvxdp.families.sharing.server import SharingFamily

    finish = SharingFamily.finish

    def leaky(self: SharingFamily, result: cvxdp.Result, state: Any, backend: Any) -> None:
        finish(self, result, state, backend)
        result.solution.update({f"x_{name}": value for name, value in result.local.items()})

    monkeypatch.setattr(SharingFamily, "finish", leaky)
    with pytest.raises(AssertionError):
        test_the_public_view_replays_from_the_recorded_releases_alone("sharing-OutG")
    with pytest.raises(AssertionError):
        test_neighbouring_data_with_the_same_releases_give_the_same_public_view("sharing-OutG")
