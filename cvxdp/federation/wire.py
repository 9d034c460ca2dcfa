"""What crosses the wire between the coordinator and the parties: data, never code.

A message is a tree of plain values (None, bool, int, float, str, lists and string-keyed dicts of them) and numpy
arrays of a few numeric dtypes. :func:`encode` writes it as a versioned envelope::

    b"CVXDP" + version (1 byte) + header length (4 bytes, big-endian) + header (UTF-8 JSON) + array buffers

where the header holds the tree with every array replaced by ``{"$array": i}`` and the list of arrays (dtype,
shape, offset). :func:`decode` reads it back with :func:`json.loads` and :func:`numpy.frombuffer` only: nothing
in a peer's bytes can name a class, a function or a module, so reading them can never run code (unlike pickle).
It refuses with a :class:`WireError` anything else: another magic or version, a truncated or oversized message,
an array whose dtype is not allowed or whose bytes do not match its shape, duplicate keys, nesting deeper than
:data:`MAX_DEPTH`.

What a message must hold is then checked against a declared schema: a tree of small specs (:class:`Struct`,
:class:`Float`, :class:`Array`, ...). ``spec.check(value)`` returns the value (numbers as Python floats and ints,
arrays as numpy arrays of the declared dtype) or raises a :class:`SchemaError` naming the field by its path
(``messages.zone1.bw``) and what was expected. A :class:`Struct` refuses unknown fields and missing ones; numbers are
finite unless a spec allows otherwise; an array must have the declared dtype and shape exactly (no conversion, no
broadcasting).

The encoding is canonical (sorted keys, fixed separators): the same message gives the same bytes, so a digest of
a request identifies it (a party recognises a resumed request by it).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CvxdpError

MAGIC = b"CVXDP"
VERSION = 1
#: the array dtypes a message may hold (little-endian, as numpy writes them on every platform cvxdp runs on)
DTYPES = {"<f8": np.float64, "<f4": np.float32, "<i8": np.int64, "<i4": np.int32, "|b1": np.bool_}
#: a message larger than this is refused before it is read (a party may lower it in its file)
MAX_BYTES = 1 << 30
#: nesting depth of the tree (dicts and lists)
MAX_DEPTH = 16
_ARRAY = "$array"
_HEAD = struct.Struct(">5sBI")


class WireError(CvxdpError, ValueError):
    """Bytes from a peer that are not a cvxdp message, or a message that does not fit its schema."""


def _canonical(value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind == "f" and array.dtype != np.float32:
        array = array.astype(np.float64, copy=False)
    elif array.dtype.kind in "iu" and array.dtype not in (np.int32,):
        array = array.astype(np.int64, copy=False)
    return np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"), copy=False))


def encode(message: Any) -> bytes:
    """The bytes of ``message`` (a tree of plain values and numpy arrays; see the module docstring).

    Raises
    ------
    WireError
        A value that is not plain data (an object, a function, a dict with a non-string key, a float key
        ``"$array"``, an object array).
    """
    arrays: list[np.ndarray] = []

    def tree(value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise WireError(f"a message nests deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return float(value)
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf" or value.dtype.kind == "u":
                raise WireError(f"an array of dtype {value.dtype} cannot travel (allowed: float64, float32, "
                                "int64, int32, bool)")
            arrays.append(_canonical(value))
            return {_ARRAY: len(arrays) - 1}
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise WireError(f"a message's dict keys are strings; got {type(key).__name__} {key!r}")
                if key == _ARRAY:
                    raise WireError(f"the key {_ARRAY!r} is reserved")
                out[key] = tree(item, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            return [tree(item, depth + 1) for item in value]
        raise WireError(f"a message holds plain values and numpy arrays only; got {type(value).__name__}")

    body = tree(message, 0)
    specs, offset = [], 0
    for array in arrays:
        specs.append({"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset})
        offset += array.nbytes
    header = json.dumps({"body": body, "arrays": specs}, sort_keys=True, separators=(",", ":"),
                        allow_nan=True).encode()
    return b"".join([_HEAD.pack(MAGIC, VERSION, len(header)), header, *(a.tobytes() for a in arrays)])


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise WireError(f"the key {key!r} appears twice")
        out[key] = value
    return out


def decode(data: bytes | bytearray | memoryview, *, max_bytes: int = MAX_BYTES) -> Any:
    """The message in ``data`` (see the module docstring); arrays come back read-only, with their dtype and bits.

    Raises
    ------
    WireError
        Anything that is not a cvxdp message of this version, or larger than ``max_bytes``.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a message is bytes; got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise WireError(f"a message of {len(data)} bytes is larger than the {max_bytes} allowed")
    if len(data) < _HEAD.size:
        raise WireError("unreadable message (too short)")
    magic, version, size = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise WireError("unreadable message (not a cvxdp message: wrong magic bytes)")
    if version != VERSION:
        raise WireError(f"a message of wire version {version}; this cvxdp reads version {VERSION}")
    end = _HEAD.size + size
    if end > len(data):
        raise WireError("unreadable message (truncated header)")
    try:
        header = json.loads(data[_HEAD.size:end].decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WireError(f"unreadable message header ({type(exc).__name__})") from None
    if not isinstance(header, dict) or set(header) != {"body", "arrays"} or not isinstance(header["arrays"], list):
        raise WireError("unreadable message (malformed header)")
    buffer = memoryview(data)[end:]
    arrays, used = [], 0
    for i, spec in enumerate(header["arrays"]):  # one after the other, no gap and no overlap
        arrays.append(_array(spec, buffer, i, used))
        used += arrays[-1].nbytes
    if used != len(buffer):
        raise WireError(f"the message carries {len(buffer)} bytes of arrays but declares {used}")

    def tree(value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise WireError(f"a message nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            if set(value) == {_ARRAY}:
                index = value[_ARRAY]
                if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(arrays):
                    raise WireError(f"a message names array {index!r}, which it does not carry")
                return arrays[index]
            if _ARRAY in value:
                raise WireError(f"the key {_ARRAY!r} is reserved")
            return {k: tree(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [tree(v, depth + 1) for v in value]
        return value

    return tree(header["body"], 0)


def _array(spec: Any, buffer: memoryview, i: int, start: int) -> np.ndarray:
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "offset"}:
        raise WireError(f"array {i} of the message is malformed")
    dtype, shape, offset = spec["dtype"], spec["shape"], spec["offset"]
    if dtype not in DTYPES:
        raise WireError(f"array {i} has dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    if (not isinstance(shape, list) or len(shape) > 8
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise WireError(f"array {i} has an invalid shape {shape!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset != start:
        raise WireError(f"array {i} has offset {offset!r}; it must start at byte {start}")
    count = math.prod(shape)
    nbytes = count * np.dtype(DTYPES[dtype]).itemsize
    if offset + nbytes > len(buffer):
        raise WireError(f"array {i} ({dtype} {tuple(shape)}) runs past the end of the message")
    array = np.frombuffer(buffer, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    return array


def digest(data: bytes) -> str:
    """The SHA-256 of a message's bytes (hex): what a party records of a request and of its release."""
    return hashlib.sha256(data).hexdigest()



# ---------------------------------------------------------------- declared shapes of what a peer may send
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


__all__ = ["MAX_BYTES", "Array", "Bool", "Either", "Float", "Int", "ListOf", "MapOf", "Optional", "Plain", "SchemaError",
           "Spec", "Str", "Struct", "Table", "Text", "WireError", "decode", "digest", "encode", "names"]
