"""Declared shapes of the messages a peer may send: each field's type, range, dtype and shape, checked on arrival.

A schema is a tree of small specs (:class:`Struct`, :class:`Float`, :class:`Array`, ...). ``spec.check(value)``
returns the value (numbers as Python floats and ints, arrays as read-only numpy arrays of the declared dtype) or
raises a :class:`SchemaError` naming the field by its path (``messages.zone1.bw``) and what was expected. A
:class:`Struct` refuses unknown fields and missing ones; numbers are finite unless a spec allows otherwise; an array
must have the declared dtype and shape exactly (no conversion, no broadcasting).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .wire import WireError

_NAME = re.compile(r"^[A-Za-z0-9_.:@+-][A-Za-z0-9_.:@+ -]{0,127}$")


class SchemaError(WireError):
    """A message that does not fit its declared schema; ``field`` is the path of the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"field {field!r}: {message}" if field else message)
        self.field = field


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Spec:
    """One field's declaration."""

    def check(self, value: Any, path: str = "") -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Float(Spec):
    """A finite float (an int is accepted) in ``[lo, hi]`` (``open_low``: ``(lo, hi]``)."""

    lo: float = -math.inf
    hi: float = math.inf
    open_low: bool = False

    def check(self, value: Any, path: str = "") -> float:
        if not _is_number(value) or not math.isfinite(value):
            raise SchemaError(path, f"expected {self.describe()}, got {value!r}")
        value = float(value)
        if value < self.lo or value > self.hi or (self.open_low and value == self.lo):
            raise SchemaError(path, f"expected {self.describe()}, got {value!r}")
        return value

    def describe(self) -> str:
        if self.lo == -math.inf and self.hi == math.inf:
            return "a finite float"
        return f"a float in {'(' if self.open_low else '['}{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True)
class Int(Spec):
    """An int in ``[lo, hi]``."""

    lo: int = 0
    hi: int = 2 ** 62

    def check(self, value: Any, path: str = "") -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not self.lo <= value <= self.hi:
            raise SchemaError(path, f"expected {self.describe()}, got {value!r}")
        return int(value)

    def describe(self) -> str:
        return f"an int in [{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class Bool(Spec):
    """true or false."""

    def check(self, value: Any, path: str = "") -> bool:
        if not isinstance(value, bool):
            raise SchemaError(path, f"expected true or false, got {value!r}")
        return value

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Str(Spec):
    """A string: one of ``choices``, or matching ``pattern`` (default: a name of at most 128 plain characters)."""

    choices: tuple[str, ...] | None = None
    pattern: str | None = None

    def check(self, value: Any, path: str = "") -> str:
        if not isinstance(value, str):
            raise SchemaError(path, f"expected {self.describe()}, got {value!r}")
        if self.choices is not None:
            if value not in self.choices:
                raise SchemaError(path, f"expected {self.describe()}, got {value!r}")
        elif not (re.fullmatch(self.pattern, value) if self.pattern else _NAME.match(value)):
            raise SchemaError(path, f"expected {self.describe()}, got {value[:80]!r}")
        return value

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(map(repr, self.choices))
        return f"a string matching {self.pattern!r}" if self.pattern else "a name (at most 128 plain characters)"


@dataclass(frozen=True)
class Text(Spec):
    """Free text of at most ``max_len`` characters (a relation, a message)."""

    max_len: int = 4096

    def check(self, value: Any, path: str = "") -> str:
        if not isinstance(value, str) or len(value) > self.max_len:
            raise SchemaError(path, f"expected {self.describe()}, got {str(value)[:80]!r}")
        return value

    def describe(self) -> str:
        return f"text of at most {self.max_len} characters"


@dataclass(frozen=True)
class Optional(Spec):
    """None or ``spec``."""

    spec: Spec

    def check(self, value: Any, path: str = "") -> Any:
        return None if value is None else self.spec.check(value, path)

    def describe(self) -> str:
        return f"null or {self.spec.describe()}"


@dataclass(frozen=True)
class Either(Spec):
    """The first of ``specs`` that fits."""

    specs: tuple[Spec, ...]

    def check(self, value: Any, path: str = "") -> Any:
        for spec in self.specs:
            try:
                return spec.check(value, path)
            except SchemaError:
                continue
        raise SchemaError(path, f"expected {self.describe()}, got {_show(value)}")

    def describe(self) -> str:
        return " or ".join(s.describe() for s in self.specs)


def _show(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    return repr(value)[:80]


@dataclass(frozen=True)
class Array(Spec):
    """A numpy array of ``dtype`` and exactly ``shape`` (None in a dimension: any size up to ``max_size`` values in
    all), every value finite (float arrays)."""

    shape: tuple[int | None, ...]
    dtype: str = "float64"
    max_size: int = 1 << 27

    def check(self, value: Any, path: str = "") -> np.ndarray:
        if not isinstance(value, np.ndarray) or value.dtype != np.dtype(self.dtype):
            raise SchemaError(path, f"expected {self.describe()}, got {_show(value)}")
        if value.ndim != len(self.shape) or any(n is not None and n != m for n, m in zip(self.shape, value.shape)):
            raise SchemaError(path, f"expected {self.describe()}, got {_show(value)}")
        if value.size > self.max_size:
            raise SchemaError(path, f"expected at most {self.max_size} values, got {value.size}")
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise SchemaError(path, f"expected finite values, got {int(np.sum(~np.isfinite(value)))} NaN or "
                              "infinite ones")
        return value

    def describe(self) -> str:
        dims = ", ".join("any" if n is None else str(n) for n in self.shape)
        return f"a {self.dtype} array of shape ({dims}{',' if len(self.shape) == 1 else ''})"


@dataclass(frozen=True)
class Struct(Spec):
    """A dict with exactly the ``fields`` (required) and any of the ``optional`` ones; other keys are refused."""

    fields: Mapping[str, Spec]
    optional: Mapping[str, Spec] = field(default_factory=dict)

    def check(self, value: Any, path: str = "") -> dict[str, Any]:
        if not isinstance(value, dict):
            raise SchemaError(path, f"expected a table with {', '.join(map(repr, self.fields)) or 'no fields'}, "
                              f"got {_show(value)}")
        unknown = sorted(set(value) - set(self.fields) - set(self.optional))
        if unknown:
            raise SchemaError(_join(path, unknown[0]), "unknown field (allowed: "
                              + ", ".join(sorted([*self.fields, *self.optional])) + ")")
        missing = [k for k in self.fields if k not in value]
        if missing:
            raise SchemaError(_join(path, missing[0]), "missing")
        out = {k: spec.check(value[k], _join(path, k)) for k, spec in self.fields.items()}
        out.update({k: spec.check(value[k], _join(path, k)) for k, spec in self.optional.items() if k in value})
        return out

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class Table(Spec):
    """Any table (its fields are checked later, by a schema only the receiver knows: a node's own message)."""

    def check(self, value: Any, path: str = "") -> dict[str, Any]:
        if not isinstance(value, dict):
            raise SchemaError(path, f"expected a table, got {_show(value)}")
        return value

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class MapOf(Spec):
    """A dict from names (``keys``) to ``values``, at most ``max_len`` entries."""

    values: Spec
    keys: Str = Str()
    max_len: int = 100_000

    def check(self, value: Any, path: str = "") -> dict[str, Any]:
        if not isinstance(value, dict) or len(value) > self.max_len:
            raise SchemaError(path, f"expected a table of at most {self.max_len} entries, got {_show(value)}")
        return {self.keys.check(k, _join(path, str(k)[:40])): self.values.check(v, _join(path, str(k)))
                for k, v in value.items()}

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class ListOf(Spec):
    """A list of ``item``, at most ``max_len`` long."""

    item: Spec
    max_len: int = 100_000

    def check(self, value: Any, path: str = "") -> list[Any]:
        if not isinstance(value, list) or len(value) > self.max_len:
            raise SchemaError(path, f"expected a list of at most {self.max_len} items, got {_show(value)}")
        return [self.item.check(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


@dataclass(frozen=True)
class Plain(Spec):
    """A table of plain values (numbers, strings, booleans, None, and lists or tables of them; no arrays): a case
    file's table, read again by the code that owns it (e.g. an algorithm's declared parameters)."""

    max_items: int = 10_000

    def check(self, value: Any, path: str = "") -> Any:
        count = [0]

        def walk(v: Any, p: str) -> None:
            count[0] += 1
            if count[0] > self.max_items:
                raise SchemaError(path, f"expected at most {self.max_items} plain values")
            if v is None or isinstance(v, (bool, str)) or _is_number(v):
                if isinstance(v, float) and not math.isfinite(v):
                    raise SchemaError(p, f"expected a finite number, got {v!r}")
                return
            if isinstance(v, dict):
                for k, item in v.items():
                    walk(item, _join(p, k))
                return
            if isinstance(v, list):
                for i, item in enumerate(v):
                    walk(item, f"{p}[{i}]")
                return
            raise SchemaError(p, f"expected a plain value, got {_show(v)}")

        if not isinstance(value, dict):
            raise SchemaError(path, f"expected a table, got {_show(value)}")
        walk(value, path)
        return value

    def describe(self) -> str:
        return "a table of plain values"


def names(items: Sequence[str], path: str) -> list[str]:
    """``items`` checked as distinct names."""
    out = ListOf(Str()).check(list(items), path)
    if len(set(out)) != len(out):
        raise SchemaError(path, "names must be distinct")
    return out


__all__ = ["Array", "Bool", "Either", "Float", "Int", "ListOf", "MapOf", "Optional", "Plain", "SchemaError", "Spec",
           "Str", "Struct", "Table", "Text", "names"]
