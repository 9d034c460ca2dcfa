"""The three-zones example: each utility's party module builds its own zone agent from the public network and its
own loads, and the federation of the three equals the simulation of the shipped case."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cvxdp.config.build import load_case, run_case
from cvxdp.errors import BackendError
from cvxdp.federation.coordinator import LocalChannel, run_federation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "three_zones" / "federate.py"


def _example():
    spec = importlib.util.spec_from_file_location("three_zones_federate", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_three_utilities_with_their_own_party_modules_federate_like_the_shipped_case(tmp_path):
    example = _example()
    files = example.party_folders(tmp_path / "parties")
    plan = json.loads(example.plan_for(tmp_path, rounds=2).read_text())
    fed = run_federation(plan, LocalChannel(files))
    case = load_case(example.CASE)
    case.algorithm["rounds"], case.run["seed"] = 2, 0
    case.privacy = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}
    ref = run_case(case).result
    assert set(fed.solution) == set(ref.solution)
    for key in ref.solution:
        np.testing.assert_array_equal(fed.solution[key], ref.solution[key])
    columns = [c for c in fed.history.columns if c != "wall_time"]
    pd.testing.assert_frame_equal(fed.history[columns], ref.history[columns], check_exact=True)
    assert fed.privacy["worst"]["pld"] == ref.privacy["worst"]["pld"]


def test_a_utility_whose_loads_name_another_zones_bus_is_refused(tmp_path):
    example = _example()
    files = example.party_folders(tmp_path / "parties")
    (files[0].parent / "loads.csv").write_text("bus,p_mw,q_mvar\n14,10.0,3.0\n")  # bus 14 is zone 3's
    plan = json.loads(example.plan_for(tmp_path, rounds=1).read_text())
    with pytest.raises(BackendError, match=r"zone1.*bus 14 is not in this utility's zone"):
        run_federation(plan, LocalChannel(files))


def test_a_utilitys_own_loads_enter_its_own_agent_and_its_declaration_stays_public(tmp_path):
    from cvxdp.federation.party import Party, PartyFile
    from cvxdp.run.storage import problem_hash

    files = _example().party_folders(tmp_path / "parties")
    before = PartyFile(files[0]).load_agents()[0]
    (files[0].parent / "loads.csv").write_text("bus,p_mw,q_mvar\n2,30.0,10.0\n")
    after = PartyFile(files[0]).load_agents()[0]
    assert problem_hash(after) != problem_hash(before)  # its private loads are in its problem
    assert Party(files[0]).handle("hello", {})["declarations"][0] == before.declaration().to_dict()
