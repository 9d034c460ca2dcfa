"""Building algorithms from [algorithm] tables (cvxdp.config.build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvxdp.config.build import load_case, make_algorithm, study_base_case
from cvxdp.errors import ConfigError
from cvxdp.families import ALGORITHMS
from cvxdp.studies.grid import load_study
from cvxdp.studies.total import load_total_study

CASES = Path(__file__).resolve().parents[2] / "cases"


def test_an_alias_is_read_as_the_parameter_it_names():
    assert make_algorithm({"name": "sharing", "rounds": 3}).epochs == 3
    assert make_algorithm({"name": "sharing", "epochs": 4}).epochs == 4
    # another algorithm's table keeps its own rounds
    assert make_algorithm({"name": "ladmm", "rounds": 3}).rounds == 3


def test_the_alias_overrides_the_parameter_it_names():
    # `cvxdp run --case sharing.toml --rounds 3` over a file's `epochs = 60`
    assert make_algorithm({"name": "sharing", "epochs": 60, "rounds": 3}).epochs == 3


def test_an_unknown_key_is_still_refused():
    with pytest.raises(ConfigError, match="unknown key"):
        make_algorithm({"name": "sharing", "epoch": 4})


def test_every_alias_names_a_declared_parameter():
    for cls in ALGORITHMS.values():
        for key in cls.file_aliases.values():
            assert key in cls.file_keys(), (cls.__name__, key)


def test_data_sets_the_model_path_on_a_copy(tmp_path):
    case = load_case(CASES / "femnist_fl.toml")
    moved = case.with_data(tmp_path)
    assert moved.model["path"] == str(tmp_path.resolve())
    assert case.model.get("path") != moved.model["path"]  # the loaded case is not changed


@pytest.mark.parametrize("name", ["case14_3zones.toml", "toy.toml"])
def test_data_is_refused_naming_a_template_that_reads_no_file(name, tmp_path):
    case = load_case(CASES / name)
    with pytest.raises(ConfigError, match=f"--data sets \\[model\\] path, which the {case.template} template does "
                                          "not read"):
        case.with_data(tmp_path)


def test_a_study_starts_from_its_case_with_the_command_lines_run_entries_and_data(tmp_path):
    study = load_study(CASES / "study_femnist.toml")
    own = dict(study.overrides["run"])
    base = study_base_case(study, run={"backend": "ray", "seed": None}, data=tmp_path)
    assert study.overrides["run"] == {**own, "backend": "ray"}  # added to the study's own; None is ignored
    assert base.model["path"] == str(tmp_path.resolve()) and base.template == "logistic"


def test_a_study_of_a_template_without_a_data_file_refuses_data(tmp_path):
    study = load_total_study(CASES / "study_case14_total.toml")
    assert study_base_case(study).template == "power"
    with pytest.raises(ConfigError, match="which the power template does not read"):
        study_base_case(study, data=tmp_path)
