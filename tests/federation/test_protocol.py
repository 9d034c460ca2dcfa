"""The federation's protocol in one process: every request answered by a party built afresh from its own folder (as a
Flower ClientApp does, one process per message), through the same bytes as the wire: the party's own budget and
checks, what the coordinator holds, faults, resume. tests/contract/test_families.py checks that every registered
algorithm and mechanism gives the simulation's released numbers this way; tests/federation/test_flower.py runs real
Flower processes."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import BackendError, CvxdpError, PartyRefusedError
from cvxdp.federation.coordinator import LocalChannel, run_federation
from cvxdp.federation.parties import party_folders
from cvxdp.federation.party import Party
from cvxdp.federation.wire import WireError, dumps, loads

PRIVATE = ("objective", "max_violation", "noise_magnitude", "solver_time", "polished_objective")


ALGORITHM = {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 4}
PRIVACY = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}


def _setup(tmp_path, *, seed=3, budget=None):
    """Three toy agents as three parties (objective perturbation, 4 rounds) and the coordinator's plan."""
    from cvxdp_models.toy import make_agents

    agents = make_agents(agents=3, seed=1)
    files = party_folders(agents, tmp_path / "parties", seed=seed, budget=budget, privacy=PRIVACY)
    plan = {"name": "toy", "algorithm": dict(ALGORITHM), "privacy": dict(PRIVACY), "run": {"seed": seed},
            "agents": [a.name for a in agents], "checkpoint": str(tmp_path / "checkpoint")}
    return agents, files, plan


def _released(history: pd.DataFrame) -> pd.DataFrame:
    return history.drop(columns=[c for c in (*PRIVATE, "wall_time") if c in history.columns]).select_dtypes("number")


def test_the_coordinator_holds_released_values_only(tmp_path):
    agents, files, plan = _setup(tmp_path, seed=None)
    fed = run_federation(plan, LocalChannel(files))
    assert fed.local == {} and fed.solution_violation is None and fed.polished is None
    assert not set(PRIVATE) & set(fed.history.columns)
    assert fed.config["evaluation"]["evaluated"] is False
    saved = tmp_path / "result"
    fed.save(saved)
    assert not (saved / "local.npz").exists()
    checkpoint = pickle.load(open(tmp_path / "checkpoint" / "checkpoint.pkl", "rb"))
    assert checkpoint["entropy"] is None and all(set(s) == {"round"} for s in checkpoint["nodes"])
    for agent in agents:  # what the parties computed on their own data stays in their own folders
        (state,) = (tmp_path / "parties" / agent.name / "state").glob("run-*")  # one folder per run
        assert (state / "evaluation.csv").exists() and (state / "local.npz").exists()


def test_without_seeds_two_federations_differ(tmp_path):
    runs = []
    for k in range(2):
        _, files, plan = _setup(tmp_path / str(k), seed=None)
        runs.append(run_federation(plan, LocalChannel(files)))
    assert not np.array_equal(runs[0].solution["x"], runs[1].solution["x"])
    assert runs[0].config["seed"] is None


def test_a_partys_own_budget_stops_a_run_the_coordinator_would_continue(tmp_path):
    _, files, plan = _setup(tmp_path, budget=(2.0, 1e-4))  # 2 calls of eps 1 per round, under PLD
    fed = run_federation(plan, LocalChannel(files))
    done = len(fed.history)
    assert fed.stop_reason == "budget" and 1 <= done < 4
    assert fed.config["stopped_by"]["party"] == "agent0" and fed.config["stopped_by"]["round"] == done + 1
    assert fed.config["budget"] is None  # the coordinator itself had none


def test_a_node_refuses_noise_below_its_own_sensitivity(tmp_path, monkeypatch):
    from cvxdp.federation import coordinator
    from cvxdp_models.toy import make_agents

    files = party_folders(make_agents(agents=2, seed=1), tmp_path / "parties", seed=0)
    honest = coordinator.declarations

    def lying(hello, order):  # a coordinator that calibrates its noise to a tenth of the declared sensitivity
        decls, owners, budgets = honest(hello, order)
        for d in decls:
            d.sensitivity = cvxdp.Sensitivity(l2=d.sensitivity.l2 / 10, relation="a lie")
        return decls, owners, budgets

    monkeypatch.setattr(coordinator, "declarations", lying)
    plan = {"name": "lie", "algorithm": ALGORITHM, "privacy": PRIVACY, "run": {}, "agents": None}
    with pytest.raises(PartyRefusedError, match="agent0.*refuses round 1.*sensitivity"):
        run_federation(plan, LocalChannel(files))


def test_a_failing_party_stops_the_run_with_one_line_naming_it_and_the_round(tmp_path, monkeypatch):
    _, files, plan = _setup(tmp_path)
    step = Party._step

    def broken(self, payload):
        if self.file.name == "agent1" and payload["round"] == 2:
            raise RuntimeError("disk on fire")
        return step(self, payload)

    monkeypatch.setattr(Party, "_step", broken)
    with pytest.raises(BackendError, match=r"^Party 'agent1' failed in round 2: RuntimeError: disk on fire$"):
        run_federation(plan, LocalChannel(files))


def test_a_rerun_resumes_and_equals_the_uninterrupted_run(tmp_path, monkeypatch):
    _, files, plan = _setup(tmp_path / "a")
    full = run_federation(plan, LocalChannel(files))
    _, files, plan = _setup(tmp_path / "b")
    step = Party._step

    def crash(self, payload):
        if payload["round"] == 3 and self.file.name == "agent2":
            raise RuntimeError("power cut")
        return step(self, payload)

    with monkeypatch.context() as m:
        m.setattr(Party, "_step", crash)
        with pytest.raises(BackendError, match="agent2"):
            run_federation(plan, LocalChannel(files))
    resumed = run_federation(plan, LocalChannel(files))
    pd.testing.assert_frame_equal(_released(resumed.history), _released(full.history), check_exact=True)
    np.testing.assert_array_equal(resumed.solution["x"], full.solution["x"])


def test_a_party_whose_declaration_changed_is_refused_on_resume(tmp_path, monkeypatch):
    agents, files, plan = _setup(tmp_path)
    step = Party._step
    with monkeypatch.context() as m:
        m.setattr(Party, "_step", lambda self, p: (_ for _ in ()).throw(RuntimeError("x")) if p["round"] == 2
                  else step(self, p))
        with pytest.raises(BackendError):
            run_federation(plan, LocalChannel(files))
    changed = agents[1]
    changed.sensitivity = cvxdp.Sensitivity(l2=1.0, relation="changed")
    pickle.dump([changed], open(files[1].parent / "agents.pkl", "wb"))
    with pytest.raises(CvxdpError, match="agent .agent1. declaration"):
        run_federation(plan, LocalChannel(files))


def test_the_wire_reads_cvxdp_messages_only():
    assert loads(dumps({"x": np.arange(3.0)}))["x"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(WireError, match=r"(posix|os)\.system"):
        import os

        loads(pickle.dumps(os.system))
    with pytest.raises(WireError, match="unreadable"):
        loads(b"not a pickle")
    refusal = loads(dumps(PartyRefusedError("no", party="p", round=3)))
    assert (refusal.party, refusal.round, refusal.reason) == ("p", 3, "budget")
    assert isinstance(refusal, CvxdpError)


def test_feasibility_bits_come_only_from_parties_that_allow_them_and_are_stated(tmp_path):
    _, files, plan = _setup(tmp_path)
    plain = run_federation(plan, LocalChannel(files))
    assert all("feasible" not in r for r in plain.config["party_reports"].values()) and plain.privacy["guarantee"]
    text = files[1].read_text().replace("report_feasibility = false", "report_feasibility = true")
    files[1].write_text(text)
    plan["checkpoint"] = str(tmp_path / "checkpoint2")
    told = run_federation(plan, LocalChannel(files))
    reports = told.config["party_reports"]
    assert set(reports["agent1"]["feasible"]) == {"agent1"} and "feasible" not in reports["agent0"]
    assert told.privacy["guarantee"] is False
    assert any("'agent1' released whether" in n["reason"] for n in told.privacy["notes"])
    (run_dir,) = [d for d in (files[1].parent / "state").glob("run-*") if (d / "ledger.json").is_file()
                  and "released whether" in (d / "ledger.json").read_text()]
    assert run_dir.is_dir()


def test_a_party_keeps_one_folder_per_run_and_takes_part_in_several(tmp_path):
    agents, files, plan = _setup(tmp_path)
    first = run_federation(plan, LocalChannel(files))
    other = {**plan, "algorithm": {"name": "admm", "rho": 1.0, "rounds": 2}, "privacy": {"mechanism": "none"},
             "checkpoint": str(tmp_path / "checkpoint-admm")}
    second = run_federation(other, LocalChannel(files))
    assert (len(first.history), len(second.history)) == (4, 2)
    for file in files:  # each run's state, ledger and evaluation apart
        runs = sorted((file.parent / "state").glob("run-*"))
        assert len(runs) == 2 and all((r / "ledger.json").is_file() for r in runs)
    again = run_federation({**plan, "checkpoint": None}, LocalChannel(files))  # the first run, afresh
    pd.testing.assert_frame_equal(_released(again.history), _released(first.history), check_exact=True)
