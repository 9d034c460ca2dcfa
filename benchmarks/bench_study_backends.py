"""A study on Ray: one Ray instance and its actors kept for every cell vs a backend made afresh in each cell.

    python benchmarks/bench_study_backends.py                # the toy case, 4 cells of 20 rounds
    python benchmarks/bench_study_backends.py --cells 8 --rounds 5

Runs the same study (the shipped toy case, ObjPert Gaussian at several epsilons) three ways in one process:
serial; on Ray with a new backend per cell (what studies did before ``cvxdp.config.build.StudyBackends``: each cell
started Ray and its worker processes and shut them down again); on Ray as studies run now (Ray started once,
the actors emptied and reused from cell to cell). Wall time of the whole study each; the three must give the
same numbers (checked). Timings depend on the machine's load: the script prints the load average beside them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

import cvxdp.studies.grid
from cvxdp.config.build import StudyBackends, make_backend

CASES = Path(__file__).resolve().parents[1] / "cases"


class BackendPerCell(StudyBackends):
    """The behaviour before StudyBackends: every cell gets a new backend (Ray starts and stops in each)."""

    def __call__(self, table: dict) -> object:
        return make_backend(table)


def run(study: Path, out: Path, backend: str | None, per_cell: bool) -> tuple[float, pd.DataFrame]:
    kept = cvxdp.studies.grid.StudyBackends
    cvxdp.studies.grid.StudyBackends = BackendPerCell if per_cell else kept
    try:
        start = time.perf_counter()
        cvxdp.studies.grid.run_study(study, out, progress=False, run={"backend": backend})
        seconds = time.perf_counter() - start
    finally:
        cvxdp.studies.grid.StudyBackends = kept
    return seconds, pd.read_csv(out / "results.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=4, help="cells (epsilons) of the study")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per cell")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cvxdp-bench-study-"))
    try:
        shutil.copy(CASES / "toy.toml", tmp / "toy.toml")
        epsilons = ", ".join(f"{0.5 * 2 ** i:g}" for i in range(args.cells))
        study = tmp / "study.toml"
        study.write_text(f'[study]\ncase = "toy.toml"\nmechanisms = ["ObjG"]\nepsilons = [{epsilons}]\n'
                         f"rounds = {args.rounds}\nbaseline = false\n")
        rows, tables = [], []
        for label, backend, per_cell in (("serial", None, False), ("ray, a backend per cell", "ray", True),
                                         ("ray, kept for the study", "ray", False)):
            seconds, table = run(study, tmp / label.replace(" ", "_").replace(",", ""), backend, per_cell)
            rows.append((label, seconds))
            tables.append(table)
        cols = ["cell", "objective", "consensus_residual", "eps_pld"]
        same = all(t[cols].equals(tables[0][cols]) for t in tables[1:])
        print(f"{args.cells} cells x {args.rounds} rounds (toy case); load: {os.getloadavg()[0]:.1f}")
        for label, seconds in rows:
            print(f"  {label:<26} {seconds:7.1f} s")
        print(f"  kept vs per cell: {rows[1][1] / rows[2][1]:.2f}x faster; same numbers on all three: {same}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
