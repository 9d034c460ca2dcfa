"""The federation on real Flower processes: a SuperLink and one SuperNode per party on 127.0.0.1, cvxdp's ServerApp
submitted with ``flwr run``, one new ClientApp process per message (tests/federation/test_protocol.py checks the
protocol itself in one process).

Every round trip costs Flower's floor (a SuperNode polls every 3 s and starts a new process per message, about
6-10 s on 2 cores), so these tests run few rounds. They sit in one file: pytest-xdist (``--dist loadfile``) runs them one
after the other on one worker, which mostly waits, while the other worker runs the rest of the suite.
"""

from __future__ import annotations

import json
import re
import signal
import stat
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cvxdp.cli.main import cli
from cvxdp.config.build import load_case
from cvxdp.federation.coordinator import LocalChannel, run_federation
from cvxdp.federation.launch import LocalFederation
from cvxdp.federation.parties import write_parties, write_plan
from cvxdp.run import load_result

pytestmark = pytest.mark.federation

CASES = Path(__file__).resolve().parents[2] / "cases"
#: what only a party may compute (its data): never in the coordinator's JSON or result
PRIVATE_KEYS = {"objective", "max_violation", "solution_violation", "noise_magnitude", "solver_time",
                "polished_objective", "train_error", "test_error", "average_loss"}
RELEASED_KEYS = ("rounds", "stop_reason", "consensus_residual", "primal_residual", "dual_residual", "privacy", "seed",
                 "mechanism", "epsilon")


def _cli(*args: str) -> dict:
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads([line for line in out.output.splitlines() if line.startswith("{")][-1])


def _released(history: pd.DataFrame) -> pd.DataFrame:
    drop = [c for c in history.columns if c in PRIVATE_KEYS or c == "wall_time"]
    return history.drop(columns=drop).select_dtypes("number").reset_index(drop=True)


def _same_as_run(case: str | Path, tmp_path: Path, *options: str) -> tuple[dict, dict]:
    """``cvxdp federate CASE --local`` and ``cvxdp run CASE`` with the same options: the released values agree
    bit for bit, and the coordinator's JSON and saved result hold nothing computed on private data."""
    fed = _cli("federate", str(case), "--local", *options, "--out", str(tmp_path / "fed"))
    run = _cli("run", str(case), *options, "--out", str(tmp_path / "run"))
    assert {k: fed[k] for k in RELEASED_KEYS} == {k: run[k] for k in RELEASED_KEYS}
    assert not PRIVATE_KEYS & set(fed)
    public, full = load_result(tmp_path / "fed" / "result"), load_result(tmp_path / "run")
    for key, value in public.solution.items():
        np.testing.assert_array_equal(value, full.solution[key])
    pd.testing.assert_frame_equal(_released(public.history), _released(full.history)[_released(public.history)
                                  .columns], check_exact=True)
    assert public.local == {} and public.solution_violation is None
    assert not PRIVATE_KEYS & set(public.history.columns)
    for folder in (tmp_path / "fed" / "parties").iterdir():  # each party's data and outputs: its owner only
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        (run_dir,) = (folder / "state").glob("run-*")
        assert (run_dir / "evaluation.csv").is_file() and (run_dir / "ledger.json").is_file()
    return fed, run


def test_consensus_objective_perturbation_federates_like_run(tmp_path):
    fed, _ = _same_as_run(CASES / "case14_3zones.toml", tmp_path, "--mechanism", "ObjG", "--epsilon", "1.0",
                          "--rounds", "2", "--seed", "0")
    assert fed["privacy"]["pld"] > 0 and set(fed["parties"]) == {"zone1", "zone2", "zone3"}
    assert all(p["ledger"]["pld"] == pytest.approx(fed["privacy"]["pld"]) for p in fed["parties"].values())


def test_graph_family_federates_like_run(tmp_path):
    case = tmp_path / "erm3.toml"  # three hospitals on a random graph: their exchange goes through the coordinator
    case.write_text((CASES / "erm_madmm.toml").read_text().replace("nodes = 5", "nodes = 3"))
    fed, _ = _same_as_run(case, tmp_path, "--rounds", "1", "--seed", "0")
    assert fed["privacy"]["pld"] > 0


def test_sharing_family_federates_like_run(tmp_path):
    fed, _ = _same_as_run(CASES / "sharing_breast_cancer.toml", tmp_path, "--mechanism", "OutG", "--epsilon", "1.0",
                          "--rounds", "1", "--seed", "0")
    public = load_result(tmp_path / "fed" / "result")
    assert set(public.solution) == {"z"}  # each party's model x_m stays with it


def _toy(tmp_path: Path, rounds: int, timeout: float) -> tuple[Any, list[Path], Path]:
    """Two toy agents as two parties (objective perturbation, research seed 5) and the coordinator's plan."""
    case = load_case(CASES / "toy.toml")
    case.model["agents"] = 2
    case.algorithm.update(rounds=rounds, eta=2.0)
    case.privacy = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}
    case.run["seed"] = 5
    files = write_parties(case, tmp_path / "parties", seed=5)
    names = [f.parent.name for f in files]
    plan = write_plan(case, tmp_path / "plan.json", parties=names, agents=names, out=tmp_path / "out",
                      checkpoint=tmp_path / "out" / "checkpoint", timeout=timeout)
    return case, files, plan


def _same_as_in_one_process(case: Any, plan: Path, tmp_path: Path) -> None:
    """The coordinator's saved result equals the same plan run in one process (tests/federation/test_protocol.py)."""
    done = load_result(tmp_path / "out" / "result")
    in_one = run_federation(json.loads(plan.read_text()) | {"checkpoint": None},
                            LocalChannel(write_parties(case, tmp_path / "again", seed=5)))
    reference = load_result(in_one.save(tmp_path / "in-one-process", public=True))  # the same files as the ServerApp
    pd.testing.assert_frame_equal(_released(done.history), _released(reference.history), check_exact=True)
    assert set(done.solution) == set(reference.solution)
    for key in reference.solution:
        np.testing.assert_array_equal(done.solution[key], reference.solution[key])


def test_tls_and_node_authentication_refuse_an_unregistered_node(tmp_path):
    case, files, plan = _toy(tmp_path, rounds=1, timeout=120)
    intruder = write_parties(case, tmp_path / "intruder", seed=5)[0]
    intruder.write_text(intruder.read_text().replace('name = "agent0"', 'name = "intruder"'))
    with LocalFederation(files, tmp_path / "federation", auth=True) as flower:
        assert flower.tls and flower.certs is not None
        stranger = flower.start_party(intruder, register=False)
        assert stranger.wait(timeout=120) != 0  # the SuperLink refuses a SuperNode whose key is not registered
        assert "Failed to activate SuperNode" in flower.log("party-intruder")
        assert "No SuperNode found with the given public key" in flower.log("superlink")
        status = flower.run(plan, timeout=600)
    assert status["status"] == "done", status
    _same_as_in_one_process(case, plan, tmp_path)


def test_a_party_that_drops_stops_the_run_and_the_rerun_resumes(tmp_path):
    """A party killed in round 2 stops the run with one line naming it and the round; started again, the same plan
    resumes from the coordinator's checkpoint of round 1 and ends with the uninterrupted run's released values."""
    case, files, plan = _toy(tmp_path, rounds=2, timeout=40)
    with LocalFederation(files, tmp_path / "federation") as flower:
        status: dict = {}
        runner = threading.Thread(target=lambda: status.update(flower.run(plan, timeout=600)))
        runner.start()
        checkpoint = tmp_path / "out" / "checkpoint" / "checkpoint.pkl"
        while not checkpoint.is_file() and runner.is_alive():  # until the coordinator has round 1 (no clock)
            runner.join(0.1)
        assert checkpoint.is_file(), status  # the run did not end before its first checkpoint
        flower.stop_party("agent1", signal.SIGKILL)
        runner.join(timeout=600)
        assert status["status"] == "failed"
        assert re.fullmatch(r"BackendError: Party 'agent1' did not answer (within 40 s )?in round 2\b.*", status["error"])
        assert checkpoint.is_file()
        flower.start_party(files[1])  # the party comes back with its state: run the same plan again
        status = flower.run(plan, timeout=600)
    assert status["status"] == "done", status
    _same_as_in_one_process(case, plan, tmp_path)
