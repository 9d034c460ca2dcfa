"""The one study loop (cvxdp.studies.study): the registry picks a study file's class by its [study] kind, the
declared keys check values with messages that name the file and key, and the command line takes the options a
kind declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvxdp.errors import ConfigError
from cvxdp.studies import STUDIES, GraphStudy, GridStudy, SharingStudy, TotalStudy, study_class
from cvxdp.studies.study import StudyKey, head_keys, is_int_at_least

CASES = Path(__file__).resolve().parents[2] / "cases"


@pytest.mark.parametrize("name, cls", [("study_case14.toml", GridStudy), ("study_case14_total.toml", TotalStudy),
                                       ("study_madmm.toml", GraphStudy), ("study_sharing.toml", SharingStudy)])
def test_the_registry_picks_the_class_by_kind(name, cls):
    assert study_class(CASES / name) is cls
    study = cls.load(CASES / name)
    assert study.name == Path(name).stem and study.case_path.is_file()


def test_an_unknown_kind_is_refused_naming_the_registered_ones(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[study]\nkind = "grids"\ncase = "x.toml"\n')
    with pytest.raises(ConfigError, match=r"s.toml: the 'kind' entry of \[study\] must be one of .*'total'.* "
                                          r"Got 'grids' instead"):
        study_class(path)


def test_a_declared_key_checks_its_value_by_name(tmp_path):
    key = StudyKey("runs", "int >= 1", "10", "repetitions", value=10, expected="an int in [1, inf)",
                   accepts=is_int_at_least(1))
    assert key.read({}, tmp_path) == 10 and key.read({"runs": 3}, tmp_path) == 3
    with pytest.raises(ConfigError, match=r"the 'runs' entry of \[study\] must be an int in \[1, inf\)\. Got 0"):
        key.read({"runs": 0}, tmp_path)
    with pytest.raises(ConfigError, match="Got True instead"):
        key.read({"runs": True}, tmp_path)


def test_every_kind_declares_the_head_keys_and_its_options():
    for kind, cls in STUDIES.items():
        assert cls.kind == kind
        assert [k.name for k in cls.keys[:4 if kind != "grid" else 3]] == [k.name for k in head_keys(
            None if kind == "grid" else kind)]
        assert cls.options <= {"rounds", "data", "test_data", "workers"}
    assert "workers" in GridStudy.options and "workers" not in GraphStudy.options


def test_the_graph_study_refuses_a_bad_metric_by_name(tmp_path):
    path = tmp_path / "g.toml"
    text = (CASES / "study_madmm.toml").read_text()
    path.write_text(text.replace('case = "erm_madmm.toml"', f'case = "{(CASES / "erm_madmm.toml").as_posix()}"')
                    .replace('metric = "average_loss"', 'metric = "loss"'))
    with pytest.raises(ConfigError, match=r"the 'metric' entry of \[study\] must be one of 'average_loss'"):
        GraphStudy.load(path)
