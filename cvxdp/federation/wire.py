"""What crosses the wire between the coordinator and the parties: data, never code.

A message is a tree of plain values (None, bool, int, float, str, lists and string-keyed dicts of them) and numpy
arrays of a few numeric dtypes. :func:`encode` writes it as a versioned envelope::

    b"CVXDP" + version (1 byte) + header length (4 bytes, big-endian) + header (UTF-8 JSON) + array buffers

where the header holds the tree with every array replaced by ``{"$array": i}`` and the list of arrays (dtype,
shape, offset). :func:`decode` reads it back with :func:`json.loads` and :func:`numpy.frombuffer` only: nothing
in a peer's bytes can name a class, a function or a module, so reading them can never run code (unlike pickle).
It refuses with a :class:`WireError` anything else: another magic or version, a truncated or oversized message,
an array whose dtype is not allowed or whose bytes do not match its shape, duplicate keys, nesting deeper than
:data:`MAX_DEPTH`. What a message must hold is checked against a declared schema (:mod:`.schema`) after decoding.

The encoding is canonical (sorted keys, fixed separators): the same message gives the same bytes, so a digest of
a request identifies it (a party recognises a resumed request by it).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Mapping
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


__all__ = ["MAX_BYTES", "WireError", "decode", "digest", "encode"]
