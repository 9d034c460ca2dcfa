"""Every shipped study (cases/study_*.toml) run on a tiny case, and two such runs compared (issue 49: the study
loop's rewrite must not change a byte of what a study writes).

``python benchmarks/study_outputs.py run DIR`` writes each shipped study, made tiny (fewer mechanisms, epsilons,
seeds, rounds and runs; the equal-total companion of a grid study made tiny as well), into ``DIR/<study>/``;
``python benchmarks/study_outputs.py compare A B`` compares two such directories: ``results.csv``, ``histories.csv``,
``table.csv``, ``runs.csv``, ``curves.csv``, ``summary.csv`` (timing columns aside), ``ledger.json`` byte for byte
and ``report.md`` up to its timings. It prints one line per study and file, and exits 1 on any difference.

The FEMNIST studies read the LEAF sample in ``../shared/data/femnist_leaf`` (``--femnist DIR``); without it they
are skipped, and said to be.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import tomllib

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "cases"
#: measured, not computed: differ between any two runs
TIMING = {"wall_time", "solver_time", "compute_time", "elapsed_s", "seconds", "time_s"}
TABLES = ("results.csv", "histories.csv", "table.csv", "runs.csv", "curves.csv", "summary.csv")
#: report lines that state a time ("Whole study: 12.3 s.")
_SECONDS = re.compile(r"\d+(?:\.\d+)? s\b")

#: [study] entries that make each kind of study tiny
TINY: dict[str, dict[str, Any]] = {
    "grid": {"mechanisms": ["ObjG", "OutL"], "epsilons": [1.0], "local_updates": [1, 2], "seeds": [0, 1],
             "rounds": 3},
    "total": {"epsilons": [1.0], "seeds": [0, 1], "schedule": [[2.0, 3, 1]], "anchor_rounds": 3},
    "graph": {"runs": 2, "rounds": 4},
    "sharing": {"noise_levels": [0.0, 1.0], "seeds": [0, 1], "epochs": 3},
}
#: per study: further entries (fewer mechanisms or data sets where the shipped ones take minutes)
EXTRA: dict[str, dict[str, Any]] = {
    "study_case14_total": {"mechanisms": ["ObjG"], "anchors": ["InL", "InG"]},
    "study_case14_total_full": {"mechanisms": ["ObjL", "OutG"], "anchors": ["InG"]},
    "study_femnist_total": {"mechanisms": ["ObjG", "OutG"],
                            "anchors": ["OutG-once"],
                            "datasets": [{"name": "writers 0-2", "model": {"agents": 3}},
                                         {"name": "writers 3-5", "model": {"writers": [3, 4, 5]}}]},
    "study_silos_total": {"mechanisms": ["ObjG"], "anchors": ["ObjG-once", "central", "central-sqrtP", "optimum"],
                          "case": str(CASES / "digits_silos.toml"),
                          "datasets": [{"name": "small", "model": {"max_samples": 160, "total_samples": 120}},
                                       {"name": "small, 3 silos", "model": {"max_samples": 160,
                                                                            "total_samples": 120, "silos": 3}}]},
}


def _kind(raw: dict) -> str:
    return raw["study"].get("kind", "grid")


def _tiny(source: Path, target: Path, femnist: bool) -> Path:
    """``source`` made tiny into ``target`` (its case path made absolute; a grid's total companion too)."""
    raw = tomllib.loads(source.read_text())
    study = raw["study"]
    study["case"] = str((source.parent / study["case"]).resolve())
    study.update(TINY[_kind(raw)])
    study.update(EXTRA.get(source.stem, {}))
    if _kind(raw) == "graph":
        for setting in raw.get("setting", []):
            setting.pop("runs", None)
    if femnist:  # 3 writers: the case's declared sample count (of its first 10 writers) left out
        case = tomllib.loads(Path(study["case"]).read_text())
        case["model"].pop("total_samples", None)
        case["model"]["agents"] = 3
        small = target.parent / f"{target.stem}_case.toml"
        small.write_text(_toml(case))
        study["case"] = str(small)
    if "total" in study:
        study["total"] = _tiny(source.parent / study["total"], target.parent / f"{target.stem}_total.toml",
                               femnist).name
    target.write_text(_toml(_drop_none(raw)))
    return target


def _value(value: Any) -> str:
    """A TOML value (inline tables and arrays; a study file's entries hold nothing else)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    return json.dumps(value)


def _toml(raw: dict) -> str:
    """A study or case file: each table with its entries, array-of-tables ([[setting]]) as such."""
    lines = []
    for name, table in raw.items():
        if isinstance(table, list):
            for row in table:
                lines += [f"[[{name}]]", *(f"{k} = {_value(v)}" for k, v in row.items()), ""]
        else:
            lines += [f"[{name}]", *(f"{k} = {_value(v)}" for k, v in table.items()), ""]
    return "\n".join(lines)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def run_all(out: Path, femnist: Path | None) -> None:
    """Every shipped study, tiny, into ``out/<study>/`` (one after another, one worker)."""
    from cvxdp.studies import run_graph_study, run_sharing_study, run_study, run_total_study

    out.mkdir(parents=True, exist_ok=True)
    files = out / "files"
    files.mkdir(exist_ok=True)
    for source in sorted(CASES.glob("study_*.toml")):
        raw = tomllib.loads(source.read_text())
        case = tomllib.loads((source.parent / raw["study"]["case"]).read_text())
        needs_femnist = case.get("model", {}).get("dataset") == "femnist" and source.stem != "study_silos_total"
        if needs_femnist and femnist is None:
            print(f"{source.stem}: skipped (no FEMNIST LEAF sample)", flush=True)
            continue
        path = _tiny(source, files / source.name, needs_femnist)
        kind = _kind(raw)
        data = femnist if needs_femnist else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # few rounds: the runs' convergence warnings are expected
            if kind == "grid":
                info = run_study(path, out / source.stem, progress=False, data=data, workers=1)
            elif kind == "total":
                info = run_total_study(path, out / source.stem, progress=False, data=data, workers=1)
            elif kind == "graph":
                info = run_graph_study(path, out / source.stem, progress=False)
            else:
                info = run_sharing_study(path, out / source.stem)
        print(f"{source.stem}: {info['runs']} runs -> {out / source.stem}", flush=True)


def _untimed(file: Path) -> Any:
    """A JSON file's content without its timing entries."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIMING}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(json.loads(file.read_text()))


def _report(text: str) -> str:
    return _SECONDS.sub("# s", text)


def compare(a: Path, b: Path) -> list[str]:
    """The differences between two ``run`` directories (empty: the same outputs)."""
    problems = []
    for study in sorted(p.name for p in a.iterdir() if p.is_dir() and p.name != "files"):
        for sub in ("", "total"):
            da, db = a / study / sub, b / study / sub
            if not da.is_dir():
                continue
            for name in TABLES:
                if not (da / name).exists():
                    continue
                if not (db / name).exists():
                    problems.append(f"{study}/{sub}/{name}: missing in {b}")
                    continue
                x, y = (pd.read_csv(d / name, dtype=str, keep_default_na=False) for d in (da, db))
                if list(x.columns) != list(y.columns):
                    problems.append(f"{study}/{sub}/{name}: columns differ")
                    continue
                cols = [c for c in x.columns if c not in TIMING]
                if not x[cols].equals(y[cols]):
                    problems.append(f"{study}/{sub}/{name}: values differ")
            if (da / "ledger.json").exists() and (da / "ledger.json").read_bytes() != (db / "ledger.json").read_bytes():
                problems.append(f"{study}/{sub}/ledger.json: bytes differ")
            if (da / "baselines.json").exists() and _untimed(da / "baselines.json") != _untimed(db / "baselines.json"):
                problems.append(f"{study}/{sub}/baselines.json: differs beyond timings")
            if (da / "report.md").exists() and _report((da / "report.md").read_text()) != \
                    _report((db / "report.md").read_text()):
                problems.append(f"{study}/{sub}/report.md: differs beyond timings")
            # every study writes study.json since the one study loop (the sharing study did not before)
            shown = sorted(p.name for p in da.iterdir() if p.is_file() and p.name != "study.json")
            if shown != sorted(p.name for p in db.iterdir() if p.is_file() and p.name != "study.json"):
                problems.append(f"{study}/{sub}: other files ({shown})")
        print(f"{study}: compared", flush=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("out", type=Path)
    run.add_argument("--femnist", type=Path, default=ROOT.parent / "shared" / "data" / "femnist_leaf")
    cmp = sub.add_parser("compare")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        run_all(args.out, args.femnist if args.femnist.is_dir() else None)
        return 0
    problems = compare(args.a, args.b)
    print("\n".join(problems) or "the same outputs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
