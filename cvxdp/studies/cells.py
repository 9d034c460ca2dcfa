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
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, CorruptFileError
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

__all__ = ["CELL_FILE", "SUMMARY_FILE", "CellRunner", "cell_config"]

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
        cell = self.cell_dir(key)
        expected = fingerprint(jsonable(dict(config)), context=dict(context or {}))
        if self._check(key, cell, expected):
            self.reused += 1
            return load_result(cell), json.loads((cell / SUMMARY_FILE).read_text())
        result, summary = compute(cell)
        summary = jsonable(summary)
        atomic_write_text(cell / SUMMARY_FILE, json.dumps(summary, indent=2), f"{self.what} cell summary")
        atomic_write_text(cell / CELL_FILE, json.dumps({"format": CELL_FORMAT, "key": key, "fingerprint": expected},
                                                       indent=2), f"{self.what} cell file")
        result.save(cell, overwrite=True)  # result.json last: the cell is finished
        remove_checkpoint(cell)
        self.computed += 1
        return result, summary


#: what tells one run's warning from another's of the same kind: numbers and quoted names
_VARYING = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?|'[^']*'")


@contextlib.contextmanager
def collecting_warnings(collected: dict[tuple, list]) -> Iterator[None]:
    """Record the warnings raised inside into the study's collection (see :func:`report_warnings`) instead of
    showing them: one group per category and message with its numbers and quoted names blanked (``largest distance
    0.0051, agent 'zone2'`` and ``... 0.013, agent 'zone1'`` are one group), each ``[category, first message, runs]``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        key = (w.category, _VARYING.sub("#", str(w.message)))
        if key in collected:
            collected[key][2] += 1
        else:
            collected[key] = [w.category, str(w.message), 1]


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
