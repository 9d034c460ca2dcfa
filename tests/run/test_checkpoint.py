"""Checkpoint and resume: a run killed at any moment resumes to exactly the uninterrupted result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import CvxdpError, SolverFailedError
from cvxdp.model.local_solver import ConicProjection
from cvxdp_models.toy import make_agents

TIMING = ["wall_time", "solver_time"]
ALGO = dict(rho=1.0, eta=2.0, local_updates=2, rounds=30)
MECH = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)


def run(checkpoint=None, callback=None, rounds=30):
    return cvxdp.solve(make_agents(seed=5), algorithm=cvxdp.LinearizedADMM(**{**ALGO, "rounds": rounds}),
                       privacy=MECH, seed=11, checkpoint=checkpoint, callback=callback)


def same(a, b):
    pd.testing.assert_frame_equal(a.history.drop(columns=TIMING), b.history.drop(columns=TIMING))
    pd.testing.assert_frame_equal(a.agent_history.drop(columns=["solver_time", "compute_time"]),
                                  b.agent_history.drop(columns=["solver_time", "compute_time"]))
    assert a.privacy == b.privacy
    for key in a.solution:
        assert (a.solution[key] == b.solution[key]).all()


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path):
    reference = run()

    def interrupt(t, row):
        if t == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, interrupt)
    resumed = run(tmp_path)

    same(reference, resumed)


SCRIPT = """
import sys, time
import cvxdp
from cvxdp_models.toy import make_agents
cvxdp.solve(make_agents(seed=5), algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=2.0, local_updates=2, rounds=30),
            privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=11,
            checkpoint=sys.argv[1], callback=lambda t, row: time.sleep(0.05))
"""


def test_sigkilled_run_resumes_to_the_uninterrupted_result(tmp_path):
    reference = run()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)])
    for _ in range(12_000):  # poll for up to ~10 minutes: a wait, not a speed limit
        if (tmp_path / "checkpoint.pkl").exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    resumed = run(tmp_path)

    assert proc.returncode == -signal.SIGKILL
    same(reference, resumed)


def test_checkpoint_survives_a_run_where_every_solver_fails(tmp_path, monkeypatch):
    reference = run()
    original = ConicProjection._clarabel
    calls = {"n": 0}

    def dies_later(self, v, c):
        calls["n"] += 1
        return original(self, v, c) if calls["n"] < 40 else (None, "NumericalError")

    monkeypatch.setattr(ConicProjection, "_clarabel", dies_later)
    monkeypatch.setattr(ConicProjection, "_cvxpy", lambda self, name, v, c: (None, "NumericalError"))
    with pytest.raises(SolverFailedError, match="every solver failed"):
        run(tmp_path)
    monkeypatch.undo()

    resumed = run(tmp_path)

    same(reference, resumed)


def test_checkpoint_of_another_run_is_refused(tmp_path):
    run(tmp_path, rounds=3)

    with pytest.raises(CvxdpError, match="another configuration"):
        cvxdp.solve(make_agents(seed=6), algorithm=cvxdp.LinearizedADMM(**ALGO), privacy=MECH, seed=11,
                    checkpoint=tmp_path)


CASES = Path(__file__).resolve().parents[2] / "cases"


def _study(tmp_path: Path, rounds: int) -> Path:
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
case = "{(CASES / 'toy.toml').as_posix()}"
mechanisms = ["ObjL", "OutG"]
epsilons = [0.5, 1.0]
local_updates = [1]
seeds = [0, 1]
rounds = {rounds}
""")
    return study


def test_sigkilled_study_resumes_without_losing_or_redoing_cells(tmp_path):
    study = _study(tmp_path, rounds=40)
    cmd = [sys.executable, "-m", "cvxdp.cli.main", "study", str(study), "--no-progress", "--json", "--out"]
    subprocess.run(cmd + [str(tmp_path / "reference")], check=True, capture_output=True)
    out = tmp_path / "killed"
    proc = subprocess.Popen(cmd + [str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(12_000):  # poll for up to ~10 minutes: a wait, not a speed limit
        if len(list(out.glob("runs/*/result.json"))) >= 3 or proc.poll() is not None:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")}

    resumed = subprocess.run(cmd + [str(out)], check=True, capture_output=True, text=True)

    import json
    info = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert info["reused"] >= len(done_before) >= 3
    assert info["computed"] == info["runs"] - info["reused"]
    for name, mtime in done_before.items():  # finished cells are neither lost nor recomputed
        assert (out / "runs" / name / "result.json").stat().st_mtime_ns == mtime
    cols = ["cell", "objective", "consensus_residual", "max_violation", "noise_magnitude", "eps_basic", "eps_pld"]
    a = pd.read_csv(tmp_path / "reference" / "results.csv")[cols]
    b = pd.read_csv(out / "results.csv")[cols]
    pd.testing.assert_frame_equal(a, b)


def _resume_after(tmp_path, at: int, first: bool, then: bool):
    """Run with ``evaluate=first`` until round ``at`` is checkpointed and interrupted, then resume with ``then``."""
    def interrupt(t, row):
        if t == at:
            raise KeyboardInterrupt

    agents = make_agents(seed=5)
    algo = dict(algorithm=cvxdp.LinearizedADMM(**ALGO), privacy=MECH, seed=11, checkpoint=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        cvxdp.solve(agents, callback=interrupt, evaluate=first, **algo)
    return cvxdp.solve(agents, evaluate=then, **algo)


def test_a_resume_with_another_evaluate_flag_says_which_rounds_were_evaluated(tmp_path):
    # the flag decides what is recorded, not the problem: the run resumes, with a warning and the ranges recorded
    with pytest.warns(UserWarning, match=r"evaluated rounds 1-12 of its 12 .* does not evaluate"):
        resumed = _resume_after(tmp_path, 12, True, False)
    assert resumed.config["evaluation"]["rounds"] == [[1, 12]]
    assert resumed.config["evaluation"]["evaluated"] is False
    column = resumed.config["evaluation"]["columns"][0]
    assert resumed.history[column].iloc[:12].notna().all() and resumed.history[column].iloc[12:].isna().all()
    full = cvxdp.solve(make_agents(seed=5), algorithm=cvxdp.LinearizedADMM(**ALGO), privacy=MECH, seed=11)
    assert full.config["evaluation"]["rounds"] == [[1, 30]]


def test_a_resume_with_the_same_evaluate_flag_does_not_warn(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        resumed = _resume_after(tmp_path, 5, False, False)
    assert resumed.config["evaluation"]["rounds"] == []
