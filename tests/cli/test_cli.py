"""The command line: every command's --json prints one JSON object last; bad input gets one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from cvxdp.cli.main import cli

CASES = Path(__file__).resolve().parents[2] / "cases"


def invoke(*args, ok=True):
    result = CliRunner().invoke(cli, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def last_json(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_cases_lists_shipped_cases():
    payload = last_json(invoke("cases", "--json"))

    assert "toy" in {c["name"] for c in payload["cases"]}


def test_cases_lists_the_networks_known_by_name():
    payload = last_json(invoke("cases", "--json"))
    nets = {c["name"]: c for c in payload["cases"] if c["kind"] == "net"}
    assert {"pglib_opf_case14_ieee", "pglib_opf_case118_ieee", "pglib_opf_case300_ieee", "case*"} == set(nets)
    assert Path(nets["pglib_opf_case14_ieee"]["path"]).is_file()
    assert "pandapower" in nets["case*"]["description"] and "case1354pegase" in nets["case*"]["description"]
    assert "pglib_opf_case300_ieee" in invoke("cases").output


def test_run_prints_summary_and_saves_history(tmp_path):
    out = tmp_path / "hist"

    payload = last_json(invoke("run", str(CASES / "toy.toml"), "--mechanism", "ObjG", "--epsilon", "1.0",
                               "--rounds", "20", "--local-updates", "2", "--seed", "3", "--out", str(out), "--json"))

    assert payload["rounds"] == 20 and payload["mechanism"] == "ObjG"
    for key in ("objective", "consensus_residual", "max_violation", "noise_magnitude"):
        assert isinstance(payload[key], float)
    assert set(payload["privacy"]) == {"basic", "rdp", "pld"}
    assert payload["privacy"]["basic"][0] == pytest.approx(40.0)
    assert len(pd.read_csv(out / "history.csv")) == 20


def test_run_by_shipped_name_and_central_agree(tmp_path):
    run = last_json(invoke("run", "toy", "--rounds", "400", "--out", str(tmp_path / "r"), "--json"))
    central = last_json(invoke("central", "toy", "--json"))

    assert abs(run["objective"] - central["objective"]) / central["objective"] < 1e-3


@pytest.mark.parametrize("content, match", [
    ("[case\nname = 1", "not valid TOML"),
    ("[case]\ntemplate = 'toy'\n[algorithm]\nrhoo = 1.0", "unknown key(s) 'rhoo' in [algorithm]"),
    ("[case]\ntemplate = 'nope'", "'template' entry of [case] must be one of"),
    ("[case]\ntemplate = 'toy'\n[privacy]\nmechanism = 'ObjX'", "'mechanism' entry of [privacy]"),
    ("[case]\ntemplate = 'toy'\n[model]\nagents = 0", "'agents' entry of [model]"),
    ("[case]\ntemplate = 'toy'\n[algorithm]\nrho = -1.0", "'rho' parameter of LinearizedADMM"),
    ("[case]\ntemplate = 'toy'\n[wat]\nx = 1", "unknown section(s) [wat]"),
    ("[case]\ntemplate = 'logistic'\n[model]\ndataset = 'libsvm'\npath = 'nothing.svm'", "nothing.svm"),
    ("[case]\ntemplate = 'power'\n[model]\nnetwork = 'case14'\nzones = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], []]",
     "empty"),
    ("[case]\ntemplate = 'power'\n[model]\nnetwork = 'case14'\nzones = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]\n"
     "[privacy]\nmechanism = 'ObjG'\nepsilon = -1.0", "'epsilon' parameter"),
    ("[case]\ntemplate = 'power'\n[model]\nnetwork = 'case99999'\nauto_zones = 3", "case99999"),
])
def test_bad_case_files_get_one_clear_line(tmp_path, content, match):
    case = tmp_path / "bad.toml"
    case.write_text(content)

    result = invoke("run", str(case), "--out", str(tmp_path / "o"), ok=False)

    assert result.exit_code != 0
    assert match in result.output
    assert "Traceback" not in result.output


def test_unknown_case_lists_shipped_ones():
    result = invoke("run", "case9999", ok=False)

    assert "does not exist" in result.output and "toy" in result.output


def test_study_runs_resumes_and_reports(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
name = "toy-grid"
case = "{(CASES / 'toy.toml').as_posix()}"
mechanisms = ["ObjG", "OutG"]
epsilons = [0.5, 2.0]
local_updates = [1, 3]
seeds = [0]
rounds = 8
""")
    out = tmp_path / "out"

    first = last_json(invoke("study", str(study), "--out", str(out), "--json", "--no-progress"))
    (out / "runs" / "ObjG_eps0.5_J1_seed0" / "result.json").unlink()  # as if killed mid-way through that cell
    second = last_json(invoke("study", str(study), "--out", str(out), "--json", "--no-progress", "--workers", "1"))

    assert first["runs"] == 10 and first["computed"] == 10
    assert second["computed"] == 1 and second["reused"] == 9
    results = pd.read_csv(out / "results.csv")
    assert len(results) == 10
    assert {"noise_magnitude", "objective", "eps_basic", "eps_pld"} <= set(results.columns)
    for name in ("noise_vs_epsilon.png", "objective_vs_rounds_J1.png", "objective_vs_rounds_J3.png",
                 "residual_ObjG_by_J.png", "residual_ObjG_by_J.pdf", "report.md", "ledger.json", "histories.csv"):
        assert (out / name).exists(), name
    assert "ObjPert vs OutPert" in (out / "report.md").read_text()


def test_bad_study_files(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text(f"[study]\ncase = '{(CASES / 'toy.toml').as_posix()}'\nepsilons = [0.5, -1.0]\n")

    result = invoke("study", str(study), "--out", str(tmp_path / "o"), ok=False)

    assert "'epsilons' entry of [study] must hold positive numbers" in result.output
    sharing = invoke("study", str(CASES / "study_sharing.toml"), "--out", str(tmp_path / "o"), "--workers", "2",
                     ok=False)
    assert sharing.exit_code == 2 and "--workers applies to grid and equal-total studies only" in sharing.output
    assert invoke("study", str(study), "--out", str(tmp_path / "o"), "--workers", "0", ok=False).exit_code == 2


@pytest.mark.parametrize("case, ac_cost", [("case14_3zones", 8081.53)])
def test_central_cost_sits_just_below_the_ac_opf_cost(case, ac_cost):
    # the case file's penalty weight belongs to its balance objective; --objective cost means exact balance
    payload = last_json(invoke("central", case, "--objective", "cost", "--json"))

    assert payload["objective_kind"] == "cost"
    assert 0.0 <= (ac_cost - payload["cost"]) / ac_cost <= 0.01  # $/h
    assert payload["objective"] == pytest.approx(payload["cost"] / 1000.0)  # model units: k$/h
    assert payload["ac_converged"]


def test_run_writes_a_public_release_without_seed_or_private_values(tmp_path):
    out, public = tmp_path / "hist", tmp_path / "public"
    payload = last_json(invoke("run", str(CASES / "toy.toml"), "--mechanism", "ObjG", "--epsilon", "1.0",
                               "--rounds", "5", "--seed", "3", "--out", str(out), "--public", str(public), "--json"))
    assert payload["public"] == str(public)
    full, shared = json.loads((out / "result.json").read_text()), json.loads((public / "result.json").read_text())
    assert full["config"]["seed"] == 3 and "seed" not in shared["config"] and shared["config"]["public"] is True
    assert "objective" in pd.read_csv(out / "history.csv").columns
    history = pd.read_csv(public / "history.csv")
    assert "objective" not in history.columns and "max_violation" not in history.columns
    assert {"consensus_residual", "eps_basic"} <= set(history.columns)
    # a second export into the same directory is refused, not silently overwritten
    again = invoke("run", str(CASES / "toy.toml"), "--mechanism", "ObjG", "--epsilon", "1.0", "--rounds", "5",
                   "--seed", "3", "--out", str(tmp_path / "other"), "--public", str(public), ok=False)
    assert "already holds a saved cvxdp result" in again.output


def test_central_network_shortcut_takes_a_matpower_file_relative_to_the_current_directory(tmp_path, monkeypatch):
    from cvxdp_models.power.network import PGLIB_DIR

    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "my14.m").write_bytes((PGLIB_DIR / "pglib_opf_case14_ieee.m").read_bytes())
    monkeypatch.chdir(tmp_path)
    payload = last_json(invoke("central", "--network", "g/my14.m", "--zones", "2", "--json"))
    assert payload["case"] == "my14_2zones"  # named by the file, not by its path
    assert payload["cost"] == pytest.approx(2175.70, abs=0.05) and payload["ac_converged"] is True


def test_run_reports_exact_admms_polished_point(tmp_path):
    """An exact-ADMM case file: the summary names the polished point; ``polish = false`` in [algorithm] turns it
    off; the saved result reloads it. (12 rounds: a round polishes once the copies agree ten times better than
    in round 1.)"""
    import cvxdp

    text = (CASES / "toy.toml").read_text().replace('name = "ladmm"', 'name = "admm"')
    text = text.replace("agents = 3 ", "agents = 2 ")  # two agents: the mean of their copies is always feasible
    case = tmp_path / "toy_admm.toml"
    case.write_text(text)
    res = invoke("run", str(case), "--rounds", "12", "--seed", "0", "--out", str(tmp_path / "on"))
    assert "polished point      round 12 (the mean of the released copies)" in res.output
    evaluation = res.output.split("non-private evaluation (not released)")[1]
    assert "polished objective" in evaluation and "(round 12; feasible" in evaluation
    payload = last_json(invoke("run", str(case), "--rounds", "12", "--seed", "0", "--out", str(tmp_path / "on2"),
                               "--json"))
    assert payload["polished_round"] == 12 and isinstance(payload["polished_objective"], float)
    assert cvxdp.load_result(tmp_path / "on").polished["round"] == 12
    case.write_text(text.replace('name = "admm"', 'name = "admm"\npolish = false'))
    res = invoke("run", str(case), "--rounds", "12", "--seed", "0", "--out", str(tmp_path / "off"))
    assert "polished point" not in res.output


def test_run_groups_the_private_evaluation_under_its_label_and_public_output_has_none(tmp_path):
    """Issue 36 item 3: every value computed on the agents' private data is shown under the evaluation label (human
    summary) and listed with it (JSON); the public release holds none of them."""
    from cvxdp.model import EVALUATION_LABEL
    from cvxdp.run.results import PUBLIC_HISTORY_COLUMNS

    args = ("run", str(CASES / "toy.toml"), "--mechanism", "ObjL", "--epsilon", "1.0", "--rounds", "4", "--seed", "1")
    lines = invoke(*args, "--out", str(tmp_path / "a")).output.splitlines()
    heading = next(i for i, line in enumerate(lines) if EVALUATION_LABEL in line)
    assert "computed on the agents' private data" in lines[heading]
    block = []
    for line in lines[heading + 1:]:
        if not line.startswith("    "):
            break
        block.append(line.strip().split("  ")[0])
    assert block == ["objective", "max violation", "noise magnitude", "solution violation"]
    for i, line in enumerate(lines):  # no private value outside the labelled block
        if i <= heading or i > heading + len(block):
            assert not line.strip().startswith(("objective", "max violation", "noise magnitude", "solution violation"))
    payload = last_json(invoke(*args, "--out", str(tmp_path / "b"), "--public", str(tmp_path / "p"), "--json"))
    assert payload["evaluation"]["label"] == EVALUATION_LABEL
    assert {"objective", "max_violation", "noise_magnitude", "solution_violation"} <= set(payload["evaluation"]["keys"])
    assert not {"consensus_residual", "privacy", "rounds"} & set(payload["evaluation"]["keys"])
    public = json.loads((tmp_path / "p" / "result.json").read_text())
    assert public["config"]["evaluation"] == {**public["config"]["evaluation"], "evaluated": False, "rounds": [],
                                              "columns": [], "agent_columns": []}
    assert set(pd.read_csv(tmp_path / "p" / "history.csv").columns) <= set(PUBLIC_HISTORY_COLUMNS)
