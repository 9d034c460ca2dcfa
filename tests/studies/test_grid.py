"""The consensus study's cell cache (cvxdp.studies.grid) is guarded by the template-resolved [model] settings: a
default that changed between versions (the logistic dtype, float64 -> float32 in issue 12) refuses the stale
cells; an unchanged rerun reuses every cell without building the instance (the template's settings hook)."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

import cvxdp.config.build
import cvxdp.studies.grid
import cvxdp.templates as T
from cvxdp.config.build import load_case
from cvxdp.errors import ConfigError
from cvxdp.studies.grid import run_study

CASES = Path(__file__).resolve().parents[2] / "cases"


def _study(tmp_path: Path) -> Path:
    """A two-cell digits study over a copy of digits_fl.toml that leaves dtype to the template's default."""
    case = tmp_path / "digits.toml"
    lines = [line + ("\nbaselines = false" if line == "[model]" else "")  # (scikit-learn fits: slow, not needed)
             for line in (CASES / "digits_fl.toml").read_text().splitlines() if not line.startswith("dtype")]
    case.write_text("\n".join(lines) + "\n")
    assert "dtype" not in load_case(case).model
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
name = "digits-cache"
case = "{case.as_posix()}"
mechanisms = ["ObjG"]
epsilons = [1.0]
seeds = [0]
rounds = 2
""")
    return study


def _run(study: Path, out: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_study(study, out, progress=False)


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch):
    """The figures (seconds per study run) are not what these tests are about."""
    monkeypatch.setattr(cvxdp.studies.grid, "write_figures", lambda *args, **kwargs: [])


def _no_build(*args, **kwargs):
    raise AssertionError("the instance was built for a fully cached study")


def test_a_changed_template_default_refuses_the_cached_cells(tmp_path, monkeypatch):
    from cvxdp_models.logistic import template

    study, out = _study(tmp_path), tmp_path / "out"
    with monkeypatch.context() as old_version:
        old_version.setattr(template, "MULTICLASS_DTYPE", "float64")  # the default before issue 12
        first = _run(study, out)
        assert (first["runs"], first["computed"], first["reused"]) == (2, 2, 0)
        again = _run(study, out)  # nothing changed: every cell reused
        assert (again["computed"], again["reused"]) == (0, 2)

    with pytest.raises(ConfigError, match=r"holds cell .* another configuration.*\[model\] setting 'dtype' as "
                                          r"resolved by the template"):
        _run(study, out)  # the current default (float32) resolves the same files to another problem

    fresh = _run(study, tmp_path / "fresh")  # computed afresh elsewhere, then reused
    monkeypatch.setattr(cvxdp.config.build, "build_instance", _no_build)
    assert (fresh["computed"], _run(study, tmp_path / "fresh")["reused"]) == (2, 2)


def test_a_template_without_a_settings_hook_is_built_once_to_check_the_cells(tmp_path, monkeypatch):
    study, out = _study(tmp_path), tmp_path / "out"
    without_hook = dataclasses.replace(T._declared("logistic"), settings=None)
    monkeypatch.setitem(T._REGISTERED, "logistic", without_hook)  # registered in-process: precedes the entry point
    _run(study, out)
    builds = []
    monkeypatch.setattr(cvxdp.config.build, "build_instance", lambda case: builds.append(case) or T.build_model(
        case.template, case.model, base_dir=case.path.parent))

    again = _run(study, out)

    assert (again["computed"], again["reused"], len(builds)) == (0, 2, 1)


def test_a_study_reports_its_warnings_once_each_at_the_end(tmp_path):
    """Issue 38: a study printed every run's warnings into its progress bar (82 in one study). Now each kind is
    issued once, after the bar, with the number of runs that raised it."""
    study = tmp_path / "study.toml"
    study.write_text(f"""[study]
case = "{(CASES / 'toy.toml').as_posix()}"
mechanisms = ["ObjG"]
epsilons = [0.01, 0.1]
seeds = [0, 1]
rounds = 2
baseline = false
""")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = run_study(study, tmp_path / "out", progress=False)
    assert info["runs"] == 4
    outside = [str(w.message) for w in caught if "outside the feasible set" in str(w.message)]
    assert len(outside) == 1, outside  # every run's (noisy) consensus point is off the sets after 2 rounds
    assert "[4 run(s) of this study (the first; the numbers differ between runs)]" in outside[0]
    messages = [str(w.message) for w in caught]
    assert len(messages) == len(set(messages)) <= 6
