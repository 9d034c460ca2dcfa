"""The federation's protocol in one process: every request answered by a party built afresh from its own folder (as a
Flower ClientApp does, one process per message), through the same bytes as the wire. Every family, the party's own
budget, what the coordinator holds, faults, resume (tests/federation/test_flower.py runs real Flower processes)."""

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


def _toy():
    from cvxdp_models.toy import make_agents

    return make_agents(agents=3, seed=1)


def _erm():
    from cvxdp_models.erm import make_erm

    return make_erm({"nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 60}).agents


def _sharing():
    from cvxdp_models.vertical import synthetic_parties

    return synthetic_parties(12, 2, 2, seed=0)


CASES = {
    "ObjG": (_toy, {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 4},
             {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}),
    "OutL": (_toy, {"name": "ladmm", "rho": 1.0, "eta": 4.0, "local_updates": 2, "rounds": 4},
             {"mechanism": "OutL", "epsilon": 1.0}),
    "admm": (_toy, {"name": "admm", "rho": 1.0, "rounds": 4}, {"mechanism": "none"}),
    "madmm_pp": (_erm, {"name": "madmm", "graph": "complete", "rounds": 4}, {"mechanism": "gamma", "alpha": 3.0}),
    "mradmm_pp": (_erm, {"name": "mradmm", "graph": "complete", "rounds": 4}, {"mechanism": "gamma", "alpha": 3.0}),
    "sharing": (_sharing, {"name": "sharing", "rho": 1.0, "lam": 0.1, "epochs": 4},
                {"mechanism": "OutG", "epsilon": 1.0, "delta": 1e-5}),
}


def _setup(tmp_path, name, *, seed=3, budget=None, rounds=None):
    build, algorithm, privacy = CASES[name]
    built = build()
    agents, labels = built if isinstance(built, tuple) else (built, None)
    algorithm = dict(algorithm)
    if rounds is not None:
        algorithm["epochs" if name == "sharing" else "rounds"] = rounds
    files = party_folders(agents, tmp_path / "parties", seed=seed, budget=budget)
    plan = {"name": name, "algorithm": algorithm, "privacy": privacy, "run": {"seed": seed},
            "agents": [a.name for a in agents], "checkpoint": str(tmp_path / "checkpoint")}
    if labels is not None:  # the centre holds the labels: here in the plan's algorithm table
        plan["algorithm"] = {**algorithm}
    return agents, labels, files, plan


def _solve(name, agents, labels, plan, seed=3):
    from cvxdp.config.build import make_algorithm, make_privacy

    algorithm = make_algorithm(plan["algorithm"])
    if labels is not None:
        algorithm.labels = labels
    return cvxdp.solve(agents, algorithm=algorithm, privacy=make_privacy(plan["privacy"]), seed=seed)


def _released(history: pd.DataFrame) -> pd.DataFrame:
    return history.drop(columns=[c for c in (*PRIVATE, "wall_time") if c in history.columns]).select_dtypes("number")


@pytest.mark.parametrize("name", [n for n in CASES if n != "sharing"])
def test_every_family_gives_the_simulations_released_values_bit_for_bit(tmp_path, name):
    agents, labels, files, plan = _setup(tmp_path, name)
    fed = run_federation(plan, LocalChannel(files))
    ref = _solve(name, agents, labels, plan)
    got, want = _released(fed.history), _released(ref.history)
    assert list(got.columns) == [c for c in want.columns if c in got.columns]
    pd.testing.assert_frame_equal(got, want[got.columns], check_exact=True)
    for key, value in ref.solution.items():
        np.testing.assert_array_equal(fed.solution[key], value)
    assert fed.privacy["worst"]["pld"] == ref.privacy["worst"]["pld"]
    assert fed.privacy["worst"]["basic"] == ref.privacy["worst"]["basic"]


def test_the_sharing_family_federates_with_the_label_holder_declaring_its_labels(tmp_path):
    from cvxdp_models.vertical import synthetic_parties

    parties, labels = synthetic_parties(12, 2, 2, seed=0)
    parties[0].labels = labels  # the label holder hosts the centre: its labels are public to it
    files = party_folders(parties, tmp_path / "parties", seed=7)
    plan = {"name": "sharing", "algorithm": {"name": "sharing", "rho": 1.0, "lam": 0.1, "epochs": 4},
            "privacy": {"mechanism": "OutG", "epsilon": 1.0, "delta": 1e-5}, "run": {"seed": 7},
            "agents": [p.name for p in parties]}
    fed = run_federation(plan, LocalChannel(files))
    ref = cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=1.0, lam=0.1, epochs=4),
                      privacy=cvxdp.OutputPerturbation("gaussian", epsilon=1.0, delta=1e-5), seed=7)
    got, want = _released(fed.history), _released(ref.history)
    pd.testing.assert_frame_equal(got, want[got.columns], check_exact=True)
    np.testing.assert_array_equal(fed.solution["z"], ref.solution["z"])
    assert set(fed.solution) == {"z"}  # the parties' models stay with them


def test_the_coordinator_holds_released_values_only(tmp_path):
    agents, labels, files, plan = _setup(tmp_path, "ObjG", seed=None)
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
        state = tmp_path / "parties" / agent.name / "state"
        assert (state / "evaluation.csv").exists() and (state / "local.npz").exists()


def test_without_seeds_two_federations_differ(tmp_path):
    runs = []
    for k in range(2):
        _, _, files, plan = _setup(tmp_path / str(k), "ObjG", seed=None)
        runs.append(run_federation(plan, LocalChannel(files)))
    assert not np.array_equal(runs[0].solution["x"], runs[1].solution["x"])
    assert runs[0].config["seed"] is None


def test_a_partys_own_budget_stops_a_run_the_coordinator_would_continue(tmp_path):
    _, _, files, plan = _setup(tmp_path, "ObjG", budget=(2.0, 1e-4))  # 2 calls of eps 1 per round, under PLD
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
    plan = {"name": "lie", "algorithm": CASES["ObjG"][1], "privacy": CASES["ObjG"][2], "run": {}, "agents": None}
    with pytest.raises(PartyRefusedError, match="agent0.*refuses round 1.*sensitivity"):
        run_federation(plan, LocalChannel(files))


def test_a_failing_party_stops_the_run_with_one_line_naming_it_and_the_round(tmp_path, monkeypatch):
    _, _, files, plan = _setup(tmp_path, "ObjG")
    step = Party._step

    def broken(self, payload):
        if self.file.name == "agent1" and payload["round"] == 2:
            raise RuntimeError("disk on fire")
        return step(self, payload)

    monkeypatch.setattr(Party, "_step", broken)
    with pytest.raises(BackendError, match=r"^Party 'agent1' failed in round 2: RuntimeError: disk on fire$"):
        run_federation(plan, LocalChannel(files))


def test_a_rerun_resumes_and_equals_the_uninterrupted_run(tmp_path, monkeypatch):
    _, _, files, plan = _setup(tmp_path / "a", "ObjG")
    full = run_federation(plan, LocalChannel(files))
    _, _, files, plan = _setup(tmp_path / "b", "ObjG")
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
    agents, _, files, plan = _setup(tmp_path, "ObjG")
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
