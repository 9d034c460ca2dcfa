"""Equal-total studies on several data sets and with one-shot releases (issue 39, items 2b and 4), on the bundled
digits data (no download): every cell runs on every data set, a ranking is stated only when it holds on every one,
and the one-shot anchor (OutG-once: T = 1, J = 1, noise drawn once) spends the whole budget in one ledger entry per
party."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from cvxdp.audits.release import audit_local_update
from cvxdp.config.build import load_case, run_case
from cvxdp.errors import ConfigError
from cvxdp.privacy import make_mechanism
from cvxdp.studies.total import (
    _dataset_case,
    _total_case,
    column_winner,
    load_total_study,
    load_total_table,
    method_table,
    run_total_study,
    verdict,
)

CASES = Path(__file__).resolve().parents[2] / "cases"
DATASETS = 'datasets = [{ name = "split 0", model = { data_seed = 0 } }, { name = "split 1", model = { data_seed = 1 } }]'


VARIANT = '{ name = "OutG-q0.1", mechanism = "OutG", privacy = { sampling_rate = 0.1, clip_norm = 1.0 } }'


def _study(tmp_path: Path, body: str = DATASETS, mechanisms: str = '"ObjG"') -> Path:
    path = tmp_path / "digits_total.toml"
    path.write_text(f"""[study]
kind = "total"
name = "digits_total"
case = "{(CASES / 'digits_fl.toml').as_posix()}"
mechanisms = [{mechanisms}]
anchors = ["OutG-once"]
epsilons = [1.0]
seeds = [0, 1]
schedule = [[100.0, 8, 1]]
anchor_rounds = 8
{body}

[run]
accountant = "pld"
""")
    return path


def test_every_cell_runs_on_every_data_set_and_its_key_names_it(tmp_path):
    study = load_total_study(_study(tmp_path, mechanisms=f'"ObjG", {VARIANT}'))
    assert study.datasets == [("split 0", {"data_seed": 0}), ("split 1", {"data_seed": 1})]
    assert study.variants["OutG-q0.1"] == ("OutG", {"sampling_rate": 0.1, "clip_norm": 1.0})
    keys = [c.key for c in study.cells()]
    assert len(keys) == len(set(keys)) == 2 * (1 + 3 * 2)
    assert keys[:2] == ["split_0__none_totalnone_T8_J1_seed0", "split_0__ObjG_total1_T8_J1_seed0"]
    assert "split_1__OutG-once_total1_T1_J1_seed1" in keys  # the one-shot release: one round, one local update
    # without datasets the keys are the ones older study directories hold (they resume)
    plain = load_total_study(_study(tmp_path, body=""))
    assert plain.cells()[1].key == "ObjG_total1_T8_J1_seed0"
    # a public J for the one-shot releases: one round of J composed updates
    three = load_total_study(_study(tmp_path, body="one_shot_local_updates = 3"))
    assert [c.key for c in three.cells() if c.method == "OutG-once"] == ["OutG-once_total1_T1_J3_seed0",
                                                                         "OutG-once_total1_T1_J3_seed1"]


def test_a_data_set_replaces_model_entries_and_writers_replace_agents(tmp_path):
    base = load_case(CASES / "femnist_fl.toml")
    case = _dataset_case(base, {"writers": [10, 11], "total_samples": 263})
    assert "agents" not in case.model and case.model["writers"] == [10, 11] and case.model["total_samples"] == 263
    assert base.model["agents"] == 10  # the base case is not changed


@pytest.mark.parametrize("body, match", [
    ('datasets = []', "'datasets'"),
    ('datasets = [{ name = "a" }]', "'datasets'"),
    ('datasets = [{ name = "a", model = {} }, { name = "a!", model = {} }]', "appears twice"),
    ('datasets = [{ name = "a", model = {}, extra = 1 }]', "'datasets'"),
    ('mechanisms = [{ name = "X", mechanism = "ObjZ" }]', "'mechanisms'"),
    ('mechanisms = [{ name = "X", mechanism = "ObjG", privacy = { epsilon = 2.0 } }]', "'privacy' table of the "
                                                                                        "mechanism 'X'"),
    ('mechanisms = ["ObjG", { name = "ObjG", mechanism = "OutG" }]', "'mechanisms'"),
    ('anchors = ["OutX-once"]', "'anchors'"),
    ('one_shot_local_updates = 0', "'one_shot_local_updates'"),
])
def test_bad_entries_are_refused_by_name(tmp_path, body, match, with_entry):
    with pytest.raises(ConfigError, match=match):
        load_total_study(with_entry(_study(tmp_path, body=""), body))


@pytest.fixture(scope="module")
def finished(tmp_path_factory, run_quietly):
    tmp = tmp_path_factory.mktemp("digits_total")
    out = tmp / "out"
    return tmp, out, run_quietly(_study(tmp), out)


def test_both_data_sets_run_and_the_table_names_them(finished):
    _, out, info = finished
    assert info["runs"] == info["computed"] == 10
    results = pd.read_csv(out / "results.csv")
    assert sorted(set(results["dataset"])) == ["split 0", "split 1"]
    table = load_total_table(out)
    assert len(table) == 2 * 2 and set(table.groupby("dataset")["method"].apply(frozenset)) == {
        frozenset({"ObjG", "OutG-once"})}
    # the two splits are different data: the same method and seed ends differently
    objg = results[(results["method"] == "ObjG") & (results["seed"] == 0)].set_index("dataset")["test_error"]
    assert objg["split 0"] != objg["split 1"]
    report = (out / "report.md").read_text()
    first_table = report.split("\n\n")[3]
    assert first_table.startswith("| method | data set | eps=1 |")
    winner, text = column_winner(table, "train_cost", 1.0)
    assert f"| **winner** | every one | {text} |" in first_table


def test_the_one_shot_anchor_spends_the_whole_budget_in_one_ledger_entry_per_party(finished):
    tmp, out, _ = finished
    ledgers = json.loads((out / "ledger.json").read_text())
    once = {k: v for k, v in ledgers.items() if "OutG-once" in k}
    assert len(once) == 4  # 2 data sets x 2 seeds
    for summary in once.values():
        assert len(summary["per_agent"]) == 5
        for agent in summary["per_agent"].values():
            assert agent["steps"] == 1 and 0.99 < agent["pld"] <= 1.0 + 1e-9
    # the ledger object of the same cell's case: exactly one entry, one call, per party
    study = load_total_study(_study(tmp))
    cell = next(c for c in study.cells() if c.method == "OutG-once")
    case = _total_case(study, _dataset_case(load_case(study.case_path), dict(study.datasets[0][1])), cell, False)
    assert case.algorithm["rounds"] == 1 and case.algorithm["local_updates"] == 1
    assert case.privacy["mechanism"] == "OutG" and case.privacy["calibrate"] == "total"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_case(case).result
    for name in result.ledger.agent_names:
        entries = result.ledger.entries(name)
        assert len(entries) == 1 and entries[0][2] == 1
    assert result.ledger.summary()["worst"]["pld"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.filterwarnings("ignore::UserWarning")  # one round: the copies are not in consensus
def test_the_one_shot_release_is_the_audited_local_update():
    """OutG-once is OutG's one local update of one round (T = 1, J = 1) calibrated to the whole budget: the
    through-solve audit of that update (tests/audits/test_audit_solve.py) applies as it is; here with
    calibrate = "total", honest and broken."""
    mech = make_mechanism("OutG", epsilon=1.0, delta=1e-3, calibrate="total")
    honest = audit_local_update(mech, trials=20_000, seed=2024)
    assert not honest.violated and 0.4 < honest.epsilon_lower <= honest.claimed == pytest.approx(1.0)
    broken = audit_local_update(mech, trials=20_000, seed=2024, broken="half-sensitivity")
    assert broken.violated and broken.epsilon_lower > 1.2 * broken.claimed


def test_a_rerun_reuses_every_cell(finished):
    tmp, out, _ = finished
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = run_total_study(_study(tmp), out, progress=False)
    assert info["computed"] == 0 and info["reused"] == 10


def _table(errors: dict[tuple[str, str], float]) -> pd.DataFrame:
    rows = []
    for (dataset, method), value in errors.items():
        rows.append({"dataset": dataset, "method": method, "kind": "anchor" if method.endswith("-once") else
                     "per-round", "total_epsilon": 1.0, "rounds": 40, "local_updates": 1,
                     "train_cost_mean": value, "train_cost_se": 0.01, "test_error_mean": value,
                     "test_error_se": 0.01})
    return pd.DataFrame(rows)


def test_a_ranking_is_stated_only_when_it_holds_on_every_data_set():
    differ = _table({("A", "ObjG"): 0.5, ("A", "OutG"): 0.6, ("B", "ObjG"): 0.7, ("B", "OutG"): 0.65})
    winner, text = column_winner(differ, "test_error", 1.0)
    assert winner is None
    assert text == "no ranking: ObjG wins on A (0.5 +- 0.01), OutG wins on B (0.65 +- 0.01)"
    assert method_table(differ, "test_error").iloc[-1]["eps=1"] == text
    agree = _table({("A", "ObjG"): 0.5, ("A", "OutG"): 0.6, ("B", "ObjG"): 0.6, ("B", "OutG"): 0.65})
    assert column_winner(agree, "test_error", 1.0) == ("ObjG", "ObjG")
    assert method_table(agree, "test_error").iloc[-1]["eps=1"] == "ObjG"
    # a data set without a value for the column: no ranking either
    missing = agree[~((agree["dataset"] == "B") & agree["method"].isin(["ObjG", "OutG"]))]
    missing = pd.concat([missing, _table({("B", "ObjG"): float("nan")})], ignore_index=True)
    assert column_winner(missing, "test_error", 1.0) == (None, "no ranking: ObjG wins on A (0.5 +- 0.01), "
                                                               "no value on B")


def test_the_verdict_compares_per_data_set_and_ranks_only_what_holds_on_both():
    table = _table({("A", "ObjG"): 0.5, ("A", "OutG-once"): 0.6, ("B", "ObjG"): 0.7, ("B", "OutG-once"): 0.65})
    lines = verdict(table, ("train_cost", "test_error"))
    assert any(line.startswith("- total eps = 1 on A, best per-round vs best one-shot: train_cost: ObjG")
               for line in lines)
    assert "- total eps = 1, test_error, every data set: no ranking: ObjG wins on A (0.5 +- 0.01), OutG-once wins "\
           "on B (0.65 +- 0.01)" in lines
    assert "test_error at total eps 1 on A" in lines[-1] and "on B" not in lines[-1]
    table.loc[table["method"] == "ObjG", ["train_cost_mean", "test_error_mean"]] = 0.9
    lines = verdict(table, ("train_cost", "test_error"))
    assert "- total eps = 1, test_error, every data set: **OutG-once** wins on every data set" in lines
    assert lines[-1].startswith("**No per-round mechanism beat the one-shot baseline")


def test_the_shipped_femnist_study_declares_two_writer_sets_the_variants_and_the_one_shot_anchor():
    study = load_total_study(CASES / "study_femnist_total.toml")
    assert [name for name, _ in study.datasets] == ["writers 0-9", "writers 10-19"]
    assert study.datasets[1][1] == {"writers": list(range(10, 20)), "total_samples": 1263}
    assert study.mechanisms == ["ObjG", "OutG", "ObjG-q0.1", "OutG-q0.1"]
    assert study.variants["OutG-q0.1"] == ("OutG", {"sampling_rate": 0.1, "clip_norm": 1.0})
    assert study.anchors == ["OutG-once", "central"] and study.one_shot_local_updates == 1
    assert study.epsilons == [1.0, 8.0] and study.seeds == [0, 1, 2] and study.overrides["run"]["accountant"] == "pld"
    assert len(study.cells()) == 2 * (1 + 2 * (4 + 2) * 3)
    base = load_case(study.case_path)
    held_out = _dataset_case(base, study.datasets[1][1])
    assert "agents" not in held_out.model and held_out.model["writers"][0] == 10


# ------------------------------------------------------------------ the centralized private anchor (issue 39)
def _central_study(tmp_path: Path, case: str = "digits_fl.toml") -> Path:
    path = _study(tmp_path, body="")
    text = path.read_text().replace('anchors = ["OutG-once"]', 'anchors = ["central"]').replace("seeds = [0, 1]",
                                                                                                 "seeds = [0]")
    path.write_text(text.replace("digits_fl.toml", case))
    return path


def test_the_central_anchor_is_a_row_with_its_own_ledger_and_the_report_says_what_distribution_costs(tmp_path):
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = run_total_study(_central_study(tmp_path), out, progress=False)
    assert info["runs"] == info["computed"] == 3  # the non-private line, ObjG, the central anchor
    results = pd.read_csv(out / "results.csv").set_index("method")
    assert results.loc["central", "kind"] == "central"
    assert 0.0 < results.loc["central", "test_error"] < 0.9 and results.loc["central", "train_cost"] > 0
    ledger = json.loads((out / "ledger.json").read_text())["central_total1_T1_J1_seed0"]
    assert list(ledger["per_agent"]) == ["central"] and 0.99 < ledger["worst"]["pld"] <= 1.0 + 1e-9
    report = (out / "report.md").read_text()
    assert "central (central anchor, pooled data)" in report
    assert "what distribution costs (best federated vs the centralized private anchor on the pooled data)" in report
    table = load_total_table(out)
    # the winner row ranks the federated methods; the central anchor is the reference beside them
    assert column_winner(table, "test_error", 1.0, ("per-round", "anchor"))[0] == "ObjG"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = run_total_study(_central_study(tmp_path), out, progress=False)
    assert again["computed"] == 0 and again["reused"] == 3


def test_a_template_without_a_central_anchor_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="no centralized private anchor"):
        run_total_study(_central_study(tmp_path, case="toy.toml"), tmp_path / "out", progress=False)
