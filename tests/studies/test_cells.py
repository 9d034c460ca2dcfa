"""The one resumable cell runner (cvxdp.studies.cells) and the sharing study on it: finished cells are
skipped, an unfinished one is recomputed, a changed study is refused."""

from __future__ import annotations

import json
from pathlib import Path

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import ConfigError, CorruptFileError
from cvxdp.studies.cells import CELL_FILE, CellRunner

CASES = Path(__file__).resolve().parents[2] / "cases"


def _agents():
    x = cp.Variable(2, name="x")
    return [cvxdp.Agent("a", cp.sum_squares(x - np.array([1.0, 2.0])), [], shared={"x": x})]


def _compute(calls: list, seed: int):
    def compute(cell_dir: Path):
        calls.append(cell_dir.name)
        result = cvxdp.solve(_agents(), algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=3), seed=seed)
        return result, {"objective": float(result.history["objective"].iloc[-1]), "seed": seed}
    return compute


def test_cells_are_stored_skipped_recomputed_and_guarded(tmp_path):
    calls: list = []
    first = CellRunner(tmp_path)
    r1, s1 = first.run("c0", {"rounds": 3, "seed": 0}, _compute(calls, 0))
    first.run("c1", {"rounds": 3, "seed": 1}, _compute(calls, 1))
    assert (first.computed, first.reused, calls) == (2, 0, ["c0", "c1"])
    assert {"result.json", "summary.json", CELL_FILE} <= {p.name for p in (tmp_path / "runs" / "c0").iterdir()}

    again = CellRunner(tmp_path)
    r2, s2 = again.run("c0", {"rounds": 3, "seed": 0}, _compute(calls, 0))
    assert (again.computed, again.reused, calls) == (0, 1, ["c0", "c1"])  # loaded, not recomputed
    assert s2 == s1 and np.array_equal(r2.solution["x"], r1.solution["x"])
    pd.testing.assert_frame_equal(r2.history, r1.history, check_dtype=False)

    (tmp_path / "runs" / "c1" / "result.json").unlink()  # as if killed while saving: recomputed
    again.run("c1", {"rounds": 3, "seed": 1}, _compute(calls, 1))
    assert again.computed == 1 and calls[-1] == "c1"

    with pytest.raises(ConfigError, match=r"holds cell 'c0' of a study with another configuration.*'rounds'"):
        CellRunner(tmp_path).run("c0", {"rounds": 4, "seed": 0}, _compute(calls, 0))
    with pytest.raises(ConfigError, match="data file"):
        CellRunner(tmp_path).run("c0", {"rounds": 3, "seed": 0}, _compute(calls, 0), context={"data file": "x"})
    (tmp_path / "runs" / "c0" / CELL_FILE).write_text("{not json")
    with pytest.raises(CorruptFileError, match="cell file .* is unreadable"):
        CellRunner(tmp_path).run("c0", {"rounds": 3, "seed": 0}, _compute(calls, 0))


def _sharing_study(tmp_path: Path, seeds: str = "[0]") -> Path:
    """The shipped sharing study, reduced to the noise levels 0 and 1 and ``seeds``."""
    study = tmp_path / "sharing.toml"
    study.write_text((CASES / "study_sharing.toml").read_text()
                     .replace('case = "sharing_breast_cancer.toml"',
                              f'case = "{(CASES / "sharing_breast_cancer.toml").as_posix()}"')
                     .replace("noise_levels = [0.0, 0.3, 1.0, 3.0, 10.0]", "noise_levels = [0.0, 1.0]")
                     .replace("seeds = [0, 1, 2]", f"seeds = {seeds}"))
    return study


def test_the_sharing_study_resumes_and_refuses_a_changed_study(tmp_path):
    from cvxdp.studies.sharing import run_sharing_study

    study = _sharing_study(tmp_path, seeds="[0, 1]")
    out = tmp_path / "o"
    first = run_sharing_study(study, out, epochs=4)
    results = pd.read_csv(out / "results.csv")
    (out / "runs" / "noise1_seed1" / "result.json").unlink()  # an interrupted cell
    second = run_sharing_study(study, out, epochs=4)

    assert (first["runs"], first["computed"], first["reused"]) == (3, 3, 0)
    assert (second["computed"], second["reused"]) == (1, 2)
    cols = ["noise", "seed", "final_objective", "final_test_logloss", "eps_total_basic"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv")[cols], results[cols])
    with pytest.raises(ConfigError, match="another configuration"):
        run_sharing_study(study, out, epochs=5)
    assert json.loads((out / "runs" / "noise0_seed0" / CELL_FILE).read_text())["key"] == "noise0_seed0"


def _graph_study(tmp_path: Path) -> Path:
    study = tmp_path / "graph.toml"
    study.write_text(f"""[study]
kind = "graph"
name = "mini"
case = "{(CASES / 'erm_madmm.toml').as_posix()}"
runs = 2
rounds = 3
[[setting]]
label = "DVP"
panel = "p"
algorithm = {{ name = "dvp", theta = 0.5 }}
privacy = {{ mechanism = "gamma", alpha = 3.0 }}
""")
    return study


@pytest.mark.parametrize(("kind", "defaults", "figures"), [("graph", "erm", "write_graph_figures"),
                                                          ("sharing", "vertical", "write_sharing_figures")])
def test_graph_and_sharing_cells_are_guarded_by_the_resolved_settings(kind, defaults, figures, tmp_path,
                                                                       monkeypatch):
    """A default of the template that the case file leaves unset changes (here: max_samples, which
    subsamples the data): the cached cells are of another problem and are refused, naming the setting."""
    import importlib

    module = importlib.import_module(f"cvxdp.studies.{kind}")
    template = importlib.import_module(f"cvxdp_models.{defaults}")
    monkeypatch.setattr(module, figures, lambda *args, **kwargs: [])  # figures are not what this is about
    study = (_graph_study if kind == "graph" else _sharing_study)(tmp_path)
    run = getattr(module, f"run_{kind}_study")
    options = {"rounds": 3, "progress": False} if kind == "graph" else {"epochs": 3}
    out = tmp_path / "o"

    with monkeypatch.context() as old_version:
        old_version.setitem(template.DEFAULTS, "max_samples", 200)
        first = run(study, out, **options)
        again = run(study, out, **options)
    assert (first["computed"], first["reused"]) == (2, 0) and (again["computed"], again["reused"]) == (0, 2)

    with pytest.raises(ConfigError, match=r"another configuration.*\[model\] setting 'max_samples' as resolved"):
        run(study, out, **options)
