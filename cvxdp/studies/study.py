"""The one study loop: a :class:`Study` declares its ``[study]`` keys and a few hooks; :meth:`Study.run` does the rest.

A kind of study (grid, equal-total, graph, sharing) is a subclass registered under its ``[study] kind``
(:func:`register_study`). It declares

* its ``[study]`` keys (:class:`StudyKey`: name, type, default, meaning and the check of a value), from which the
  loader's validation and messages (``"FILE: the 'KEY' entry of [study] must be EXPECTED. Got VALUE instead."``), the
  case-file schema rows (:meth:`Study.schema_rows`, equal to :data:`cvxdp.config.schema.SCHEMA`'s, a test checks)
  and ``cvxdp study --help`` come;
* the command-line options it takes (:attr:`Study.options`), so the CLI picks nothing by hand;
* the hooks :meth:`Study.prepare` (its cells as :class:`~cvxdp.studies.cells.CellJob`), :meth:`Study.row` (one
  table row, history and ledger per cell) and :meth:`Study.report` (its tables beyond the results, its figures and
  report).

:meth:`Study.run` writes ``study.json``, runs every cell through :func:`~cvxdp.studies.cells.run_cells` (resume,
one progress bar, the runs' warnings once each, a pool of workers where the cells may move), writes the results
table, ``histories.csv`` and ``ledger.json`` and calls the report hook. Adding a kind of study is one new module
(the subclass) and its rows in :data:`cvxdp.config.schema.SCHEMA`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ..config.build import load_case, load_toml, read_study_file
from ..errors import ConfigError
from ..run import OutputLock, Result, jsonable, locks_output, prepare_dir
from ..templates.metrics import TemplateMetrics, template_metrics
from .cells import CellJob, CellRunner, cell_config, default_workers, in_parallel, report_warnings, run_cells

# CellJob, cell_config, default_workers, in_parallel: what a kind of study builds its cells with (:mod:`.cells`),
# re-exported so that a study module imports this one only

__all__ = ["CellJob", "STUDIES", "Study", "StudyKey", "cell_config", "head_keys", "default_workers", "in_parallel", "is_bool", "is_int_at_least", "is_unit_float", "number_list", "refuse", "load_any_study", "register_study", "run_any_study", "study_class",
           "study_kind", "study_kinds"]


# --------------------------------------------------------------------------- declared keys
def refuse(path: Path, key: str, expected: str, value: Any) -> ConfigError:
    """The message of a refused value: ``FILE: the 'KEY' entry of [study] must be EXPECTED. Got VALUE instead.``"""
    return ConfigError(f"{path}: the {key!r} entry of [study] must be {expected}. Got {value!r} instead.")


def is_int_at_least(low: int, *, optional: bool = False) -> Callable[[Any], bool]:
    """An int >= ``low`` (``optional``: or None)."""
    return lambda v: (optional and v is None) or (not isinstance(v, bool) and isinstance(v, int) and v >= low)


def is_unit_float(*, optional: bool = False) -> Callable[[Any], bool]:
    """A number in (0, 1) (``optional``: or None)."""
    return lambda v: (optional and v is None) or (not isinstance(v, bool) and isinstance(v, (int, float))
                                                  and 0 < v < 1)


def is_bool(value: Any) -> bool:
    """A TOML boolean."""
    return isinstance(value, bool)


def number_list(key: str, kind: type, *, positive: bool, convert: bool = False) -> Callable[[Any, Path], list]:
    """A non-empty list of finite numbers (``kind`` float) or ints, positive or non-negative; ``convert``: each
    converted to ``kind``."""
    what = ("positive numbers" if positive else "non-negative numbers") if kind is float else \
        ("positive ints" if positive else "non-negative ints")

    def parse(values: Any, path: Path) -> list:
        if not isinstance(values, list) or not values:
            raise refuse(path, key, f"a non-empty list of {what}", values)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int) or \
                    not math.isfinite(v) or (v <= 0 if positive else v < 0):
                raise ConfigError(f"{path}: the {key!r} entry of [study] must hold {what}. Got {v!r} instead.")
        return [kind(v) for v in values] if convert else values

    return parse


@dataclass(frozen=True)
class StudyKey:
    """One declared ``[study]`` key.

    Attributes
    ----------
    name : str
        The key.
    type, default, doc : str
        Its schema row: the type and default as the case-file reference shows them, and its meaning.
    value : object
        The value when the file does not give the key (None: none).
    expected : str
        What a value must be, for the message (``"an int in [1, inf)"``); empty when :attr:`parse` words its own.
    accepts : callable(value) -> bool, optional
        Whether a given value is valid (default: every value).
    parse : callable(value, path) -> object, optional
        Checks and converts the value itself (raising :class:`~cvxdp.errors.ConfigError` naming the file and
        key); for the structured keys (tables, lists of rows).
    """

    name: str
    type: str
    default: str
    doc: str
    value: Any = None
    expected: str = ""
    accepts: Callable[[Any], bool] | None = None
    parse: Callable[[Any, Path], Any] | None = None

    def read(self, table: dict[str, Any], path: Path) -> Any:
        """The key's value in ``table`` (its declared value when absent), checked."""
        value = table.get(self.name, self.value)
        if self.parse is not None:
            return self.parse(value, path)
        if self.accepts is not None and not self.accepts(value):
            raise refuse(path, self.name, self.expected, value)
        return value

    def row(self) -> tuple[str, str, str, str]:
        """The key's case-file schema row (key, type, default, meaning)."""
        return self.name, self.type, self.default, self.doc


def head_keys(kind: str | None = None) -> tuple[StudyKey, ...]:
    """The keys every study file has: ``kind`` (not a grid's: it has none), ``case``, ``name``, ``description``."""
    return (() if kind is None else (StudyKey("kind", "str", "required", kind),)) + (
        StudyKey("case", "str", "required", "case file, relative to the study file"),
        StudyKey("name", "str", "file stem", "study name (titles, report)"),
        StudyKey("description", "str", '""', "one line shown by `cvxdp cases`", value=""))


#: ``[study] kind`` -> the class of that kind of study
STUDIES: dict[str, type[Study]] = {}


def register_study(cls: type[Study]) -> type[Study]:
    """Class decorator: ``cls`` runs the study files whose ``[study] kind`` is ``cls.kind``."""
    STUDIES[cls.kind] = cls
    return cls


class Study(ABC):
    """A kind of study: declared keys, a few hooks and the one :meth:`run` (see the module docstring)."""

    #: the ``[study] kind`` (``"grid"``: a file without ``kind``)
    kind: ClassVar[str]
    #: its name in messages ("grid", "equal-total", ...) and its schema table's title
    title: ClassVar[str]
    schema_table: ClassVar[str]
    #: the declared ``[study]`` keys
    keys: ClassVar[tuple[StudyKey, ...]]
    #: the other tables a file of this kind may hold
    sections: ClassVar[frozenset[str]]
    #: the optional command-line options it takes (of rounds, data, test_data, workers)
    options: ClassVar[frozenset[str]]
    #: its cells' runner label (messages) and results table's file
    label: ClassVar[str] = "study"
    results_file: ClassVar[str] = "results.csv"
    #: whether it writes ``ledger.json`` (each cell's privacy summary)
    writes_ledger: ClassVar[bool] = True
    #: why ``--rounds`` does not apply (when ``"rounds"`` is not among :attr:`options`)
    no_rounds: ClassVar[str] = "it sets its own rounds"
    #: where it comes in listings of the kinds (messages, ``cvxdp study --help``)
    rank: ClassVar[int] = 100
    #: whether the command line shows its progress bar when stderr is not a terminal (a log)
    bar_without_terminal: ClassVar[bool] = False

    path: Path
    name: str
    case_path: Path

    @functools.cached_property
    def metrics(self) -> TemplateMetrics:
        """What the case's template declares its runs measure (:mod:`cvxdp.templates.metrics`: headline metrics, axis labels,
        the reports' sentences)."""
        return template_metrics(load_case(self.case_path).template)

    # --------------------------------------------------------------------------- declarations
    @classmethod
    def key_names(cls) -> set[str]:
        """The declared keys' names."""
        return {key.name for key in cls.keys}

    @classmethod
    def schema_rows(cls) -> list[tuple[str, str, str, str]]:
        """The case-file schema rows of its ``[study]`` table (:data:`cvxdp.config.schema.SCHEMA`)."""
        return [key.row() for key in cls.keys]

    @classmethod
    def read(cls, path: str | Path) -> tuple[Path, dict[str, Any], dict[str, Any], Path]:
        """The file's shared checks (:func:`~cvxdp.config.build.read_study_file`) and every declared key's value,
        checked: ``(path, raw TOML, {key: value}, case path)``."""
        path, raw, table, case_path = read_study_file(path, keys=cls.key_names(), sections=set(cls.sections),
                                                      kind=None if cls.kind == "grid" else cls.kind)
        return path, raw, {key.name: key.read(table, path) for key in cls.keys}, case_path

    @classmethod
    @abstractmethod
    def load(cls, path: str | Path) -> Study:
        """Load and check a study file of this kind."""

    # --------------------------------------------------------------------------- hooks
    @abstractmethod
    def prepare(self, out: Path, stack: contextlib.ExitStack, **options: Any) -> list[CellJob]:
        """The study's cells, ready to run into ``out`` (``stack`` keeps what they share open until the report is
        written: kept instances, backends); sets :attr:`described` (``study.json``)."""

    @abstractmethod
    def row(self, index: int, result: Result, summary: dict[str, Any]) -> tuple[dict, pd.DataFrame, Any]:
        """Cell ``index``'s row of the results table, its history (tidy, with the cell's columns) and its ledger."""

    @abstractmethod
    def report(self, results: pd.DataFrame, history: pd.DataFrame, out: Path) -> list[str]:
        """Every file the study wrote (tables, figures, report) in the order they are listed."""

    def companions(self, out: Path, stack: contextlib.ExitStack, **options: Any) -> list[Study]:
        """Other studies whose cells run in the same pool, first (a grid's equal-total companion)."""
        return []

    def info(self) -> dict[str, Any]:
        """Further entries of :meth:`run`'s answer."""
        return {}

    # --------------------------------------------------------------------------- the loop
    #: whether the cells may run in other processes (set by :meth:`prepare`: not on Ray, not with closures)
    movable: bool = True
    #: ``study.json`` (set by :meth:`prepare`)
    described: dict[str, Any]
    #: the options of :meth:`run` (a companion's: those :meth:`companions` gives it)
    options: dict[str, Any]

    def start(self, out: Path, stack: contextlib.ExitStack, **options: Any) -> tuple[CellRunner, list[CellJob]]:
        """Lay out the cells (:meth:`prepare`) and write ``study.json``: this study's batch of
        :func:`~cvxdp.studies.cells.run_cells`."""
        self.out = Path(out)
        self.runner = CellRunner(self.out, what=self.label)
        self.jobs = self.prepare(self.out, stack, **options)
        (self.out / "study.json").write_text(json.dumps(jsonable(self.described), indent=2))
        return self.runner, self.jobs

    @locks_output("study directory")  # a second study writing the same directory is refused
    def run(self, out: str | Path, *, progress: bool = True, workers: int | None = None, **options: Any
            ) -> dict[str, Any]:
        """Run (or resume) the study and write its outputs into ``out``: ``study.json``, the cells (through
        :func:`~cvxdp.studies.cells.run_cells`: ``workers`` processes where the cells may move, else one),
        the results table, ``histories.csv``, ``ledger.json``, then :meth:`report`'s files."""
        out = Path(out)
        self.options = {"workers": workers, **options}
        with contextlib.ExitStack() as stack:
            others = self.companions(out, stack, **options)
            for other in others:  # each writes its own directory: a second study writing it is refused
                stack.enter_context(OutputLock(prepare_dir(other.out, "study directory"), "study directory"))
            batches = [other.start(other.out, stack, **other.options) for other in others] \
                + [self.start(out, stack, **options)]
            movable = self.movable and all(other.movable for other in others)
            names = " (+ " + ", ".join(other.name for other in others) + ")" if others else ""
            outcomes = run_cells(batches, workers=workers if movable else 1, progress=progress,
                                 desc=f"study {self.name}{names}")
            for other, outcome in zip(others, outcomes):
                other.finish(outcome)
            return self.finish(outcomes[-1])

    def finish(self, outcomes: Sequence[tuple[Result, dict[str, Any]]]) -> dict[str, Any]:
        """Write the tables and the report from each cell's (result, summary), in cell order."""
        report_warnings(self.runner.warnings)  # the runs' warnings, once each after the progress bar
        rows, histories, ledgers = [], [], {}
        for index, (job, (result, summary)) in enumerate(zip(self.jobs, outcomes)):
            row, history, ledger = self.row(index, result, summary)
            rows.append(row)
            histories.append(history)
            ledgers[job.key] = ledger
        results = pd.DataFrame(rows)
        with warnings.catch_warnings():  # all-NaN privacy columns of a non-private baseline are expected
            warnings.simplefilter("ignore", FutureWarning)
            history = pd.concat([h for h in histories if len(h)], ignore_index=True)
        results.to_csv(self.out / self.results_file, index=False)
        history.to_csv(self.out / "histories.csv", index=False)
        if self.writes_ledger:
            (self.out / "ledger.json").write_text(json.dumps(jsonable(ledgers), indent=2))
        files = self.report(results, history, self.out)
        return {"study": self.name, "out": str(self.out), "runs": len(self.jobs), "computed": self.runner.computed,
                "reused": self.runner.reused, "files": files, **self.info()}


# --------------------------------------------------------------------------- the registry
def study_kinds() -> list[type[Study]]:
    """The registered kinds of study, in their listing order."""
    return sorted(STUDIES.values(), key=lambda cls: cls.rank)


def study_kind(path: str | Path) -> str:
    """The ``[study] kind`` of a study file (``"grid"`` when it names none)."""
    raw = load_toml(path)
    table = raw.get("study")
    kind = table.get("kind", "grid") if isinstance(table, dict) else "grid"
    return kind if isinstance(kind, str) else repr(kind)


def study_class(path: str | Path) -> type[Study]:
    """The class of the study file ``path`` (by its ``[study] kind``)."""
    kind = study_kind(path)
    if kind not in STUDIES:
        raise ConfigError(f"{path}: the 'kind' entry of [study] must be one of "
                          f"{', '.join(repr(k) for k in STUDIES if k != 'grid')} (or absent: a grid study). "
                          f"Got {kind!r} instead.")
    return STUDIES[kind]


def load_any_study(path: str | Path) -> Study:
    """A study file of any registered kind, loaded and checked."""
    return study_class(path).load(path)


def run_any_study(path: str | Path, out: str | Path, **options: Any) -> dict[str, Any]:
    """Run (or resume) a study file of any registered kind (:meth:`Study.run`'s options)."""
    return load_any_study(path).run(out, **options)
