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
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cvxdp.cli.main import cli
from cvxdp.config.build import load_case
from cvxdp.errors import BackendError
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


@pytest.mark.slow  # the same bytes as the consensus family's over the same transport; every family in-process:
# tests/contract/test_families.py
def test_graph_family_federates_like_run(tmp_path):
    case = tmp_path / "erm3.toml"  # three hospitals on a random graph: their exchange goes through the coordinator
    case.write_text((CASES / "erm_madmm.toml").read_text().replace("nodes = 5", "nodes = 3"))
    fed, _ = _same_as_run(case, tmp_path, "--rounds", "1", "--seed", "0")
    assert fed["privacy"]["pld"] > 0


@pytest.mark.slow  # as the graph family's
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


def test_a_party_that_drops_stops_the_run_and_the_rerun_resumes(tmp_path):
    """A party killed in round 2 stops the run with one line naming it and the round; started again, the same plan
    resumes from the coordinator's checkpoint of round 1 and ends with the uninterrupted run's released values."""
    case, files, plan = _toy(tmp_path, rounds=2, timeout=20)
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
        assert re.fullmatch(r"BackendError: Party 'agent1' did not answer (within 20 s )?in round 2\b.*", status["error"])
        assert checkpoint.is_file()
        progress = (tmp_path / "out" / "progress.log").read_text()  # loud while it waits: whom, for how long
        assert "round 1: " in progress and "round 2: waiting for agent1" in progress
        flower.start_party(files[1])  # the party comes back with its state: run the same plan again
        status = flower.run(plan, timeout=600)
    assert status["status"] == "done", status
    _same_as_in_one_process(case, plan, tmp_path)
    for file in files:  # round 2 was released by agent0 before the drop and answered again from its record
        assert _charged_rounds(file) == [1, 2]


def _charged_rounds(file: Path) -> list[int]:
    lines = (file.parent / "state" / "ledger.jsonl").read_text().splitlines()
    return [r["round"] for r in map(json.loads, lines) if r["kind"] == "charge"]


FOREIGN_SERVER = '''
import json, time
from pathlib import Path
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    out = Path(context.run_config["out"])
    crafted = Path(context.run_config["crafted"]).read_bytes()
    nodes = []
    for _ in range(120):
        nodes = list(grid.get_node_ids())
        if len(nodes) >= 2:
            break
        time.sleep(0.5)
    msgs = [Message(RecordDict({"request": ConfigRecord({"payload": crafted})}), dst_node_id=n,
                    message_type="query.cvxdp") for n in nodes]
    replies = list(grid.send_and_receive(msgs, timeout=120))
    (out / "foreign.json").write_text(json.dumps(
        [{"error": r.has_error(), "reason": r.error.reason if r.has_error() else None} for r in replies]))
'''
FOREIGN_CLIENT = '''
from pathlib import Path
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


@app.query("cvxdp")
def handle(msg: Message, context: Context) -> Message:
    Path(context.run_config["out"], f"ran-{context.node_id}").write_text("the foreign app ran at a party")
    return Message(RecordDict({"reply": ConfigRecord({"payload": b"x"})}), reply_to=msg)
'''


class _Pwn:
    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.path}",))


def test_only_cvxdps_app_runs_at_a_party_and_crafted_bytes_never_run(tmp_path):
    """A Flower app of someone else's, submitted to the SuperLink with `flwr run`, reaches the parties' SuperNodes:
    each party refuses it (its ClientApp never runs: no marker file) and its crafted pickle bytes (which would touch
    a file if unpickled) are never read; the same parties then run cvxdp's own app."""
    import pickle

    case, files, plan = _toy(tmp_path, rounds=1, timeout=120)
    app = tmp_path / "foreign"
    (app / "foreign").mkdir(parents=True)
    (app / "foreign" / "__init__.py").write_text("")
    (app / "foreign" / "server_app.py").write_text(FOREIGN_SERVER)
    (app / "foreign" / "client_app.py").write_text(FOREIGN_CLIENT)
    (app / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n[project]\nname = "foreign"\n'
        'version = "1.0.0"\ndependencies = []\nlicense = "Apache-2.0"\n\n[tool.hatch.build.targets.wheel]\n'
        'packages = ["."]\n\n[tool.flwr.app]\npublisher = "mallory"\n\n[tool.flwr.app.components]\n'
        'serverapp = "foreign.server_app:app"\nclientapp = "foreign.client_app:app"\n\n[tool.flwr.app.config]\n'
        'out = ""\ncrafted = ""\n')
    out = tmp_path / "foreign-out"
    out.mkdir()
    crafted = tmp_path / "crafted.bin"
    crafted.write_bytes(pickle.dumps(_Pwn(out / "pwned")))
    with LocalFederation(files, tmp_path / "federation") as flower:
        done = flower.flwr("run", str(app), "local", "--run-config", f'out="{out}" crafted="{crafted}"', "--format",
                           "json")
        assert '"success": true' in done.stdout, done.stdout + done.stderr
        for _ in range(480):
            if (out / "foreign.json").exists():
                break
            time.sleep(0.25)
        replies = json.loads((out / "foreign.json").read_text())
        assert len(replies) == 2 and all(r["error"] and "runs only cvxdp's app" in r["reason"] for r in replies)
        assert not list(out.glob("ran-*")) and not (out / "pwned").exists()
        for name in ("agent0", "agent1"):
            assert "refused run" in flower.log(f"party-{name}") and "mallory/foreign" in flower.log(f"party-{name}")
        status = flower.run(plan, timeout=600)  # the parties go on serving cvxdp's own app
    assert status["status"] == "done", status
    _same_as_in_one_process(case, plan, tmp_path)


def test_a_superlink_killed_mid_run_resumes_and_each_release_is_charged_once(tmp_path):
    """kill -9 of the SuperLink (and the coordinator's ServerApp with it) after round 1: the parties keep their state
    and reconnect to the SuperLink started again; the same plan resumes from the coordinator's checkpoint, the
    parties answer the rounds they released already from their records, and the result equals the uninterrupted
    run's, each round charged once in each party's lifetime ledger."""
    case, files, plan = _toy(tmp_path, rounds=3, timeout=60)
    for file in files:  # a coordinator that died holds its run for a short while only
        file.write_text(file.read_text() + "\n[limits]\nlock_timeout = 2.0\n")
    with LocalFederation(files, tmp_path / "federation") as flower:
        outcome: dict = {}

        def first_run() -> None:
            try:
                outcome["status"] = flower.run(plan, timeout=600)
            except BackendError as exc:
                outcome["error"] = str(exc)

        runner = threading.Thread(target=first_run)
        runner.start()
        checkpoint = tmp_path / "out" / "checkpoint" / "checkpoint.pkl"
        while not checkpoint.is_file() and runner.is_alive():
            runner.join(0.1)
        assert checkpoint.is_file(), outcome
        flower.kill_superlink()
        runner.join(timeout=120)
        assert "SuperLink stopped" in outcome.get("error", ""), outcome
        flower.restart_superlink()
        status = flower.run(plan, timeout=600)
    assert status["status"] == "done", status
    _same_as_in_one_process(case, plan, tmp_path)
    for file in files:
        assert _charged_rounds(file) == [1, 2, 3]


def test_a_party_picks_a_free_port_checks_itself_first_and_stops_its_supernode_on_sigterm(tmp_path):
    """Two parties on one machine without --port each get their own port and say which; a party with a broken agents
    file stops before it connects, in one line; SIGTERM to a party (what a service manager sends) stops its SuperNode
    too; and cvxdp party runs from a shell whose PATH does not hold the venv."""
    import os
    import signal
    import subprocess
    import sys

    case = load_case(CASES / "toy.toml")
    case.model["agents"] = 2
    case.privacy = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}
    files = write_parties(case, tmp_path / "parties")
    cvxdp_script = Path(sys.executable).parent / "cvxdp"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no venv on PATH
    procs = [subprocess.Popen([str(cvxdp_script), "party", str(f), "--superlink", "127.0.0.1:9", "--insecure"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for f in files]
    lines = []
    try:
        for proc in procs:
            for line in proc.stdout:
                lines.append(line)
                if "SuperNode on 127.0.0.1:" in line:
                    break
        ports = {re.search(r"SuperNode on 127\.0\.0\.1:(\d+)", line).group(1) for line in lines
                 if "SuperNode on" in line}
        assert len(ports) == 2, lines  # both running, on two ports
        children = [int(c) for c in Path(f"/proc/{procs[0].pid}/task/{procs[0].pid}/children").read_text().split()]
        assert children, "the party's SuperNode"
        os.kill(procs[0].pid, signal.SIGTERM)  # the party's process only, not its group
        assert procs[0].wait(timeout=60) == 0
        for child in children:
            assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
    (files[1].parent / "agents.pkl").write_bytes(b"not a pickle")
    broken = subprocess.run([str(cvxdp_script), "party", str(files[1]), "--superlink", "127.0.0.1:9", "--insecure"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert broken.returncode != 0 and "agents file" in broken.stderr and "cannot be read" in broken.stderr
    assert "Traceback" not in broken.stderr
