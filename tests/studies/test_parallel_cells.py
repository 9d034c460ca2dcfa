"""Study cells run in parallel (cvxdp.studies.cells.run_cells, issue 51): the main job's grid and its equal-total
companion on two worker processes give the same files, bit for bit, as one after another; a resumed study computes
only its unfinished cells; a worker's error arrives as itself; the progress bar says the time left."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

import cvxdp
import cvxdp.studies.grid
from cvxdp.errors import ConfigError, InvalidParameterError
from cvxdp.studies.cells import CellJob, CellRunner, run_cells
from cvxdp.studies.grid import run_study

pytest.importorskip("pandapower")

CASES = Path(__file__).resolve().parents[2] / "cases"
#: measured, not computed: differ between any two runs
TIMING = {"wall_time", "solver_time", "compute_time", "elapsed_s"}


def _tiny_main_job(tmp_path: Path, with_entry) -> Path:
    """The main job in small: the shipped study files with fewer cells (the case14 grid: two mechanisms, J in {1, 2},
    two seeds, 3 rounds; its equal-total companion: ObjG and the InL anchor, 3 rounds)."""
    total, study = tmp_path / "total.toml", tmp_path / "grid.toml"
    total.write_text((CASES / "study_case14_total.toml").read_text())
    for body in (f'case = "{(CASES / "case14_3zones_cost.toml").as_posix()}"', 'mechanisms = ["ObjG"]',
                 'anchors = ["InL"]', "epsilons = [1.0]", "seeds = [0, 1]", "schedule = [[2.0, 3, 1]]",
                 "anchor_rounds = 3"):
        with_entry(total, body)
    study.write_text((CASES / "study_case14.toml").read_text())
    for body in (f'case = "{(CASES / "case14_3zones.toml").as_posix()}"', 'mechanisms = ["ObjG", "OutL"]',
                 "epsilons = [1.0]", "local_updates = [1, 2]", "seeds = [0, 1]", "rounds = 3", 'total = "total.toml"'):
        with_entry(study, body)
    return study


def _run(study: Path, out: Path, **kwargs) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = run_study(study, out, progress=False, **kwargs)
    return info, [str(w.message) for w in caught]


def _same_outputs(a: Path, b: Path) -> None:
    for sub in ("", "total"):
        for name in ("results.csv", "histories.csv", "table.csv"):
            if not (a / sub / name).exists():
                continue
            x, y = (pd.read_csv(d / sub / name, dtype=str, keep_default_na=False) for d in (a, b))
            assert list(x.columns) == list(y.columns), name
            cols = [c for c in x.columns if c not in TIMING]
            pd.testing.assert_frame_equal(x[cols], y[cols], check_exact=True, obj=f"{sub}/{name}")
        for name in ("ledger.json", "report.md"):
            assert (a / sub / name).read_bytes() == (b / sub / name).read_bytes(), f"{sub}/{name}"


@pytest.fixture
def no_grid_figures(monkeypatch):
    """The grid's figures (seconds) are not what this is about; the total study's one figure stays."""
    monkeypatch.setattr(cvxdp.studies.grid, "write_figures", lambda *args, **kwargs: [])


def test_cells_in_parallel_give_the_same_files_bit_for_bit_and_resume(tmp_path, no_grid_figures, with_entry):
    study = _tiny_main_job(tmp_path, with_entry)
    serial, serial_warnings = _run(study, tmp_path / "serial", workers=1)
    parallel, parallel_warnings = _run(study, tmp_path / "parallel", workers=2)
    assert (serial["runs"], serial["computed"]) == (parallel["runs"], parallel["computed"]) == (10, 10)
    _same_outputs(tmp_path / "serial", tmp_path / "parallel")
    assert parallel_warnings == serial_warnings  # collected in the cells' order, whichever process ran them

    for cell in ("OutL_eps1_J2_seed1", "ObjG_eps1_J1_seed0"):  # interrupted cells
        (tmp_path / "parallel" / "runs" / cell / "result.json").unlink()
    (tmp_path / "parallel" / "total" / "runs" / "InL_total1_T3_J1_seed1" / "result.json").unlink()
    resumed, _ = _run(study, tmp_path / "parallel", workers=2)
    assert (resumed["computed"], resumed["reused"]) == (2, 8)
    _same_outputs(tmp_path / "serial", tmp_path / "parallel")


def _agents():
    x = cp.Variable(2, name="x")
    return [cvxdp.Agent("a", cp.sum_squares(x - np.array([1.0, 2.0])), [x <= 5, x >= -5], shared={"x": x})]


def solved(seed: int, cell_dir: Path):
    """A cell's compute (module level: it pickles to a worker)."""
    if seed < 0:
        raise ConfigError(f"cell {cell_dir.name}: a seed must be >= 0. Got {seed} instead.")
    warnings.warn(f"seed {seed} ran", UserWarning, stacklevel=2)
    result = cvxdp.solve(_agents(), algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=3), seed=seed)
    return result, {"objective": float(result.history["objective"].iloc[-1]), "seed": seed}


def test_run_cells_keeps_the_order_counts_warnings_and_raises_a_workers_error(tmp_path, capsys):
    runner = CellRunner(tmp_path / "a")
    jobs = [CellJob(f"c{s}", {"seed": s}, functools.partial(solved, s), work=1.0 + s) for s in range(4)]
    (outcomes,) = run_cells([(runner, jobs)], workers=2, progress=True, desc="tiny")
    assert [summary["seed"] for _, summary in outcomes] == [0, 1, 2, 3]  # the cells' order, not the finishing order
    assert (runner.computed, runner.reused) == (4, 0)
    ran = [group[1:] for group in runner.warnings.values() if "ran" in group[1]]
    assert ran == [["seed 0 ran", 4]]  # the first cell's message, counted once per cell
    bar = capsys.readouterr().err
    assert "tiny: 100%" in bar and " left" in bar and "4/4 runs on 2 process(es)" in bar

    other = CellRunner(tmp_path / "b")
    bad = [CellJob("ok", {"seed": 1}, functools.partial(solved, 1)),
           CellJob("bad", {"seed": -1}, functools.partial(solved, -1))]
    with pytest.raises(ConfigError, match=r"cell bad: a seed must be >= 0. Got -1 instead."):
        run_cells([(other, bad)], workers=2, progress=False)
    with pytest.raises(InvalidParameterError, match="'workers' parameter of run_cells"):
        run_cells([(other, bad)], workers=0, progress=False)
