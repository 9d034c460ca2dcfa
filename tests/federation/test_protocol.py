"""The federation's protocol in one process: every request answered by a long-lived party built from its own folder
(as ``cvxdp party`` runs it), through the same bytes as the wire: honest runs, what the coordinator holds, faults,
resume, restarts and the lifetime ledger. tests/federation/test_malicious.py plays the coordinator as an attacker;
tests/contract/test_families.py checks every algorithm and mechanism this way; tests/federation/test_flower.py runs
real Flower processes."""

from __future__ import annotations

import json
import pickle

import dp_accounting
import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import BackendError, CvxdpError, PartyRefusedError
from cvxdp.federation.coordinator import LocalChannel, run_federation
from cvxdp.federation.parties import party_folders
from cvxdp.federation.party import Party
from cvxdp.federation.policy import LEDGER_FILE
from cvxdp.privacy import gaussian_sigma_analytic

PRIVATE = ("objective", "max_violation", "noise_magnitude", "solver_time", "polished_objective")
ALGORITHM = {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 4}
PRIVACY = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}


def _setup(tmp_path, *, seed=3, budget=None, privacy=PRIVACY):
    """Three toy agents as three parties (objective perturbation, 4 rounds of 2 local updates) and the plan."""
    from cvxdp_models.toy import make_agents

    agents = make_agents(agents=3, seed=1)
    files = party_folders(agents, tmp_path / "parties", seed=seed, budget=budget, privacy=privacy)
    plan = {"name": "toy", "algorithm": dict(ALGORITHM), "privacy": dict(privacy), "run": {"seed": seed},
            "agents": [a.name for a in agents], "checkpoint": str(tmp_path / "checkpoint")}
    return agents, files, plan


def _released(history: pd.DataFrame) -> pd.DataFrame:
    return history.drop(columns=[c for c in (*PRIVATE, "wall_time") if c in history.columns]).select_dtypes("number")


def _charges(file) -> list[dict]:
    lines = (file.parent / "state" / LEDGER_FILE).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "charge"]


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


def test_an_honest_federation_equals_the_simulation_bit_for_bit(tmp_path):
    agents, files, plan = _setup(tmp_path)
    fed = run_federation(plan, LocalChannel(files))
    sim = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, local_updates=2, rounds=4),
                      privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=3)
    pd.testing.assert_frame_equal(_released(fed.history), _released(sim.history)[_released(fed.history).columns],
                                  check_exact=True)
    np.testing.assert_array_equal(fed.solution["x"], sim.solution["x"])
    assert fed.privacy["worst"] == sim.privacy["worst"]


def test_without_seeds_two_federations_differ(tmp_path):
    runs = []
    for k in range(2):
        _, files, plan = _setup(tmp_path / str(k), seed=None)
        runs.append(run_federation(plan, LocalChannel(files)))
    assert not np.array_equal(runs[0].solution["x"], runs[1].solution["x"])
    assert runs[0].config["seed"] is None


def test_each_partys_ledger_is_its_own_independent_accounting(tmp_path):
    """Every round's release is charged once at the party, and what it spent is what an independent composition of
    J = 2 Gaussian calls per round gives (the party calibrates its own noise from its own sensitivity)."""
    _, files, plan = _setup(tmp_path)
    run_federation(plan, LocalChannel(files))
    multiplier = gaussian_sigma_analytic(1.0, 1.0, 1e-6)  # sigma / Delta of one call at epsilon 1, delta 1e-6
    for file in files:
        charges = _charges(file)
        assert [r["round"] for r in charges] == [1, 2, 3, 4] and all(r["count"] == 2 for r in charges)
        assert all(r["event"]["noise_multiplier"] == pytest.approx(multiplier, rel=1e-9) for r in charges)
        summary = Party(file, lock=False).ledger_report()["agents"][file.parent.name]
        assert summary["spent"]["basic"][0] == pytest.approx(8.0)
        accountant = dp_accounting.pld.PLDAccountant()
        accountant.compose(dp_accounting.GaussianDpEvent(multiplier), 8)
        assert summary["spent"]["pld"][0] == pytest.approx(accountant.get_epsilon(1e-6), rel=1e-3)


def test_a_partys_lifetime_budget_stops_a_run_and_every_later_one(tmp_path):
    _, files, plan = _setup(tmp_path, budget=(2.0, 1e-4), seed=None)  # 2 calls of eps 1 per round, under PLD
    fed = run_federation(plan, LocalChannel(files))
    done = len(fed.history)
    assert fed.stop_reason == "budget" and 1 <= done < 4
    assert fed.config["stopped_by"]["party"] == "agent0" and fed.config["stopped_by"]["round"] == done + 1
    assert fed.config["budget"] is None  # the coordinator itself had none
    party = Party(files[0], lock=False)
    spent = party.ledger_report()["agents"]["agent0"]["spent"]["pld"][0]
    assert spent <= 2.0 * (1 + 1e-9)  # never past its budget ...
    event = dp_accounting.GaussianDpEvent(gaussian_sigma_analytic(1.0, 1.0, 1e-6))
    more = dp_accounting.pld.PLDAccountant()
    more.compose(event, 2 * (done + 1))
    assert more.get_epsilon(1e-4) > 2.0  # ... and the next round would have passed it
    before = len(_charges(files[0]))
    again = {**plan, "run_id": "another", "checkpoint": str(tmp_path / "checkpoint-2")}  # a new run on the same data
    try:
        result = run_federation(again, LocalChannel(files))
    except PartyRefusedError as exc:  # refused at its start: the budget is spent
        assert exc.reason == "budget"
    else:  # or at its first round
        assert result.stop_reason == "budget" and len(result.history) == 0
    assert len(_charges(files[0])) == before  # nothing more released


def test_a_failing_party_stops_the_run_with_one_line_naming_it_and_the_round(tmp_path, monkeypatch):
    _, files, plan = _setup(tmp_path)
    step = Party._step

    def broken(self, body):
        if self.name == "agent1" and body["round"] == 2:
            raise RuntimeError("disk on fire")
        return step(self, body)

    monkeypatch.setattr(Party, "_step", broken)
    with pytest.raises(BackendError, match=r"^Party 'agent1' failed in round 2: RuntimeError: disk on fire$"):
        run_federation(plan, LocalChannel(files))


def test_a_rerun_resumes_equals_the_uninterrupted_run_and_charges_each_release_once(tmp_path, monkeypatch):
    _, files, plan = _setup(tmp_path / "a")
    full = run_federation(plan, LocalChannel(files))
    _, files, plan = _setup(tmp_path / "b")
    step = Party._step

    def crash(self, body):
        if body["round"] == 3 and self.name == "agent2":
            raise RuntimeError("power cut")
        return step(self, body)

    with monkeypatch.context() as m:
        m.setattr(Party, "_step", crash)
        with pytest.raises(BackendError, match="agent2"):
            run_federation(plan, LocalChannel(files))
    resumed = run_federation(plan, LocalChannel(files))  # every party process started again
    pd.testing.assert_frame_equal(_released(resumed.history), _released(full.history), check_exact=True)
    np.testing.assert_array_equal(resumed.solution["x"], full.solution["x"])
    for file in files:  # agents 0 and 1 released round 3 before the crash: answered again from their records
        assert [r["round"] for r in _charges(file)] == [1, 2, 3, 4]


def test_a_party_killed_after_releasing_resumes_from_its_disk(tmp_path, monkeypatch):
    """The coordinator dies after every party released round 3 but before its own checkpoint of it, and every party
    process is started again: the rerun asks round 3 again and gets the recorded releases (no new draw, no new
    charge), then goes on; the result equals the uninterrupted run's and the evaluation has each round once."""
    _, files, plan = _setup(tmp_path / "a")
    full = run_federation(plan, LocalChannel(files))
    _, files, plan = _setup(tmp_path / "b")
    from cvxdp.run import loop

    save = loop.save_checkpoint

    def die_at_3(path, payload):
        if payload["loop"].t == 3:
            raise KeyboardInterrupt
        return save(path, payload)

    channel = LocalChannel(files)
    with monkeypatch.context() as m:
        m.setattr(loop, "save_checkpoint", die_at_3)
        with pytest.raises(KeyboardInterrupt):
            run_federation(plan, channel)
    for name in channel.parties():
        channel.restart(name)
    resumed = run_federation(plan, channel)
    pd.testing.assert_frame_equal(_released(resumed.history), _released(full.history), check_exact=True)
    for file in files:
        assert [r["round"] for r in _charges(file)] == [1, 2, 3, 4]
        (run,) = (file.parent / "state").glob("run-*")
        rounds = pd.read_csv(run / "evaluation.csv")["round"].tolist()
        assert rounds == [1, 2, 3, 4]


def test_a_party_whose_declaration_changed_is_refused_on_resume(tmp_path, monkeypatch):
    agents, files, plan = _setup(tmp_path)
    step = Party._step
    with monkeypatch.context() as m:
        m.setattr(Party, "_step", lambda self, b: (_ for _ in ()).throw(RuntimeError("x")) if b["round"] == 2
                  else step(self, b))
        with pytest.raises(BackendError):
            run_federation(plan, LocalChannel(files))
    changed = agents[1]
    changed.sensitivity = cvxdp.Sensitivity(l2=1.0, relation="changed")
    pickle.dump([changed], open(files[1].parent / "agents.pkl", "wb"))
    with pytest.raises(CvxdpError, match="agent .agent1. declaration"):
        run_federation(plan, LocalChannel(files))


def test_feasibility_bits_come_only_from_parties_that_allow_them_and_are_stated(tmp_path):
    _, files, plan = _setup(tmp_path)
    plain = run_federation(plan, LocalChannel(files))
    assert all("feasible" not in r for r in plain.config["party_reports"].values()) and plain.privacy["guarantee"]
    for file in files:  # a second run: another research seed (a seed's noise stream serves one run only)
        file.write_text(file.read_text().replace("seed = 3", "seed = 4"))
    text = files[1].read_text().replace("report_feasibility = false", "report_feasibility = true")
    files[1].write_text(text)
    told = run_federation({**plan, "run_id": "second", "checkpoint": str(tmp_path / "checkpoint2")},
                          LocalChannel(files))
    reports = told.config["party_reports"]
    assert set(reports["agent1"]["feasible"]) == {"agent1"} and "feasible" not in reports["agent0"]
    assert told.privacy["guarantee"] is False
    assert any("'agent1' released whether" in n["reason"] for n in told.privacy["notes"])
    notes = Party(files[1], lock=False).ledger_report()["notes"]  # the lifetime ledger keeps it too
    assert any("released whether" in n["reason"] and n["voids"] for n in notes)


def test_a_party_keeps_one_folder_per_run_and_answers_a_finished_run_again_from_its_records(tmp_path):
    agents, files, plan = _setup(tmp_path)
    first = run_federation(plan, LocalChannel(files))
    other = {**plan, "algorithm": {"name": "admm", "rho": 1.0, "rounds": 2}, "privacy": {"mechanism": "none"},
             "checkpoint": str(tmp_path / "checkpoint-admm")}
    with pytest.raises(PartyRefusedError, match="its policy runs 'ObjG'"):  # a private party never runs admm
        run_federation(other, LocalChannel(files))
    charged = [len(_charges(f)) for f in files]
    again = run_federation({**plan, "checkpoint": None}, LocalChannel(files))  # the same run, without a checkpoint
    pd.testing.assert_frame_equal(_released(again.history), _released(first.history), check_exact=True)
    assert [len(_charges(f)) for f in files] == charged  # replayed from the records: nothing new released
    for file in files:
        assert len(list((file.parent / "state").glob("run-*"))) == 1


def test_a_runs_token_names_its_configuration_and_every_declaration(tmp_path):
    """Two runs that differ only in one party's declaration (or in their run id) are two runs at every party: a
    party never answers one from the other's records."""
    agents, files, plan = _setup(tmp_path / "a", seed=None)
    tokens = []
    for run_id, sensitivity in (("", None), ("", 0.2), ("other", None)):
        if sensitivity is not None:
            changed = agents[2]
            changed.sensitivity = cvxdp.Sensitivity(l2=sensitivity, relation="changed")
            pickle.dump([changed], open(files[2].parent / "agents.pkl", "wb"))
        run_federation({**plan, "checkpoint": None, "run_id": run_id, "algorithm": {**ALGORITHM, "rounds": 1}},
                       LocalChannel(files))
        tokens.append({p.name.removeprefix("run-") for p in (files[0].parent / "state").glob("run-*")})
    first, second, third = tokens[0], tokens[1] - tokens[0], tokens[2] - tokens[1]
    assert len(first) == 1 and len(second) == 1 and len(third) == 1
