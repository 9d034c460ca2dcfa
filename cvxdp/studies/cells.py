"""The one resumable cell runner of the studies (consensus, graph and sharing; SPEC §6).

A *cell* is one configuration of a study (one run). ``CellRunner(out).run(key, config, compute)`` keeps it in
``out/runs/<key>/``:

* ``summary.json`` (the cell's flat summary), then ``cell.json`` (the fingerprint of the cell's
  configuration, :func:`cvxdp.run.storage.fingerprint`), then the saved :class:`~cvxdp.run.results.Result`, whose
  ``result.json`` is written last: a cell is finished iff all three exist. Every file is written atomically
  (:mod:`cvxdp.run.storage`), so a killed study leaves at most one unfinished cell.
* On a rerun a finished cell is loaded, not recomputed. A cell whose stored fingerprint differs from the
  configuration asked for now (the study file, its case, an override such as ``--rounds``, the data, or a
  ``[model]`` setting as the template resolves it, defaults included) is refused with an error naming the
  changed components: results of two configurations are never mixed in one directory. Every study passes
  :func:`cvxdp.config.build.settings_context` (data hashes + resolved settings, the same components as a run's
  checkpoint) as the cell's ``context``.
* ``compute(cell_dir)`` runs the cell; it may checkpoint into ``cell_dir`` (the runner removes the checkpoint
  once the cell is stored), so an interrupted cell resumes mid-run.

:func:`run_cells` runs the unfinished cells of one or several studies at once on a pool of worker processes (every
core by default; issue 51), the longest first by their public work estimate, with one progress bar that estimates the
time left. The cells are independent runs with their own seeds, so every number is the same bit for bit as one after
another; the results come back in the studies' cell order and each cell's warnings are collected in that order.
Each process builds a case's template instance once (:func:`cvxdp.config.build.case_instance`); the workers start
from a fork server, never from the study's process, whose solvers' threads a forked copy could not use.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from tqdm.auto import tqdm

from ..errors import ConfigError, CorruptFileError, check_int
from ..run import (
    RESULT_FILE,
    Result,
    atomic_write_text,
    fingerprint,
    jsonable,
    load_result,
    prepare_dir,
    remove_checkpoint,
)

__all__ = ["CELL_FILE", "SUMMARY_FILE", "CellJob", "CellRunner", "cell_config", "default_workers", "in_parallel",
           "run_cells"]

CELL_FILE = "cell.json"
SUMMARY_FILE = "summary.json"
CELL_FORMAT = "cvxdp-study-cell/1"


def cell_config(case: Any) -> dict[str, Any]:
    """A case's cell configuration: its tables without the case file's location (the data it names are
    fingerprinted by content, :func:`cvxdp.run.storage.case_context`) and without where it runs (``backend``,
    ``ray_*``: the same seeds give the same numbers on every backend), so a moved study still resumes, on any
    backend."""
    tables = {k: v for k, v in case.to_dict().items() if k != "path"}
    if isinstance(tables.get("run"), dict):
        tables["run"] = {k: v for k, v in tables["run"].items() if k not in PLACEMENT_KEYS}
    return tables


#: [run] entries that only say where the nodes run (not part of a cell's identity)
PLACEMENT_KEYS = frozenset({"backend", "ray_cpus", "ray_address", "ray_min_variables"})


class CellRunner:
    """Runs a study's cells into ``out/runs/<key>/``, skipping finished ones (see the module docstring).

    Parameters
    ----------
    out : str or Path
        The study's output directory (``runs/`` is created in it).
    what : str
        The kind of study, for messages.

    Attributes
    ----------
    computed, reused : int
        Cells run by this runner and cells loaded from an earlier run.
    """

    def __init__(self, out: str | Path, *, what: str = "study") -> None:
        self.root = prepare_dir(Path(out) / "runs", f"{what} directory")
        self.what = what
        self.computed = 0
        self.reused = 0
        #: the warnings of the cells computed by :func:`run_cells`, grouped (:func:`report_warnings` shows them)
        self.warnings: dict[tuple, list] = {}

    def cell_dir(self, key: str) -> Path:
        """The directory of cell ``key``."""
        return self.root / key

    def _stored_fingerprint(self, cell: Path) -> dict[str, str] | None:
        file = cell / CELL_FILE
        if not file.exists():
            return None
        try:
            stored = json.loads(file.read_text())
            return dict(stored["fingerprint"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptFileError(f"The {self.what} cell file {str(file)!r} is unreadable ({type(exc).__name__}: "
                                   f"{exc}); delete the cell directory to recompute it.") from None

    def _check(self, key: str, cell: Path, expected: Mapping[str, str]) -> bool:
        """Whether ``cell`` holds a finished run of ``expected``; raises if it holds another configuration."""
        stored = self._stored_fingerprint(cell)
        if stored is None:
            return False
        changed = [k for k in sorted(set(stored) | set(expected)) if stored.get(k) != expected.get(k)]
        if changed:
            shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
            raise ConfigError(
                f"The {self.what} directory {str(self.root.parent)!r} holds cell {key!r} of a study with another "
                f"configuration or other data (changed: {shown}); it will not mix results of two configurations. "
                "Pass another --out, or delete that directory to start the study afresh.")
        return (cell / RESULT_FILE).exists() and (cell / SUMMARY_FILE).exists()

    def run(self, key: str, config: Mapping[str, Any], compute: Callable[[Path], tuple[Result, dict[str, Any]]],
            *, context: Mapping[str, Any] | None = None) -> tuple[Result, dict[str, Any]]:
        """The cell ``key`` of configuration ``config``: loaded when finished, else computed and stored.

        Parameters
        ----------
        key : str
            The cell's directory name (unique within the study).
        config : dict
            Everything that determines the cell's run (JSON-able); its fingerprint guards the cell.
        compute : callable(cell_dir) -> (Result, dict)
            Runs the cell and returns its result and flat summary.
        context : dict, optional
            Further fingerprint components (the studies pass :func:`cvxdp.config.build.settings_context`: data file
            hashes and the template's resolved ``[model]`` settings).

        Returns
        -------
        (Result, dict)
            The cell's result and summary (as stored).
        """
        expected = fingerprint(jsonable(dict(config)), context=dict(context or {}))
        if self._check(key, self.cell_dir(key), expected):
            self.reused += 1
            return self.load(key)
        result, summary = _store(self.cell_dir(key), self.what, key, expected, *compute(self.cell_dir(key)))
        self.computed += 1
        return result, summary

    def load(self, key: str) -> tuple[Result, dict[str, Any]]:
        """The stored result and summary of the finished cell ``key``."""
        cell = self.cell_dir(key)
        return load_result(cell), json.loads((cell / SUMMARY_FILE).read_text())


def _store(cell: Path, what: str, key: str, expected: Mapping[str, str], result: Result,
           summary: Mapping[str, Any]) -> tuple[Result, dict[str, Any]]:
    """Write a computed cell (summary, fingerprint, then the result: ``result.json`` last marks it finished)."""
    summary = jsonable(dict(summary))
    atomic_write_text(cell / SUMMARY_FILE, json.dumps(summary, indent=2), f"{what} cell summary")
    atomic_write_text(cell / CELL_FILE, json.dumps({"format": CELL_FORMAT, "key": key, "fingerprint": expected},
                                                   indent=2), f"{what} cell file")
    result.save(cell, overwrite=True)  # result.json last: the cell is finished
    remove_checkpoint(cell)
    return result, summary


@dataclass
class CellJob:
    """One cell for :func:`run_cells`.

    Attributes
    ----------
    key : str
        The cell's directory name (unique within its study).
    config : dict
        Everything that determines the cell's run (JSON-able); its fingerprint, with ``context``, guards the cell.
    compute : callable(cell_dir) -> (Result, dict)
        Runs the cell. With more than one worker it goes to another process, so it must pickle: a module-level
        function or a :func:`functools.partial` of one with picklable arguments (a case, not its built agents).
    context : dict
        Further fingerprint components (:func:`cvxdp.config.build.settings_context`).
    work : float
        A public estimate of the cell's cost (e.g. rounds x (1 + local updates)): the longest cells start first, and
        the progress bar's estimate of the time left counts it.
    """

    key: str
    config: Mapping[str, Any]
    compute: Callable[[Path], tuple[Result, dict[str, Any]]]
    context: Mapping[str, Any] = field(default_factory=dict)
    work: float = 1.0


def default_workers() -> int:
    """Every core this process may use (its CPU affinity where the platform tells it, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


class _Entry(NamedTuple):
    """A cell of :func:`run_cells`: its study's position, its own in that study, the study's runner, the cell and
    its fingerprint."""

    study: int
    index: int
    runner: CellRunner
    job: CellJob
    expected: dict[str, str]


def _compute_cell(root: Path, what: str, key: str, expected: Mapping[str, str],
                  compute: Callable[[Path], tuple[Result, dict[str, Any]]]) -> tuple[Result, dict, list]:
    """Run and store one cell (in a worker or in the study's process); its warnings are recorded, not shown, and
    returned as ``(category, message)`` pairs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, summary = compute(root / key)
    result, summary = _store(root / key, what, key, expected, result, summary)
    return result, summary, [(w.category, str(w.message)) for w in caught]


def run_cells(studies: Sequence[tuple[CellRunner, Sequence[CellJob]]], *, workers: int | None = None,
              progress: bool = True, desc: str = "study") -> list[list[tuple[Result, dict[str, Any]]]]:
    """Every cell of one or several studies: finished ones loaded, the others computed on ``workers`` processes.

    Parameters
    ----------
    studies : list of (CellRunner, list of CellJob)
        Each study's runner and its cells. Every finished cell is checked against its configuration first (a cell of
        another configuration is refused before anything runs).
    workers : int, optional
        Processes computing cells at once. Default: every core (:func:`default_workers`); never more than the
        cells to compute. ``1`` computes them one after another in this process (the only way for cells that
        share something a process cannot send, such as a running Ray backend).
    progress : bool
        One progress bar over all cells, weighted by their work estimates, with the time left.
    desc : str
        The bar's label.

    Returns
    -------
    list of list of (Result, dict)
        Per study, per cell in the given order: its result and summary. Each runner's ``computed``, ``reused`` and
        ``warnings`` are updated in that order too, so the outputs do not depend on which process ran what.
    """
    workers = default_workers() if workers is None else check_int(workers, "workers", "run_cells", 1)
    entries = [_Entry(s, i, runner, job, fingerprint(jsonable(dict(job.config)), context=dict(job.context)))
               for s, (runner, jobs) in enumerate(studies) for i, job in enumerate(jobs)]
    finished = {(e.study, e.index) for e in entries if e.runner._check(e.job.key, e.runner.cell_dir(e.job.key),
                                                                         e.expected)}
    pending = [e for e in entries if (e.study, e.index) not in finished]
    total = sum(e.job.work for e in entries)
    # the time left from the average rate so far (smoothing=0): the cells differ in length and start longest first
    bar = tqdm(total=total, initial=total - sum(e.job.work for e in pending), disable=not progress, desc=desc,
               smoothing=0, bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, {remaining} left{postfix}")
    done = len(entries) - len(pending)
    processes = min(workers, len(pending))

    def advance(entry: _Entry) -> None:
        nonlocal done
        done += 1
        bar.set_postfix_str(f"{done}/{len(entries)} runs on {max(processes, 1)} process(es)", refresh=False)
        bar.update(entry.job.work)

    bar.set_postfix_str(f"{done}/{len(entries)} runs on {max(processes, 1)} process(es)")
    outcomes: dict[tuple[int, int], tuple] = {}
    try:
        if processes <= 1:
            for entry in pending:
                outcomes[entry.study, entry.index] = _compute_cell(*_task(entry))
                advance(entry)
        else:
            outcomes.update(_pool(pending, processes, advance))
    finally:
        bar.close()
    out: list[list] = [[] for _ in studies]
    for entry in entries:
        runner = entry.runner
        if (entry.study, entry.index) in finished:
            runner.reused += 1
            out[entry.study].append(runner.load(entry.job.key))
            continue
        result, summary, caught = outcomes[entry.study, entry.index]
        for category, message in caught:
            _collect(runner.warnings, category, message)
        runner.computed += 1
        out[entry.study].append((result, summary))
    return out


def _worker_pool(processes: int) -> Any:
    """A pool of ``processes`` workers that ignore Ctrl-C (this process answers it by ending them: the pool's
    ``terminate``, which leaving its block calls).

    The workers start from a fork server (a fresh process that has imported cvxdp and nothing else), not from this
    process: a solver's thread pool that this process started (Clarabel's Rayon threads, after any solve here) does
    not survive ``fork``, and a forked worker that solved with it waited for ever."""
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload([__name__])  # each worker starts with cvxdp imported
    return context.Pool(processes, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))


def in_parallel(calls: Sequence[tuple[Callable, tuple, dict]], workers: int = 1) -> list[Any]:
    """``[function(*args, **kwargs) for function, args, kwargs in calls]`` on up to ``workers`` processes (the
    functions module-level, the arguments picklable; a study's figures), in this process for one worker or one
    call."""
    if min(workers, len(calls)) <= 1:
        return [function(*args, **kwargs) for function, args, kwargs in calls]
    with _worker_pool(min(workers, len(calls))) as pool:
        return pool.starmap(_call, calls)


def _call(function: Callable, args: tuple, kwargs: dict) -> Any:
    return function(*args, **kwargs)


def _task(entry: _Entry) -> tuple:
    """The arguments of :func:`_compute_cell` for ``entry`` (picklable when its compute is)."""
    return entry.runner.root, entry.runner.what, entry.job.key, entry.expected, entry.job.compute


def _pool(pending: list[_Entry], processes: int, advance: Callable[[_Entry], None]) -> dict[tuple[int, int], tuple]:
    """Compute ``pending`` cells on a pool of ``processes`` workers, the longest first. The workers ignore Ctrl-C:
    this process answers it (and the first error of a cell) by ending them (the pool's ``terminate``), so no queued
    cell starts afterwards; every cell stored before stays, and a rerun resumes."""
    order = sorted(range(len(pending)), key=lambda k: -pending[k].job.work)
    outcomes: dict[tuple[int, int], tuple] = {}
    with _worker_pool(processes) as pool:
        for k, outcome in pool.imap_unordered(_compute_task, [(k, *_task(pending[k])) for k in order]):
            entry = pending[k]
            outcomes[entry.study, entry.index] = outcome
            advance(entry)
    return outcomes


def _compute_task(task: tuple) -> tuple[int, tuple]:
    return task[0], _compute_cell(*task[1:])


#: what tells one run's warning from another's of the same kind: numbers and quoted names
_VARYING = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?|'[^']*'")


def _collect(collected: dict[tuple, list], category: type[Warning], message: str) -> None:
    key = (category, _VARYING.sub("#", message))
    if key in collected:
        collected[key][2] += 1
    else:
        collected[key] = [category, message, 1]


def report_warnings(collected: dict[tuple, list], shown: int = 5) -> None:
    """The study's warnings, once each at its end (not into the progress bar, not once per run): the first
    ``shown`` groups with the number of runs that raised them, then how many more there were."""
    groups = list(collected.values())
    for category, message, runs in groups[:shown]:
        other = " (the first; the numbers differ between runs)" if runs > 1 else ""
        warnings.warn(f"{message} [{runs} run(s) of this study{other}]", category, stacklevel=5)
    if len(groups) > shown:
        warnings.warn(f"... and {len(groups) - shown} more distinct warnings in this study (run a single case with "
                      "cvxdp run to see them).", UserWarning, stacklevel=5)
