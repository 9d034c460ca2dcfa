"""What crosses the wire between the coordinator and the parties, and how it is read back safely.

Messages and replies are Python objects of cvxdp's own classes (round messages, releases, node specs, noise plans)
holding numpy arrays. They travel pickled, and each side reads the other's bytes with :func:`loads`, an unpickler
that builds only cvxdp's classes, numpy arrays and plain containers: a peer's bytes can never name another callable
(a party never runs code the coordinator chose, nor the other way round). Arrays keep their dtype and bits.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import Any

from ..errors import BackendError, CvxdpError, PartyRefusedError

#: the modules (and, for builtins, the names) a message may be built from
_NUMPY = ("numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric", "numpy._core.numeric",
          "numpy.random._pickle", "numpy.random.bit_generator", "numpy.dtypes")
_BUILTINS = {"dict", "list", "tuple", "set", "frozenset", "float", "int", "complex", "str", "bytes", "bytearray",
             "bool", "slice", "range", "object"}
_OTHER = {("copyreg", "_reconstructor"), ("collections", "OrderedDict"), ("_codecs", "encode"),
          ("dp_accounting.dp_event", "LaplaceDpEvent"), ("dp_accounting.dp_event", "GaussianDpEvent"),
          ("dp_accounting.dp_event", "NoOpDpEvent"), ("networkx.classes.graph", "Graph")}


class WireError(CvxdpError, ValueError):
    """Bytes from a peer that are not a cvxdp message (garbage, or a class cvxdp does not send)."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module == "builtins" and name in _BUILTINS) or module.startswith("cvxdp.") or module in _NUMPY \
                or (module, name) in _OTHER:
            return super().find_class(module, name)
        raise WireError(f"a message may only hold cvxdp's own classes, numpy arrays and plain values; it names "
                        f"{module}.{name}")


def dumps(obj: Any) -> bytes:
    """The bytes of a message."""
    return pickle.dumps(obj, protocol=5)


def loads(data: bytes) -> Any:
    """A message read back from a peer's bytes (refusing anything but cvxdp's classes and plain values)."""
    if not isinstance(data, (bytes, bytearray)):
        raise WireError(f"a message is bytes; got {type(data).__name__}")
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated or garbage bytes: one clear line
        raise WireError(f"unreadable message ({type(exc).__name__}: {exc})") from None


def unpack(party: str, data: bytes, round: int | None) -> Any:
    """A party's reply read back: its value, or the refusal / error it reports, raised here naming it."""
    try:
        reply = loads(data)
    except CvxdpError as exc:
        raise BackendError(f"Party {party!r} answered garbage in round {round}: {exc}.", agents=(party,),
                           round=round) from None
    if not isinstance(reply, dict) or "ok" not in reply:
        raise BackendError(f"Party {party!r} answered garbage in round {round}.", agents=(party,), round=round)
    if reply["ok"]:
        return reply["value"]
    error = reply["error"]
    if isinstance(error, PartyRefusedError):
        raise error
    raise BackendError(f"Party {party!r} failed in round {round}: {error}", agents=(party,), round=round)


def answer(handle: Callable[[str, dict[str, Any]], Any], data: bytes) -> bytes:
    """The party side of one request: read it, handle it, and pack the reply (its errors included, as text; a
    refusal with its attributes)."""
    try:
        kind, payload = loads(data)
        return dumps({"ok": True, "value": handle(kind, payload)})
    except PartyRefusedError as exc:
        return dumps({"ok": False, "error": exc})
    except Exception as exc:  # noqa: BLE001 - reported to the coordinator, which names the party and the round
        return dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
