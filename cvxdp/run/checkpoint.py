"""Checkpoints of a run: everything needed to continue it with the same random streams.

A checkpoint is written atomically (a uniquely named temporary file, then ``os.replace``), so a run killed
at any moment (SIGINT, SIGKILL, a crashed solver, a full disk) leaves either the previous checkpoint or
the new one, never half of one.

It carries a fingerprint of everything that determines the run, one hash per component: every
configuration key, every agent's problem (its structure and the values of all its parameters *and*
constants), and the context a caller adds (a case file's ``[model]`` table and the data files it names,
see :class:`CheckpointTarget`). A checkpoint whose fingerprint differs is refused with the components
that changed; a corrupt, truncated, empty or foreign file is refused with one line saying what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorruptFileError, CvxdpError
from ..params import fail
from .outdir import atomic_write

CHECKPOINT_FILE = "checkpoint.pkl"
FORMAT = "cvxdp-checkpoint/3"  # 3: one payload for every family (server, loop, nodes, ledger)


class CheckpointTarget(os.PathLike):
    """A checkpoint location (directory or ``.pkl`` file) plus context that belongs in the fingerprint.

    Usable wherever a checkpoint path is accepted (``solve(checkpoint=...)``). ``context`` maps a
    component's name (e.g. ``"[model] table"``, ``"data file 'train.svm'"``) to a JSON-able value or a hash.
    """

    def __init__(self, path: str | os.PathLike, context: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.context = dict(context or {})

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __repr__(self) -> str:
        return f"CheckpointTarget({str(self.path)!r})"


# --------------------------------------------------------------------------- fingerprint
def _hash_value(h: Any, value: Any) -> None:
    if value is None:
        h.update(b"None")
        return
    if hasattr(value, "tocoo"):  # scipy sparse
        coo = value.tocoo()
        for part in (np.asarray(coo.shape), coo.row, coo.col, coo.data):
            h.update(np.ascontiguousarray(part).tobytes())
        return
    arr = np.asarray(value)
    h.update(str(arr.dtype).encode() + str(arr.shape).encode())
    h.update(np.ascontiguousarray(arr).tobytes() if arr.dtype != object else repr(arr.tolist()).encode())


def _hash_expression(h: Any, expr: Any, var_index: Mapping[int, int]) -> None:
    """Hash an expression tree: atoms with their data, variables by position, leaves by value."""
    import cvxpy as cp

    h.update(type(expr).__name__.encode() + str(getattr(expr, "shape", "")).encode())
    if isinstance(expr, cp.Variable):
        h.update(f"var{var_index.get(expr.id, -1)}".encode())
        h.update(repr(sorted(k for k, v in expr.attributes.items() if v is True)).encode())
        return
    if isinstance(expr, (cp.Parameter, cp.Constant)):
        _hash_value(h, expr.value)
        return
    try:
        data = expr.get_data()
    except Exception:  # noqa: BLE001 - atoms without data
        data = None
    if data is not None and not isinstance(expr, cp.constraints.constraint.Constraint):  # constraints: [id]
        text = repr([d if not isinstance(d, np.ndarray) else d.tobytes() for d in data])
        h.update(re.sub(r" at 0x[0-9a-fA-F]+", "", text).encode())
    for arg in getattr(expr, "args", []):
        _hash_expression(h, arg, var_index)


def problem_hash(agent: Any) -> str:
    """Hash of an agent's objective and constraints: structure, variables' positions, parameter and
    constant values (independent of CVXPY's object ids, so rebuilding the same model gives the same hash)."""
    h = hashlib.sha256()
    var_index = {v.id: i for i, v in enumerate(sorted(agent.problem.variables(), key=lambda v: v.id))}
    for part in [agent.objective, *agent.constraints]:
        _hash_expression(h, part, var_index)
    for key in sorted(agent.shared):
        h.update(key.encode())
        _hash_expression(h, agent.shared[key], var_index)
    return h.hexdigest()


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint(config: Mapping[str, Any], agents: Sequence[Any] = (), *,
                data: Mapping[str, Any] | None = None, context: Any = None) -> dict[str, str]:
    """One hash per component that determines the run.

    Parameters
    ----------
    config : dict
        The run's configuration; every (nested) key is its own component.
    agents : sequence of Agent
        Each agent's problem is one component (``agent 'NAME' problem data``).
    data : dict, optional
        Further named arrays (e.g. a vertical party's features).
    context : CheckpointTarget or dict, optional
        Components added by the caller (``CheckpointTarget.context``).
    """
    parts = {f"configuration key {k!r}": _digest(v) for k, v in _flatten(config).items()}
    for agent in agents:
        parts[f"agent {agent.name!r} problem data"] = problem_hash(agent)
    for name, value in (data or {}).items():
        h = hashlib.sha256()
        _hash_value(h, value)
        parts[name] = h.hexdigest()
    context = context.context if isinstance(context, CheckpointTarget) else context
    if not isinstance(context, Mapping):
        context = {}
    for name, value in (context or {}).items():
        parts[name] = value if isinstance(value, str) else _digest(value)
    return parts


def file_hash(path: str | Path) -> str:
    """SHA-256 of a file's content, or of every file under a directory (names and contents)."""
    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        h.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def case_context(case: Any) -> dict[str, Any]:
    """Fingerprint components of a case file: its ``[model]`` table and the content of every file or
    directory that a string entry of the table names (relative to the case file)."""
    context: dict[str, Any] = {"[model] table": case.model}
    base = Path(case.path).parent
    for key, value in sorted(case.model.items()):
        if isinstance(value, str) and value:
            candidate = base / value
            if candidate.exists():
                context[f"data file {value!r} ([model] {key})"] = file_hash(candidate)
    return context


def _changed(saved: Mapping[str, str], expected: Mapping[str, str]) -> list[str]:
    keys = sorted(set(saved) | set(expected))
    return [k for k in keys if saved.get(k) != expected.get(k)]


def _describe(names: Iterable[str], limit: int = 6) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# --------------------------------------------------------------------------- files
def checkpoint_path(path: str | os.PathLike) -> Path:
    """The checkpoint file of ``path`` (a directory, or a ``.pkl`` file)."""
    path = Path(path)
    if path.suffix == ".pkl":
        return path
    if path.exists() and not path.is_dir():
        raise fail("checkpoint", "solve", "a directory or a .pkl file", f"{str(path)} (an existing regular file)")
    return path / CHECKPOINT_FILE


_WHAT_TO_DO = "delete it to start the run afresh, or pass a different --out / checkpoint="


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Atomically write ``payload`` (pickle) to ``path`` (a directory or a .pkl file).

    A failed write (disk full, read-only) raises :class:`~cvxdp.errors.OutputError` and leaves the last
    good checkpoint in place.
    """
    payload = {"format": FORMAT, **payload}
    atomic_write(checkpoint_path(path), lambda fh: pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL),
                 what="checkpoint")


def load_checkpoint(path: str | os.PathLike, expected: Mapping[str, str] | str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if there is one.

    Raises :class:`~cvxdp.errors.CorruptFileError` for a file that is not a readable cvxdp checkpoint and
    :class:`~cvxdp.errors.CvxdpError` naming the changed components when it belongs to another run.
    """
    target = checkpoint_path(path)
    if not target.exists():
        return None
    try:
        with open(target, "rb") as fh:
            payload = pickle.load(fh)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means the file is unusable
        kind = "empty" if target.stat().st_size == 0 else "corrupt or truncated"
        raise CorruptFileError(f"The checkpoint {str(target)!r} is {kind} ({type(exc).__name__}: {exc}); "
                               f"{_WHAT_TO_DO}.") from None
    if not isinstance(payload, dict) or "fingerprint" not in payload:
        raise CorruptFileError(f"The file {str(target)!r} is not a cvxdp checkpoint; {_WHAT_TO_DO}.")
    saved = payload["fingerprint"]
    if not isinstance(saved, dict) or payload.get("format") != FORMAT:
        raise CvxdpError(f"The checkpoint {str(target)!r} was written by an older cvxdp (another checkpoint "
                         f"format) and cannot be resumed by this run; {_WHAT_TO_DO}.")
    if isinstance(expected, Mapping):
        changed = _changed(saved, expected)
    else:
        changed = [] if saved == expected else ["the run's fingerprint"]
    if changed:
        raise CvxdpError(f"The checkpoint {str(target)!r} belongs to a run with another configuration or other "
                         f"data (changed: {_describe(changed)}); {_WHAT_TO_DO}.")
    return payload


def remove_checkpoint(path: str | os.PathLike) -> None:
    target = checkpoint_path(path)
    if target.exists():
        target.unlink()
