"""Start-up cost of ``import cvxdp`` and of the commands that do not solve, before and after (one run).

Every command runs in a fresh interpreter (``sys.executable``), alternating between the trees so that both
see the same machine load; the table shows the median wall time over ``--repeats`` runs, the heavy packages
each command left in ``sys.modules`` and, for ``import cvxdp`` and ``cvxdp --version``, the cumulative
``python -X importtime`` of the top-level imports. ``--baseline REF`` extracts ``cvxdp/`` and ``cases/``
of a git revision (e.g. the commit before lazy loading) into a temporary directory and measures it beside
the working tree.

    python benchmarks/bench_startup.py [--baseline REF] [--repeats 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("cvxpy", "pandas", "networkx", "pandapower", "scipy", "scipy.sparse", "dp_accounting", "tqdm", "ray",
         "matplotlib", "sklearn", "numpy")
CLI = "import sys; from cvxdp.cli.main import main; sys.argv = ['cvxdp', *sys.argv[1:]]; main()"
COMMANDS: dict[str, list[str]] = {
    "import cvxpy (reference)": ["-c", "import cvxpy"],
    "import cvxdp": ["-c", "import cvxdp"],
    "cvxdp --version": ["-c", CLI, "--version"],
    "cvxdp --help": ["-c", CLI, "--help"],
    "cvxdp cases --json": ["-c", CLI, "cases", "--json"],
    "cvxdp privacy --json": ["-c", CLI, "privacy", "--noise", "gaussian", "--scale", "1", "--steps", "100",
                             "--delta", "1e-6", "--json"],
}
PROBE = ("import atexit, sys; atexit.register(lambda: sys.__stderr__.write('\\nLOADED ' + ' '.join("
         f"m for m in {HEAVY!r} if m in sys.modules) + '\\n'))")


def extract(ref: str, into: Path) -> Path:
    """``cvxdp/`` and ``cases/`` of git revision ``ref`` under ``into``."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref, "cvxdp", "cases"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def run(tree: Path, argv: list[str], extra: list[str] | None = None) -> tuple[float, str]:
    """Wall seconds of one fresh interpreter running ``argv`` with ``tree`` first on the path; its stderr."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, *(extra or []), *argv]
    if argv[0] == "-c":  # report what the command imported, at interpreter exit
        cmd = [sys.executable, *(extra or []), "-c", PROBE + "\n" + argv[1], *argv[2:]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed in {tree}:\n{proc.stderr}")
    return elapsed, proc.stderr


def loaded(stderr: str) -> list[str]:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("LOADED")]
    return lines[-1].split()[1:] if lines else []


def importtime(tree: Path, argv: list[str], top: int = 6) -> dict[str, float]:
    """Cumulative ``-X importtime`` (seconds) of the heaviest top-level imports of one command."""
    _, err = run(tree, argv, ["-X", "importtime"])
    rows = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if name.startswith(" ") and not name.startswith("  ") and cumulative.strip().isdigit():  # top level
            rows[name.strip()] = max(rows.get(name.strip(), 0.0), int(cumulative) / 1e6)
    return dict(sorted(rows.items(), key=lambda kv: -kv[1])[:top])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=None, help="git revision to measure beside the working tree")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        trees = {"now": REPO}
        if args.baseline:
            trees = {f"baseline {args.baseline}": extract(args.baseline, Path(tmp)), **trees}
        times: dict[str, dict[str, list[float]]] = {t: {c: [] for c in COMMANDS} for t in trees}
        modules: dict[str, dict[str, list[str]]] = {t: {} for t in trees}
        for _ in range(args.repeats):  # alternate trees and commands: both see the same load
            for label, argv_ in COMMANDS.items():
                for tree, path in trees.items():
                    seconds, err = run(path, argv_)
                    times[tree][label].append(seconds)
                    modules[tree][label] = loaded(err)
        profile = {tree: {label: importtime(path, COMMANDS[label]) for label in ("import cvxdp", "cvxdp --version")}
                   for tree, path in trees.items()}

    out = {"python": sys.version.split()[0], "repeats": args.repeats,
           "median_s": {t: {c: statistics.median(v) for c, v in cs.items()} for t, cs in times.items()},
           "heavy_modules": modules, "importtime_s": profile}
    if args.json:
        print(json.dumps(out))
        return out
    names = list(trees)
    width = max(map(len, COMMANDS))
    print(f"median wall time of a fresh interpreter over {args.repeats} runs (s)")
    print(f"{'':{width}}  " + "  ".join(f"{n:>22}" for n in names))
    for label in COMMANDS:
        print(f"{label:{width}}  " + "  ".join(f"{out['median_s'][n][label]:22.3f}" for n in names))
    for n in names:
        print(f"\n[{n}] heavy packages left in sys.modules")
        for label in COMMANDS:
            print(f"  {label:{width}}  {' '.join(modules[n][label]) or '-'}")
        for label, rows in profile[n].items():
            print(f"  importtime of {label}: " + ", ".join(f"{k} {v:.3f} s" for k, v in rows.items()))
    return out


if __name__ == "__main__":
    main()
