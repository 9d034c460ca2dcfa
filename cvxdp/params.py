"""Parameters declared once per class (scikit-learn's ``_parameter_constraints`` idea) and uniform messages.

A class that takes parameters (an algorithm, a mechanism) derives from :class:`Parameterized` and declares each
parameter once, in :attr:`Parameterized.parameters`: the constraints its value must meet and one line of help.
Everything else derives from that table:

* :meth:`~Parameterized.validate` checks every value (and the class's cross-parameter rules, :meth:`_check`) and
  raises :class:`~cvxdp.errors.InvalidParameterError` with the message
  ``The 'NAME' parameter of OWNER must be EXPECTED. Got VALUE instead.``; it never changes the object;
* ``repr`` shows the parameters that differ from their defaults;
* :meth:`~Parameterized.describe` is the JSON form stored in ``result.config`` (and fingerprinted);
* :meth:`~Parameterized.from_config` builds the object from a case-file table and refuses unknown keys, naming
  the key the user wrote;
* :func:`schema_rows` gives the case-file schema (:mod:`cvxdp.config.schema`).

Constructors only store their arguments. The helpers :func:`check_float`, :func:`check_int`, :func:`check_choice`
and :func:`fail` give the same messages for function arguments.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np

from .errors import ConfigError, InvalidParameterError, did_you_mean, fail, interval


# --------------------------------------------------------------------------- constraints
class Constraint:
    """One kind of value a parameter accepts; ``str(constraint)`` is the phrase of the error message."""

    def accepts(self, value: object) -> bool:
        raise NotImplementedError

    def describe(self, value: object, obj: object = None) -> Any:
        """The value's JSON form (default: itself); ``obj`` is the object it belongs to."""
        return value


@dataclass(frozen=True)
class Interval(Constraint):
    """A real (``integer=False``) or integer number in an interval; ``closed`` in neither|left|right|both."""

    low: float = -math.inf
    high: float = math.inf
    closed: str = "neither"
    integer: bool = False

    def accepts(self, value: object) -> bool:
        kind = Integral if self.integer else Real
        if isinstance(value, bool) or not isinstance(value, kind) or math.isnan(float(value)):
            return False
        v = float(value)
        lo_ok = v >= self.low if self.closed in ("left", "both") or self.integer else v > self.low
        hi_ok = v <= self.high if self.closed in ("right", "both") or self.integer else v < self.high
        return lo_ok and hi_ok

    def describe(self, value: object, obj: object = None) -> Any:
        return int(value) if self.integer else float(value)

    def __str__(self) -> str:
        if self.integer:
            hi = "inf" if math.isinf(self.high) else str(int(self.high))
            return f"an int in [{int(self.low)}, {hi}]"
        return f"a float in {interval(self.low, self.high, self.closed)}"


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (strings, compared case-sensitively)."""

    values: tuple

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        if len(self.values) == 1:
            return repr(self.values[0])
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Boolean(Constraint):
    def accepts(self, value: object) -> bool:
        return isinstance(value, (bool, np.bool_))

    def describe(self, value: object, obj: object = None) -> Any:
        return bool(value)

    def __str__(self) -> str:
        return "a bool"


@dataclass(frozen=True)
class NoneValue(Constraint):
    def accepts(self, value: object) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"


@dataclass(frozen=True)
class Instance(Constraint):
    """An instance of ``types``, described in messages as ``text``; ``to_json`` gives its JSON form."""

    types: tuple
    text: str
    to_json: Callable[[Any], Any] | None = None

    def accepts(self, value: object) -> bool:
        return isinstance(value, self.types)

    def describe(self, value: object, obj: object = None) -> Any:
        return self.to_json(value) if self.to_json is not None else value

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class PerNode(Constraint):
    """A float in an interval, a non-empty list of them (one per node) or a ``{node: value}`` mapping."""

    low: float
    closed: str = "neither"

    def accepts(self, value: object) -> bool:
        one = Interval(self.low, math.inf, self.closed)
        if isinstance(value, Mapping):
            return bool(value) and all(isinstance(k, str) and one.accepts(v) for k, v in value.items())
        if isinstance(value, (list, tuple, np.ndarray)):
            values = list(np.asarray(value, dtype=object).ravel())
            return bool(values) and all(one.accepts(v) for v in values)
        return one.accepts(value)

    def describe(self, value: object, obj: object = None) -> Any:
        if isinstance(value, Mapping):
            return {str(k): float(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, np.ndarray)):
            return [float(v) for v in np.asarray(value, dtype=float).ravel()]
        return float(value)

    def __str__(self) -> str:
        return (f"{Interval(self.low, math.inf, self.closed)}, a list of them (one per node) or a "
                "{node: value} mapping")


@dataclass(frozen=True)
class Check(Constraint):
    """A value checked by a function that raises the uniform error itself (e.g. a schedule, labels)."""

    check: Callable[[Any, str, str], Any]
    text: str
    to_json: Callable[[Any, Any], Any] | None = None  # (value, the object it belongs to) -> JSON

    def accepts(self, value: object) -> bool:  # never used alone: Param.check calls ``check`` directly
        return True

    def describe(self, value: object, obj: object = None) -> Any:
        return self.to_json(value, obj) if self.to_json is not None else value

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Param:
    """One declared parameter: the constraints its value meets (any one of them) and a line of help.

    ``key`` is its name in a case-file table when that differs from the attribute name.
    """

    constraints: tuple[Constraint, ...]
    help: str = ""
    key: str | None = None
    #: whether a case-file table may set it (labels, for instance, come from the template)
    file: bool = True

    def check(self, value: object, name: str, owner: str) -> None:
        for c in self.constraints:
            if isinstance(c, Check):
                c.check(value, name, owner)
                return
            if c.accepts(value):
                return
        raise fail(name, owner, self.expected + _did_you_mean(value, self.constraints), value)

    def describe(self, value: object, obj: object = None) -> Any:
        for c in self.constraints:
            if isinstance(c, Check) or c.accepts(value):
                return c.describe(value, obj)
        return value

    @property
    def expected(self) -> str:
        return " or ".join(str(c) for c in self.constraints)


def _did_you_mean(value: object, constraints: Iterable[Constraint]) -> str:
    """`` (did you mean 'laplace'?)`` for a string close to one of the options, else ``""``."""
    return did_you_mean(value, [v for c in constraints if isinstance(c, Options) for v in c.values])


def param(*constraints: Constraint, help: str = "", key: str | None = None, file: bool = True) -> Param:
    """A :class:`Param` (shorthand for the class tables)."""
    return Param(tuple(constraints), help, key, file)


POSITIVE = Interval(0.0, math.inf)
NONNEGATIVE = Interval(0.0, math.inf, "left")
COUNT = Interval(1, math.inf, integer=True)
OPTIONAL_POSITIVE = (POSITIVE, NoneValue())


# --------------------------------------------------------------------------- the base class
class Parameterized:
    """Base of every class with declared parameters (algorithms, mechanisms); see the module docstring.

    Subclasses set :attr:`parameters` (``{name: Param}``, extending their base's table) and store each constructor
    argument under the same name; :meth:`_check` adds rules that involve several parameters.
    """

    parameters: ClassVar[dict[str, Param]] = {}

    @property
    def _owner(self) -> str:
        return type(self).__name__

    def get_params(self) -> dict[str, Any]:
        """The declared parameters and their current values."""
        return {name: getattr(self, name) for name in self.parameters}

    def validate(self):
        """Check every declared parameter, then the cross-parameter rules; return ``self`` (unchanged)."""
        owner = self._owner
        for name, p in self.parameters.items():
            p.check(getattr(self, name), name, owner)
        self._check()
        return self

    def _check(self) -> None:
        """Rules that involve several parameters (raise the uniform error naming one of them)."""

    def describe(self) -> dict[str, Any]:
        """The JSON form of the parameters (validated first)."""
        self.validate()
        return {name: p.describe(getattr(self, name), self) for name, p in self.parameters.items()}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The constructor's defaults of the declared parameters (``inspect.Parameter.empty`` when required)."""
        sig = inspect.signature(cls.__init__)
        return {n: sig.parameters[n].default for n in cls.parameters if n in sig.parameters}

    def __repr__(self) -> str:
        defaults = self.defaults()
        shown = []
        for name, value in self.get_params().items():
            default = defaults.get(name, inspect.Parameter.empty)
            if default is not inspect.Parameter.empty and _same(value, default):
                continue
            shown.append(f"{name}={_short(value)}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(a, b) for a, b in zip(self.get_params().values(), other.get_params().values()))

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def file_keys(cls) -> dict[str, str]:
        """Case-file key -> parameter name, for the parameters a case file may set."""
        return {p.key or n: n for n, p in cls.parameters.items() if p.file}

    @classmethod
    def from_config(cls, table: Mapping[str, Any], where: str, *, ignore: Iterable[str] = ()):
        """Build from a case-file table (keys: the declared parameters' case-file keys); an unknown key raises a
        :class:`~cvxdp.errors.ConfigError` naming it, ``where`` (e.g. ``"[algorithm]"``) and the allowed keys.
        ``ignore`` lists keys of the table that belong to other classes and are skipped."""
        keys = cls.file_keys()
        unknown = sorted(set(table) - set(keys) - set(ignore))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} for {cls.__name__}. "
                              f"Allowed: {', '.join(sorted(keys))}.")
        kwargs = {keys[k]: v for k, v in table.items() if k in keys}
        try:
            obj = cls(**kwargs)
            obj.validate()
        except InvalidParameterError as exc:
            raise ConfigError(f"{where}: {_key_names(str(exc), keys)}") from None
        return obj


def _key_names(message: str, keys: Mapping[str, str]) -> str:
    """An error message with each attribute name replaced by the case-file key the user wrote."""
    for key, name in keys.items():
        if key != name:
            message = message.replace(f"The {name!r} parameter", f"The {key!r} key")
    return message


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - objects whose == is not a bool
        return a is b


def _short(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"<array {value.shape}>"
    return repr(value)


def schema_rows(classes: Mapping[str, type[Parameterized]]) -> list[tuple[str, str, str, str]]:
    """The case-file rows ``(key, expected, default, help)`` of a table read by ``classes`` (name -> class): one
    row per key, the classes that read it named in the help (``ladmm, admm: ...``)."""
    rows: dict[str, dict[str, Any]] = {}
    for label, cls in classes.items():
        defaults = cls.defaults()
        for name, p in cls.parameters.items():
            if not p.file:
                continue
            key = p.key or name
            row = rows.setdefault(key, {"expected": p.expected, "defaults": {}, "help": p.help, "who": []})
            row["who"].append(label)
            default = defaults.get(name, inspect.Parameter.empty)
            row["defaults"][label] = "required" if default is inspect.Parameter.empty else (
                "none" if default is None else str(default))
    out = []
    for key, row in rows.items():
        by_value: dict[str, list[str]] = {}
        for label, value in row["defaults"].items():
            by_value.setdefault(value, []).append(label)
        default = next(iter(by_value)) if len(by_value) == 1 else \
            "; ".join(f"{v} ({', '.join(who)})" for v, who in by_value.items())
        who = ", ".join(row["who"]) if len(row["who"]) < len(classes) else "all"
        out.append((key, row["expected"], default, f"{who}: {row['help']}" if who != "all" else row["help"]))
    return out


class Algorithm(Parameterized):
    """Base of the algorithms: ``name`` (its case-file name), ``family`` (the family that runs it) and which privacy
    mechanisms it runs (:meth:`accepts`; ``mechanisms``, their case-file names, is derived from it by
    :mod:`cvxdp.families.catalog`)."""

    name: ClassVar[str] = "base"
    family: ClassVar[str] = ""
    #: the case-file names of the mechanisms :meth:`accepts` ("none" first), set by :mod:`cvxdp.families.catalog`
    mechanisms: ClassVar[tuple[str, ...]] = ("none",)
    #: keys an [algorithm] table of a case file may hold besides the declared parameters' (read by the case loader)
    extra_file_keys: ClassVar[tuple[str, ...]] = ()
    #: case-file keys read as another parameter's key (e.g. the CLI's ``rounds`` as ADMMSharing's ``epochs``)
    file_aliases: ClassVar[dict[str, str]] = {}
    rounds: int

    @classmethod
    def accepts(cls, privacy: object) -> bool:
        """Whether this algorithm runs ``privacy``: a mechanism, or its case-file name (``"ObjG"``). None and
        ``"none"`` (the non-private run) are accepted by every algorithm; the base accepts nothing else. The one
        place a family says which mechanisms it runs: its own checks, the CLI and the contract suite ask it."""
        return privacy is None or (isinstance(privacy, str) and privacy == "none")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **super().describe()}
