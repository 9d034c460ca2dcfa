"""The Ray backend: same seed => bit-identical to serial; several nodes per actor; dead actors; node errors."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import (
    BackendError,
    ConfigError,
    DeclarationError,
    InfeasibleAgentError,
    InvalidParameterError,
)

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
from cvxdp.run.ray import MIN_VARIABLES, MIN_VARIABLES_ENV, RayBackend  # noqa: E402 - after the importorskip

pytestmark = pytest.mark.ray

CASES = Path(__file__).resolve().parents[2] / "cases"
TIMING = {"wall_time", "solver_time", "compute_time"}  # measured, not computed: differ between any two runs


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray instance (2 CPUs) for the module; every RayBackend below reuses it. The toy agents are far
    below RayBackend's default ``min_variables``: the module's backends (CLI runs in subprocesses too) use Ray
    whatever their size (``CVXDP_RAY_MIN_VARIABLES=0``) unless a test says otherwise."""
    import logging

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the helpers below travel by value
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR,
             log_to_driver=False)
    before = os.environ.get(MIN_VARIABLES_ENV)
    os.environ[MIN_VARIABLES_ENV] = "0"
    yield
    if before is None:
        os.environ.pop(MIN_VARIABLES_ENV, None)
    else:
        os.environ[MIN_VARIABLES_ENV] = before
    ray.shutdown()


@pytest.fixture(scope="module")
def warm():
    """A backend that keeps its two actors between runs (worker processes start once, in the first test)."""
    backend = RayBackend(keep_actors=True)
    yield backend
    backend.shutdown()


def toy(agents: int = 3):
    from cvxdp_models.toy import make_agents

    return make_agents(agents=agents, dim=5, samples=20, seed=0)


def assert_same_run(a: cvxdp.Result, b: cvxdp.Result) -> None:
    """Every computed number equal bit for bit (timings excluded)."""
    for frame in ("history", "agent_history"):
        x, y = getattr(a, frame), getattr(b, frame)
        cols = [c for c in x.columns if c not in TIMING]
        assert list(x.columns) == list(y.columns)
        pd.testing.assert_frame_equal(x[cols], y[cols], check_exact=True)
    assert a.solution.keys() == b.solution.keys() and a.local.keys() == b.local.keys()
    for k in a.solution:
        assert np.array_equal(a.solution[k], b.solution[k]), k
    for k in a.local:
        assert np.array_equal(a.local[k], b.local[k]), k
    assert a.privacy == b.privacy and a.stop_reason == b.stop_reason


def test_ladmm_objpert_bit_identical_to_serial_with_several_nodes_per_actor(warm):
    agents = toy(5)
    # 14 rounds: eta="auto" grows with the noise from round 7 on (cvxdp.families.consensus.step_sizes), read by the driver from releases
    kwargs = dict(algorithm=cvxdp.LinearizedADMM(rounds=14, local_updates=2),
                  privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=11)
    serial = cvxdp.solve(agents, **kwargs)
    assert max(v["noise_growth"] for v in serial.config["eta_per_agent"].values()) > 1
    blocks = []  # 5 agents on 2 CPUs: two actors, blocks of 3 and 2
    remote = cvxdp.solve(agents, backend=warm, evaluate=True, callback=lambda t, row: blocks.append(warm.blocks), **kwargs)

    assert blocks[0] == [[0, 1, 2], [3, 4]]
    assert serial.history["noise_magnitude"].gt(0).all()
    assert remote.config["backend"] == "RayBackend"
    assert_same_run(serial, remote)
    assert remote.local["agent0"].flags.writeable  # ordinary arrays, as with the serial backend
    assert warm.actors == [] and len(warm._idle) == 2  # closed: the actors are kept, emptied, for the next run


def test_admm_bit_identical_to_serial(warm):
    agents = toy(3)
    algorithm = cvxdp.ADMM(rounds=4)
    serial = cvxdp.solve(agents, algorithm=algorithm, seed=2)
    remote = cvxdp.solve(agents, algorithm=algorithm, seed=2, backend=warm, evaluate=True)

    assert_same_run(serial, remote)
    # off the serial backend, private evaluation is off unless asked for; the released numbers are the same
    default = cvxdp.solve(agents, algorithm=algorithm, seed=2, backend=warm)
    assert default.config["evaluation"]["evaluated"] is False
    assert "objective" not in default.history.columns
    released = [c for c in default.history.columns if c not in TIMING]
    pd.testing.assert_frame_equal(default.history[released], serial.history[released], check_exact=True)


def test_blocks_are_contiguous_and_in_node_order():
    assert RayBackend(nodes_per_actor=2)._layout(5) == [[0, 1], [2, 3], [4]]
    assert RayBackend()._layout(5) == [[0, 1, 2], [3, 4]]  # this module's Ray has 2 CPUs
    assert RayBackend()._layout(1) == [[0]]
    assert RayBackend()._layout(4, [5.0, 1.0, 1.0, 1.0]) == [[0], [1, 2, 3]]  # balanced by public work


class CrashOnce:
    """A gradient that kills its own process at its ``at``-th call while ``flag`` exists (removing it first),
    so the first Ray run dies mid-round and a rerun does not."""

    def __init__(self, gradient, flag: str, at: int) -> None:
        self.gradient, self.flag, self.at, self.calls = gradient, flag, at, 0

    def __call__(self, u):
        self.calls += 1
        if self.calls == self.at and os.path.exists(self.flag):
            os.remove(self.flag)
            os._exit(1)
        return self.gradient(u)


def test_dead_actor_raises_backend_error_and_resume_equals_uninterrupted(tmp_path, warm):
    flag = tmp_path / "crash"

    def agents():  # fresh call counters each run
        out = toy(3)
        out[2].gradient = CrashOnce(out[2].gradient, str(flag), at=3)  # J = 1: one gradient per round
        return out

    kwargs = dict(algorithm=cvxdp.LinearizedADMM(rounds=5),
                  privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=5)
    uninterrupted = cvxdp.solve(agents(), **kwargs)  # in-process, no flag: no crash

    flag.touch()
    ckpt = tmp_path / "ckpt"
    backend = RayBackend()  # blocks [agent0, agent1], [agent2]
    with pytest.raises(BackendError, match=r"agent\(s\) 'agent2' died in round 3 \(method 'step'\)") as info:
        cvxdp.solve(agents(), backend=backend, checkpoint=ckpt, evaluate=True, **kwargs)
    assert info.value.agents == ("agent2",) and info.value.round == 3 and info.value.method == "step"
    assert not flag.exists()  # the crash happened
    with open(ckpt / "checkpoint.pkl", "rb") as fh:
        assert pickle.load(fh)["loop"].t == 2  # the last checkpoint (round 2) is intact
    assert backend.actors == [] and ray.is_initialized()  # closed: actors killed, this module's Ray kept

    shutil.copytree(ckpt, tmp_path / "ckpt_serial")
    resumed = cvxdp.solve(agents(), backend=warm, checkpoint=ckpt, evaluate=True, **kwargs)
    assert_same_run(uninterrupted, resumed)
    # the backend is not part of the run's fingerprint: the same checkpoint resumes on the serial backend too
    resumed_serial = cvxdp.solve(agents(), backend="serial", checkpoint=tmp_path / "ckpt_serial", **kwargs)
    assert_same_run(uninterrupted, resumed_serial)


def test_node_exceptions_keep_their_class_and_message(warm):
    x = cp.Variable(2)
    nan_value = cvxdp.Agent("nan", cp.sum_squares(x - 1), [cp.abs(x) <= 1], shared={"x": x},
                            value=lambda u: float("nan"))
    y = cp.Variable(2)
    empty = cvxdp.Agent("empty", cp.sum_squares(y), [y >= 1, y <= -1], shared={"x": y})
    z = cp.Variable(2)
    fine = cvxdp.Agent("fine", cp.sum_squares(z), [cp.abs(z) <= 1], shared={"x": z})
    algorithm = cvxdp.LinearizedADMM(rounds=2)
    for agents, kind in (([fine, nan_value], DeclarationError), ([fine, empty], InfeasibleAgentError)):
        with pytest.raises(kind) as serial:
            cvxdp.solve(agents, algorithm=algorithm, seed=0)
        with pytest.raises(kind) as remote:
            cvxdp.solve(agents, algorithm=algorithm, seed=0, backend=warm, evaluate=True)
        assert type(remote.value) is type(serial.value)
        assert str(remote.value) == str(serial.value)
    assert "in round 1" in str(remote.value) or "empty" in str(remote.value)


def test_small_runs_go_serial_and_say_why_threshold_zero_forces_ray(caplog, capsys):
    agents = toy(3)
    total = sum(a.layout.size for a in agents)  # the public work estimates the families give (21 here)
    kwargs = dict(algorithm=cvxdp.LinearizedADMM(rounds=3), seed=4, evaluate=True)
    serial = cvxdp.solve(agents, **kwargs)
    for threshold, expect_ray in ((1_000, False), (total + 1, False), (total, True), (0, True)):
        backend = RayBackend(min_variables=threshold)
        seen = []  # during the run: how many actors, and the note the progress line shows
        caplog.clear()
        with caplog.at_level("INFO", logger="cvxdp.run.ray"):
            result = cvxdp.solve(agents, backend=backend, progress=True,
                                 callback=lambda t, row, b=backend, out=seen: out.append((b.workers, b.placement)),
                                 **kwargs)
        assert_same_run(serial, result)
        notes = [r.getMessage() for r in caplog.records if r.name == "cvxdp.run.ray"]
        bar = capsys.readouterr().err
        if expect_ray:
            assert seen == [(2, None)] * 3 and notes == [], threshold
            assert "variables <" not in bar
        else:
            assert seen == [(0, f"serial: {total} variables < ray min_variables {threshold:,}")] * 3
            assert notes == [f"ray: 3 nodes, {total} variables in all < min_variables={threshold:,}: running serial (Ray's "
                             "overhead, ~5 ms per round, would dominate; RayBackend(min_variables=0) forces Ray)"]
            assert f"serial: {total} variables < ray min_variables {threshold:,}" in bar  # the progress line
        assert backend.placement is None and backend.actors == []  # closed


def test_an_address_below_the_threshold_is_said_to_be_unused_and_why():
    """Issue 51: --ray-address on a run below min_variables ran serially without a word. Now a warning names the
    address, the run's size, the threshold and how to force Ray; nothing is joined (the address is never probed)."""
    agents = toy(3)
    total = sum(a.layout.size for a in agents)
    kwargs = dict(algorithm=cvxdp.LinearizedADMM(rounds=2), seed=4, evaluate=True)
    serial = cvxdp.solve(agents, **kwargs)
    backend = RayBackend(address="127.0.0.1:1", min_variables=1_000)  # nothing listens there
    with pytest.warns(UserWarning) as caught:
        result = cvxdp.solve(agents, backend=backend, **kwargs)
    assert_same_run(serial, result)
    said = [str(w.message) for w in caught if "not used" in str(w.message)]
    assert said == [f"The Ray cluster address '127.0.0.1:1' is not used: this run's 3 nodes hold {total} variables "
                    "in all, fewer than ray min_variables = 1,000, so they run serially in this process (Ray's "
                    "transport, ~5 ms per round, would cost more than its actors save; the numbers are the same "
                    "either way). To run on Ray anyway, set ray_min_variables = 0 in [run] "
                    "(RayBackend(min_variables=0), or the environment variable CVXDP_RAY_MIN_VARIABLES=0)."]
    with pytest.warns(UserWarning, match=r"^The CPUs asked for \(num_cpus=2\) are not used: this run.s 3 nodes"):
        cvxdp.solve(agents, backend=RayBackend(num_cpus=2, min_variables=1_000), **kwargs)


def test_min_variables_default_and_environment(monkeypatch):
    monkeypatch.delenv(MIN_VARIABLES_ENV)
    assert RayBackend().min_variables == MIN_VARIABLES == 1_000
    monkeypatch.setenv(MIN_VARIABLES_ENV, "50000")
    assert RayBackend().min_variables == 50_000
    assert RayBackend(min_variables=7).min_variables == 7  # the parameter wins
    monkeypatch.setenv(MIN_VARIABLES_ENV, "many")
    with pytest.raises(InvalidParameterError, match="CVXDP_RAY_MIN_VARIABLES .* must be an int >= 0. Got 'many'"):
        RayBackend()
    with pytest.raises(InvalidParameterError, match="'min_variables' parameter of RayBackend"):
        RayBackend(min_variables=-1)
    with pytest.raises(InvalidParameterError, match="'min_variables' parameter of RayBackend"):
        RayBackend(min_variables=2.5)


def test_ray_backend_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match="'num_cpus' parameter of RayBackend"):
        RayBackend(num_cpus=0)
    with pytest.raises(InvalidParameterError, match="'nodes_per_actor' parameter of RayBackend"):
        RayBackend(nodes_per_actor=1.5)
    with pytest.raises(InvalidParameterError, match="'address' parameter of RayBackend"):
        RayBackend(address="")
    with pytest.raises(InvalidParameterError, match="serial backend takes no options"):
        cvxdp.run.get_backend("serial", num_cpus=2)
    assert isinstance(cvxdp.run.get_backend("ray", nodes_per_actor=3), RayBackend)


def test_unreachable_ray_address_fails_fast_naming_it(tmp_path):
    # issue 38: Ray alone retries an address where nothing listens forever. A fresh process (this module's Ray is
    # already initialised, which a backend reuses); the subprocess timeout only turns a hang into a failure.
    cmd = [sys.executable, "-m", "cvxdp.cli.main", "run", str(CASES / "toy.toml"), "--rounds", "2",
           "--out", str(tmp_path / "out"), "--backend", "ray", "--ray-address", "127.0.0.1:1", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Could not join the Ray cluster at '127.0.0.1:1': nothing answered at 127.0.0.1 port 1" in done.stderr \
        + done.stdout, done.stderr[-2000:]
    with pytest.raises(InvalidParameterError, match="'connect_timeout' parameter of RayBackend"):
        RayBackend(connect_timeout=0)


def test_unpicklable_agent_refused_before_any_actor_starts_naming_agent_and_attribute(monkeypatch):
    import threading

    agents = toy(3)
    agents[1].cache = {"lock": threading.Lock()}  # e.g. a resource opened on the agent
    started = []
    monkeypatch.setattr(RayBackend, "_gather", lambda self, method, refs, round: started.append(method))
    backend = RayBackend()
    with pytest.raises(BackendError) as error:
        cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=2), seed=0, backend=backend)
    message = str(error.value)
    assert message.startswith(f"Agent {agents[1].name!r} cannot be sent to a Ray actor: agent.cache['lock'] (lock) "
                              "cannot be pickled"), message
    assert "cannot pickle '_thread.lock'" in message and "no actor was started" in message
    assert error.value.agents == (agents[1].name,) and started == [] and backend.actors == []


def test_cli_backend_ray_matches_serial(tmp_path):
    from click.testing import CliRunner

    from cvxdp.cli.main import cli

    def run(*extra):
        out = tmp_path / "-".join(("run",) + extra)
        result = CliRunner().invoke(cli, ["run", str(CASES / "toy.toml"), "--mechanism", "ObjG", "--epsilon", "1",
                                          "--rounds", "4", "--seed", "3", "--out", str(out), "--json", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output.strip().splitlines()[-1]), out

    (serial, _), (remote, out) = run(), run("--backend", "ray", "--ray-cpus", "2")
    assert json.loads((out / "result.json").read_text())["config"]["backend"] == "RayBackend"
    for key in ("objective", "consensus_residual", "noise_magnitude", "privacy"):
        assert remote[key] == serial[key], key
    bad = CliRunner().invoke(cli, ["run", "toy", "--ray-cpus", "2", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "go with --backend ray" in bad.output


def test_case_file_run_backend_ray(tmp_path):
    """The [run] table builds the backend (run_case passes make_backend(case.run) to solve; the CLI test above
    runs that path end to end)."""
    from cvxdp.config.build import load_case, make_backend
    from cvxdp.run import SerialBackend

    text = (CASES / "toy.toml").read_text().replace('accountant = "pld"', 'accountant = "pld"\n'
                                                    'backend = "ray"\nray_cpus = 2\nray_address = "auto"')
    (tmp_path / "toy_ray.toml").write_text(text)
    backend = make_backend(load_case(tmp_path / "toy_ray.toml").run)

    assert isinstance(backend, RayBackend) and (backend.num_cpus, backend.address) == (2, "auto")
    assert isinstance(make_backend({}), SerialBackend)
    with pytest.raises(ConfigError, match=r"'backend' entry of \[run\] must be one of 'serial', 'ray'"):
        make_backend({"backend": "dask"})
    with pytest.raises(ConfigError, match=r"ray_cpus apply to backend = \"ray\""):
        make_backend({"ray_cpus": 2})
    # the error names the key the user wrote, not the constructor's parameter (issue 38)
    with pytest.raises(ConfigError, match=r"\[run\]: The 'ray_cpus' key must be an int") as error:
        make_backend({"backend": "ray", "ray_cpus": 0})
    assert "num_cpus" not in str(error.value)
    with pytest.raises(ConfigError, match=r"\[run\]: The 'ray_address' key must be") as error:
        make_backend({"backend": "ray", "ray_address": ""})
    assert "'address'" not in str(error.value)
    # the auto-serial threshold: a [run] key too (issue 37)
    assert make_backend({"backend": "ray", "ray_min_variables": 0}).min_variables == 0
    assert make_backend({"backend": "ray", "ray_min_variables": 50_000}).min_variables == 50_000
    with pytest.raises(ConfigError, match=r"\[run\]: The 'ray_min_variables' key must be an int"):
        make_backend({"backend": "ray", "ray_min_variables": -1})
    with pytest.raises(ConfigError, match=r"ray_min_variables apply to backend = \"ray\""):
        make_backend({"ray_min_variables": 0})



def test_cli_study_backend_ray(tmp_path):
    from click.testing import CliRunner

    from cvxdp.cli.main import cli

    (tmp_path / "toy.toml").write_text((CASES / "toy.toml").read_text())
    (tmp_path / "study.toml").write_text('[study]\ncase = "toy.toml"\nmechanisms = ["ObjG"]\nepsilons = [1.0]\n'
                                         'rounds = 2\nbaseline = false\n')
    result = CliRunner().invoke(cli, ["study", str(tmp_path / "study.toml"), "--out", str(tmp_path / "out"),
                                      "--backend", "ray", "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    (cell,) = (tmp_path / "out" / "runs").iterdir()
    assert json.loads((cell / "result.json").read_text())["config"]["backend"] == "RayBackend"
    # every family runs on the one loop, so a graph (M-ADMM) case runs on Ray too
    graph = CliRunner().invoke(cli, ["run", str(CASES / "erm_madmm.toml"), "--out", str(tmp_path / "g"),
                                     "--rounds", "2", "--seed", "0", "--backend", "ray", "--no-progress", "--json"])
    assert graph.exit_code == 0, graph.output
    assert json.loads((tmp_path / "g" / "result.json").read_text())["config"]["backend"] == "RayBackend"


def test_study_cells_share_one_ray_instance_and_its_actors(tmp_path, monkeypatch):
    # a Ray study starts Ray and its worker processes once (cvxdp.config.build.StudyBackends), not in every cell, and
    # gives the numbers of a serial study
    from cvxdp.run.ray import RayBackend
    from cvxdp.studies.grid import run_study

    made, idle_at_start = [], []
    init, start = RayBackend.__init__, RayBackend.start

    def spy_init(self, **options):
        made.append((self, options))
        init(self, **options)

    def spy_start(self, specs, agents, seeds):
        idle_at_start.append(len(self._idle))
        start(self, specs, agents, seeds)

    monkeypatch.setattr(RayBackend, "__init__", spy_init)
    monkeypatch.setattr(RayBackend, "start", spy_start)
    (tmp_path / "toy.toml").write_text((CASES / "toy.toml").read_text())
    study = tmp_path / "study.toml"
    study.write_text('[study]\ncase = "toy.toml"\nmechanisms = ["ObjG"]\nepsilons = [1.0, 2.0, 4.0]\nrounds = 3\n'
                     'baseline = false\n')

    run_study(study, tmp_path / "ray", progress=False, run={"backend": "ray"})
    run_study(study, tmp_path / "serial", progress=False)

    assert len(made) == 1 and made[0][1]["keep_actors"] is True
    assert idle_at_start[0] == 0 and len(idle_at_start) == 3 and all(n > 0 for n in idle_at_start[1:])
    backend = made[0][0]
    assert backend.actors == [] and backend._idle == []  # the study's end shut them down
    ray_rows, serial_rows = (pd.read_csv(tmp_path / d / "results.csv") for d in ("ray", "serial"))
    cols = ["cell", "objective", "consensus_residual", "eps_rdp"]
    pd.testing.assert_frame_equal(ray_rows[cols], serial_rows[cols])
