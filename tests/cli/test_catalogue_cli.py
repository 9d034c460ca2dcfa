"""Catalogue of bad inputs and faults, part 3: the command line, case and study files, output directories.

Bad input: a non-zero exit, one clear line naming what was wrong, no traceback, never click's bare
"Aborted!". Faults (disk full and read-only file systems injected as OSError(ENOSPC/EROFS) — the tests
run as root, for whom chmod does not make a directory read-only —, kill -9, a lock held by another
process, two concurrent writers): one clear line, and nothing finished is lost.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cvxdp.cli.main import cli
from cvxdp.config.build import load_case, run_case

CASES = Path(__file__).resolve().parents[2] / "cases"
TIMING = ["wall_time", "solver_time"]

TOY = """[case]
name = "toy"
template = "toy"
[model]
agents = 3
dim = 4
samples = 10
seed = {seed}
{model}
[algorithm]
name = "ladmm"
rounds = 6
{algorithm}
[privacy]
mechanism = "{mechanism}"
delta = 1e-6
{privacy}
[run]
{run}
"""


def toy_case(tmp: Path, *, name="case.toml", seed=0, mechanism="ObjG", model="", algorithm="rho = 1.0\neta = 2.0",
             privacy="epsilon = 1.0", run="seed = 0") -> Path:
    path = tmp / name
    path.write_text(TOY.format(seed=seed, mechanism=mechanism, model=model, algorithm=algorithm, privacy=privacy,
                               run=run))
    return path


def cli_run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def assert_one_clear_line(result, *words):
    """Non-zero exit, the words in the output, no traceback and no bare 'Aborted!'."""
    out = result.output
    assert result.exit_code != 0, out
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out and "Aborted!" not in out, out
    for word in words:
        assert word in out, (word, out)


# --------------------------------------------------------------------------- case files through `cvxdp run`
CASE_VALUES = [
    ("model string bound", dict(model='bound = "1"'), ["'bound'", "[model]"]),
    ("model float seed", dict(seed=1.5), ["'seed'", "[model]"]),
    ("algorithm string rho", dict(algorithm='rho = "1"'), ["'rho'"]),
    ("algorithm zero rho", dict(algorithm="rho = 0.0"), ["'rho'"]),
    ("algorithm float local_updates", dict(algorithm="local_updates = 2.5"), ["'local_updates'"]),
    ("run float seed", dict(run="seed = 1.5"), ["'seed'"]),
    ("run unknown accountant", dict(run='accountant = "best"'), ["'accountant'"]),
    ("privacy string epsilon", dict(privacy='epsilon = "1"'), ["'epsilon'"]),
    ("privacy zero epsilon", dict(privacy="epsilon = 0.0"), ["'epsilon'"]),
    ("privacy unknown mechanism", dict(mechanism="ObjX"), ["'mechanism'"]),
]


@pytest.mark.parametrize("what, kw, words", CASE_VALUES, ids=[c[0] for c in CASE_VALUES])
def test_bad_case_value_gets_one_clear_line(tmp_path, what, kw, words):
    case = toy_case(tmp_path, **kw)

    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"), *words)


TEMPLATE_VALUES = [
    ("erm float data_seed", "erm_madmm.toml", {"data_seed": 1.5}, ["'data_seed'", "[model]"]),
    ("erm string C", "erm_madmm.toml", {"C": "50"}, ["'C'", "[model]"]),
    ("vertical string data_seed", "sharing_breast_cancer.toml", {"data_seed": "0"}, ["'data_seed'", "[model]"]),
    ("vertical string bound", "sharing_breast_cancer.toml", {"bound": "100"}, ["'bound'", "[model]"]),
    ("logistic float agents", "digits_fl.toml", {"agents": 2.5}, ["'agents'", "[model]"]),
    ("logistic string clip", "digits_fl.toml", {"clip": "1"}, ["'clip'", "[model]"]),
]


@pytest.mark.parametrize("what, case_name, change, words", TEMPLATE_VALUES, ids=[t[0] for t in TEMPLATE_VALUES])
def test_bad_model_value_of_a_shipped_template_names_the_entry(what, case_name, change, words):
    from cvxdp.config.build import build_instance
    from cvxdp.errors import ConfigError

    case = load_case(CASES / case_name)
    case.model.update(change)

    with pytest.raises(ConfigError) as info:
        build_instance(case)

    for word in words:
        assert word in str(info.value)


# --------------------------------------------------------------------------- study files
STUDY = """[study]
case = "{case}"
{body}
"""
STUDY_VALUES = [
    ("delta zero is not 'missing'", 'mechanisms = ["ObjG"]\nepsilons = [1.0]\ndelta = 0.0', ["'delta'", "(0, 1)"]),
    ("baseline string", 'epsilons = [1.0]\nbaseline = "no"', ["'baseline'", "true or false"]),
    ("empty mechanism list", "mechanisms = []\nepsilons = [1.0]", ["'mechanisms'", "non-empty"]),
    ("mechanisms not a list", 'mechanisms = "ObjG"\nepsilons = [1.0]', ["'mechanisms'"]),
    ("string epsilon", 'epsilons = ["1"]', ["'epsilons'"]),
    ("float seed", "epsilons = [1.0]\nseeds = [0.5]", ["'seeds'"]),
    ("zero rounds", "epsilons = [1.0]\nrounds = 0", ["'rounds'"]),
    ("empty epsilons", "epsilons = []", ["'epsilons'", "non-empty"]),
    ("graph study zero runs", 'kind = "graph"\nruns = 0\n[[setting]]\nlabel = "a"\nalgorithm = { name = "madmm" }\n'
     'privacy = { mechanism = "none" }', ["'runs'"]),
    ("sharing study empty noise levels", 'kind = "sharing"\nnoise_levels = []\nseeds = [0]', ["'noise_levels'"]),
]


@pytest.mark.parametrize("what, body, words", STUDY_VALUES, ids=[s[0] for s in STUDY_VALUES])
def test_bad_study_value_gets_one_clear_line(tmp_path, what, body, words):
    case = toy_case(tmp_path)
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(case=case.as_posix(), body=body))

    assert_one_clear_line(cli_run("study", study, "--out", tmp_path / "o", "--no-progress"), *words)
    assert not list((tmp_path / "o").glob("runs/*/result.json"))


def test_study_delta_is_used_as_given(tmp_path):
    from cvxdp.studies.grid import _cell_case, load_study

    case = toy_case(tmp_path)
    study_file = tmp_path / "study.toml"
    study_file.write_text(STUDY.format(case=case.as_posix(), body='mechanisms = ["ObjG"]\nepsilons = [1.0]\n'
                                                                  "delta = 1e-9\nbaseline = false"))
    study = load_study(study_file)

    cells = study.cells()
    assert [c.mechanism for c in cells] == ["ObjG"]  # baseline = false really drops the baseline
    assert _cell_case(study, load_case(case), cells[0], None).privacy["delta"] == 1e-9


# --------------------------------------------------------------------------- checkpoints seen from the CLI
def _leave_checkpoint(case: Path, out: Path, **overrides) -> None:
    """A run that stopped after its checkpoint and before its result (as if killed)."""
    run_case(load_case(case).with_overrides(**overrides), checkpoint=out)
    assert (out / "checkpoint.pkl").exists()


def test_resume_after_model_table_changed_is_refused(tmp_path):
    case = toy_case(tmp_path)
    _leave_checkpoint(case, tmp_path / "o")
    toy_case(tmp_path, seed=1)  # the [model] table changes

    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"),
                          "[model] table", "checkpoint.pkl", "delete it")


def _libsvm_case(tmp: Path, data_name: str) -> Path:
    rng = np.random.default_rng(0)
    lines = [f"{1 if rng.random() < 0.5 else -1} " + " ".join(f"{j + 1}:{rng.normal():.4f}" for j in range(3))
             for _ in range(40)]
    content = ("\n".join(lines) + "\n").encode()
    (tmp / data_name).write_bytes(gzip.compress(content) if data_name.endswith(".gz") else content)
    case = tmp / "logistic.toml"
    case.write_text(f"""[case]
template = "logistic"
[model]
dataset = "libsvm"
path = "{data_name}"
agents = 2
kind = "binary"
test_fraction = 0.25
baselines = false
[algorithm]
rounds = 2
""")
    return case


def test_resume_after_data_file_changed_is_refused(tmp_path):
    case = _libsvm_case(tmp_path, "d.svm")
    _leave_checkpoint(case, tmp_path / "o")
    with open(tmp_path / "d.svm", "a") as fh:
        fh.write("1 1:0.25 2:0.5 3:0.75\n")

    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"),
                          "data file 'd.svm'", "checkpoint.pkl")


def test_truncated_gz_data_file_is_one_clear_line_not_aborted(tmp_path):
    case = _libsvm_case(tmp_path, "d.svm.gz")
    blob = (tmp_path / "d.svm.gz").read_bytes()
    (tmp_path / "d.svm.gz").write_bytes(blob[: len(blob) // 2])

    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"), "d.svm.gz", "truncated")


@pytest.mark.parametrize("case_name, change", [("erm_madmm.toml", {"data_seed": 1}),
                                               ("sharing_breast_cancer.toml", {"data_seed": 1})],
                         ids=["decentralized", "sharing"])
def test_custom_loops_refuse_a_checkpoint_of_another_model(tmp_path, case_name, change):
    base = load_case(CASES / case_name)
    rounds = {"epochs": 2} if base.algorithm.get("name") == "sharing" else {"rounds": 2}
    base = base.with_overrides(algorithm=rounds)
    run_case(base, checkpoint=tmp_path)
    changed = base.with_overrides()
    changed.model.update(change)

    with pytest.raises(Exception) as info:
        run_case(changed, checkpoint=tmp_path)

    assert "[model] table" in str(info.value) and "another configuration or other data" in str(info.value)


@pytest.mark.parametrize("content", [b"garbage\x00", b""], ids=["garbage", "empty"])
def test_cli_run_with_an_unusable_checkpoint_names_it(tmp_path, content):
    case = toy_case(tmp_path)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "checkpoint.pkl").write_bytes(content)

    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"),
                          "checkpoint.pkl", "delete it")


def test_study_with_a_damaged_finished_cell_names_the_file(tmp_path):
    case = toy_case(tmp_path)
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(case=case.as_posix(), body='mechanisms = ["ObjG"]\nepsilons = [1.0]\n'
                                                            "baseline = false\nrounds = 2"))
    assert cli_run("study", study, "--out", tmp_path / "o", "--no-progress").exit_code == 0
    cell = next((tmp_path / "o" / "runs").iterdir())
    (cell / "arrays.npz").write_bytes(b"PK\x03\x04 truncated")

    assert_one_clear_line(cli_run("study", study, "--out", tmp_path / "o", "--no-progress"),
                          "arrays.npz", str(cell))


# --------------------------------------------------------------------------- output directories
def test_out_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")

    assert_one_clear_line(cli_run("run", toy_case(tmp_path), "--out", tmp_path / "file" / "sub", "--no-progress"),
                          "regular file", "file")


def test_study_out_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(case=toy_case(tmp_path).as_posix(), body="epsilons = [1.0]"))

    assert_one_clear_line(cli_run("study", study, "--out", tmp_path / "file" / "o", "--no-progress"),
                          "regular file")


def test_second_run_into_a_finished_out_is_refused_unless_overwrite(tmp_path):
    case = toy_case(tmp_path)
    assert cli_run("run", case, "--out", tmp_path / "o", "--no-progress").exit_code == 0
    before = (tmp_path / "o" / "history.csv").read_bytes()

    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"), "already holds a finished",
                          "--overwrite")
    assert (tmp_path / "o" / "history.csv").read_bytes() == before
    assert cli_run("run", case, "--out", tmp_path / "o", "--no-progress", "--overwrite").exit_code == 0


def _reference(case: Path, tmp: Path) -> pd.DataFrame:
    assert cli_run("run", case, "--out", tmp / "reference", "--no-progress").exit_code == 0
    return pd.read_csv(tmp / "reference" / "history.csv").drop(columns=TIMING)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES], ids=["ENOSPC", "EROFS", "EACCES"])
def test_failed_checkpoint_write_keeps_the_last_good_one(tmp_path, monkeypatch, code):
    case = toy_case(tmp_path)
    case.write_text(case.read_text().replace("rounds = 6", "rounds = 30"))  # a checkpoint every 5 rounds
    reference = _reference(case, tmp_path)
    real_fsync, calls = os.fsync, {"n": 0}

    def failing_fsync(fd):
        calls["n"] += 1
        if calls["n"] > 3:  # three checkpoints succeed, the fourth hits a full / read-only disk
            raise OSError(code, os.strerror(code))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    result = cli_run("run", case, "--out", tmp_path / "o", "--no-progress")
    assert_one_clear_line(result, "checkpoint.pkl", errno.errorcode[code], "previous version (if any) is intact")
    monkeypatch.undo()
    assert not list((tmp_path / "o").glob("*.tmp"))  # no temporary file left behind

    resumed = cli_run("run", case, "--out", tmp_path / "o", "--no-progress")

    assert resumed.exit_code == 0, resumed.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "o" / "history.csv").drop(columns=TIMING), reference)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["ENOSPC", "EROFS"])
def test_failed_result_write_keeps_the_checkpoint(tmp_path, monkeypatch, code):
    case = toy_case(tmp_path)
    reference = _reference(case, tmp_path)

    def failing_savez(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(np, "savez", failing_savez)
    assert_one_clear_line(cli_run("run", case, "--out", tmp_path / "o", "--no-progress"), "arrays.npz",
                          errno.errorcode[code])
    monkeypatch.undo()
    assert (tmp_path / "o" / "checkpoint.pkl").exists() and not (tmp_path / "o" / "result.json").exists()

    resumed = cli_run("run", case, "--out", tmp_path / "o", "--no-progress")

    assert resumed.exit_code == 0, resumed.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "o" / "history.csv").drop(columns=TIMING), reference)


def test_out_held_by_a_live_process_is_refused_naming_it(tmp_path):
    import socket

    case = toy_case(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / ".cvxdp.lock").write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(),
                                                                "started": "2026-01-01 00:00:00 UTC"}))

        result = cli_run("run", case, "--out", tmp_path / "o", "--no-progress")
    finally:
        holder.kill()
        holder.wait()

    assert_one_clear_line(result, f"pid {holder.pid}", socket.gethostname(), "2026-01-01")


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / ".cvxdp.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))

    result = cli_run("run", toy_case(tmp_path), "--out", tmp_path / "o", "--no-progress")

    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "result.json").exists() and not (tmp_path / "o" / ".cvxdp.lock").exists()


def test_concurrent_checkpoint_writers_never_share_a_temporary_file(tmp_path):
    from cvxdp.run.storage import save_checkpoint

    errors = []

    def writer(k):
        try:
            for i in range(40):
                save_checkpoint(tmp_path, {"fingerprint": {}, "writer": k, "i": i})
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    with open(tmp_path / "checkpoint.pkl", "rb") as fh:
        assert pickle.load(fh)["i"] == 39
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pkl"]


def _study_file(tmp: Path, rounds: int) -> Path:
    study = tmp / "study.toml"
    study.write_text(STUDY.format(case=toy_case(tmp).as_posix(),
                                  body=f'mechanisms = ["ObjG", "OutG"]\nepsilons = [0.5, 1.0]\nrounds = {rounds}'))
    return study


def test_second_study_on_the_same_out_is_refused_and_the_first_loses_nothing(tmp_path):
    study = _study_file(tmp_path, rounds=30)
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "cvxdp.cli.main", "study", str(study), "--no-progress", "--json", "--out", str(out)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(30_000):  # poll for up to ~10 minutes: a wait, not a speed limit
        if (out / ".cvxdp.lock").exists() or first.poll() is not None:
            break
        time.sleep(0.02)

    second = cli_run("study", study, "--out", out, "--no-progress")
    stdout, _ = first.communicate(timeout=600)

    assert_one_clear_line(second, f"pid {first.pid}", "in use by another cvxdp process")
    info = json.loads(stdout.strip().splitlines()[-1])
    assert first.returncode == 0 and info["computed"] == info["runs"] == 5
    assert len(pd.read_csv(out / "results.csv")) == 5 and len(list(out.glob("runs/*/result.json"))) == 5


def test_sigkilled_cli_run_resumes_to_the_uninterrupted_result(tmp_path):
    case = toy_case(tmp_path)
    case.write_text(case.read_text().replace("rounds = 6", "rounds = 150"))
    reference = _reference(case, tmp_path)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "cvxdp.cli.main", "run", str(case), "--out", str(out),
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(60_000):  # poll for up to ~10 minutes: a wait, not a speed limit
        if (out / "checkpoint.pkl").exists() or proc.poll() is not None:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (out / "result.json").exists()

    resumed = cli_run("run", case, "--out", out, "--no-progress")  # the dead run's lock is taken over

    assert resumed.exit_code == 0, resumed.output
    pd.testing.assert_frame_equal(pd.read_csv(out / "history.csv").drop(columns=TIMING), reference)


def test_a_changed_template_default_refuses_the_resume(tmp_path):
    """Same case file, but the template resolves it differently (e.g. a default that changed between versions,
    like the logistic dtype): the checkpoint is of another problem and is refused, naming the setting."""
    from cvxdp.config.build import build_instance

    base = load_case(CASES / "toy.toml").with_overrides(algorithm={"rounds": 2})
    run_case(base, checkpoint=tmp_path)
    instance = build_instance(base)
    instance.settings = {**instance.settings, "radius": 2.5}  # as a newer default would resolve it

    with pytest.raises(Exception) as info:
        run_case(base, instance=instance, checkpoint=tmp_path)

    assert "[model] setting 'radius' as resolved by the template" in str(info.value)
