"""The README's main job, timed as a user runs it: ``cvxdp study cases/study_case14.toml --out DIR``.

    python benchmarks/bench_main_job.py                         # every core (the default), once
    python benchmarks/bench_main_job.py --workers 1 --workers 0  # one after another, then every core (0)
    python benchmarks/bench_main_job.py --repeat 2 --reference results/case14   # and compare the outputs

Each run is a fresh ``cvxdp study`` process (imports, the equal-total companion study, the grid, figures and report
included) into a new temporary directory; the script prints its wall time beside the load average (``uptime``)
before and after it, and, for several runs, the ratios to the first one (measured in one sitting). With
``--reference DIR`` (a finished main job, e.g. from the code before a change) it checks that the outputs are the
same: ``results.csv``, ``histories.csv`` and ``table.csv`` cell by cell without their timing columns (wall, solver
and elapsed times), ``ledger.json`` and ``report.md`` byte for byte, in the study and its ``total/`` companion.
The goal of issue 51 is at most 60 s on a calm 2-core machine (101 s before, one cell after another).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "cases" / "study_case14.toml"
#: measured, not computed: they differ between any two runs
TIMING = {"wall_time", "solver_time", "compute_time", "elapsed_s"}


def load() -> str:
    """The load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_main_job(out: Path, workers: int) -> float:
    """Wall seconds of one ``cvxdp study`` process (``workers`` 0: the default, every core)."""
    cmd = [sys.executable, "-m", "cvxdp.cli.main", "study", str(STUDY), "--out", str(out), "--no-progress"]
    cmd += ["--workers", str(workers)] if workers else []
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"cvxdp study failed:\n{done.stderr[-3000:]}")
    return seconds


def differences(out: Path, reference: Path) -> list[str]:
    """The output files of ``out`` that differ from ``reference`` (timing columns ignored)."""
    bad = []
    for sub in ("", "total"):
        for name in ("results.csv", "histories.csv", "table.csv", "ledger.json", "report.md"):
            a, b = out / sub / name, reference / sub / name
            if not a.exists() and not b.exists():
                continue
            if not a.exists() or not b.exists():
                bad.append(f"{sub}/{name} (missing)")
            elif name.endswith(".csv"):
                x, y = (pd.read_csv(f, dtype=str, keep_default_na=False) for f in (a, b))
                cols = [c for c in x.columns if c not in TIMING]
                if list(x.columns) != list(y.columns) or not x[cols].equals(y[cols]):
                    bad.append(f"{sub}/{name}")
            elif a.read_bytes() != b.read_bytes():
                bad.append(f"{sub}/{name}")
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, action="append", default=None,
                        help="cvxdp study --workers (0: the default, every core); repeat to compare in one sitting")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each setting, alternating")
    parser.add_argument("--reference", type=Path, default=None, help="a finished main job to compare outputs with")
    parser.add_argument("--keep", type=Path, default=None, help="keep the last run's outputs here")
    args = parser.parse_args()
    settings = args.workers or [0]
    print(f"main job: cvxdp study {STUDY.relative_to(ROOT)} on {os.cpu_count()} cores; load before {load()}")
    times: dict[int, list[float]] = {w: [] for w in settings}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for workers in settings:
                out = Path(tmp) / f"run{i}-w{workers}"
                seconds = run_main_job(out, workers)
                times[workers].append(seconds)
                what = "every core" if workers == 0 else f"--workers {workers}"
                print(f"  {what:12s} {seconds:7.1f} s   load after {load()}", flush=True)
                if args.reference is not None:
                    bad = differences(out, args.reference)
                    print("    outputs: " + (f"DIFFERENT: {', '.join(bad)}" if bad else
                                             "same as the reference (timing columns aside)"), flush=True)
                if args.keep is not None:
                    shutil.rmtree(args.keep, ignore_errors=True)
                    shutil.copytree(out, args.keep)
    first = min(times[settings[0]])
    for workers, values in times.items():
        what = "every core" if workers == 0 else f"--workers {workers}"
        print(f"{what}: best {min(values):.1f} s of {len(values)}" +
              (f" ({first / min(values):.2f}x the first setting)" if len(settings) > 1 else ""))
    print(f"load after {load()}")


if __name__ == "__main__":
    main()
