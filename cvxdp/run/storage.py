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

import contextlib
import functools
import hashlib
import json
import os
import pickle
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..errors import CorruptFileError, CvxdpError, OutputError, OutputLockedError, describe_oserror, fail

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


LOCK_FILE = ".cvxdp.lock"


def prepare_dir(path: str | Path, what: str = "output directory") -> Path:
    """Create directory ``path`` (and parents); a path under a regular file, a read-only or full disk
    raise :class:`OutputError` naming the path."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"The {what} {str(path)!r} is an existing regular file; choose another path "
                          "(e.g. another --out).")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputError(f"Cannot create the {what} {str(path)!r}: {str(parent)!r} is a regular file, "
                              "not a directory; choose another path (e.g. another --out).")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"Cannot create the {what} {str(path)!r}: {describe_oserror(exc)}; choose another "
                          "path (e.g. another --out).") from None
    return path


def atomic_write(target: str | Path, write: Callable[[IO[bytes]], None], what: str = "file") -> Path:
    """Write ``target`` through ``write(fh)`` on a unique temporary file, then ``os.replace`` it.

    On any ``OSError`` the temporary file is removed, ``target`` keeps its previous content, and an
    :class:`OutputError` names the file and the reason.
    """
    target = Path(target)
    prepare_dir(target.parent)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise OutputError(f"Could not write the {what} {str(target)!r}: {describe_oserror(exc)}. The previous "
                          "version (if any) is intact; free space or fix the permissions, or choose another "
                          "--out, then run the same command again.") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return target


def atomic_write_text(target: str | Path, text: str, what: str = "file") -> Path:
    """:func:`atomic_write` for a UTF-8 text."""
    return atomic_write(target, lambda fh: fh.write(text.encode("utf-8")), what)


# --------------------------------------------------------------------------- lock
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_lock(lock: Path) -> dict | None:
    try:
        info = json.loads(lock.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _lock_path(path: Path) -> Path:
    return path.parent / f"{path.name}.lock" if path.suffix == ".pkl" else path / LOCK_FILE


class OutputLock:
    """The lock of directory ``path`` (or of a ``.pkl`` checkpoint file); a context manager.

    Re-entrant within one process (a CLI run locks its --out, then the solver locks the same directory).
    :meth:`acquire` raises :class:`OutputLockedError` naming the holder's pid, host and start time when
    another live process holds it; a lock whose process is gone (same host) is taken over.
    ``OutputLock(None)`` is a no-op.
    """

    def __init__(self, path: str | os.PathLike | None, what: str = "output directory") -> None:
        self.lock = None if path is None else _lock_path(Path(path))
        self.what = what
        self.acquired = False

    def _refuse(self, holder: dict) -> OutputLockedError:
        return OutputLockedError(
            f"The {self.what} {str(self.lock.parent)!r} is in use by another cvxdp process (pid "
            f"{holder.get('pid')} on host {holder.get('host')}, started {holder.get('started', '?')}); wait for it "
            f"to finish or choose another --out. If that process is gone, delete {str(self.lock)!r}.")

    def acquire(self) -> OutputLock:
        if self.lock is None:
            return self
        lock = self.lock
        prepare_dir(lock.parent, self.what)
        host, pid = socket.gethostname(), os.getpid()
        for _ in range(3):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = _read_lock(lock)
                if holder is not None and holder.get("pid") == pid and holder.get("host") == host:
                    return self  # held by this process already
                if holder is not None and (holder.get("host") != host or
                                           (isinstance(holder.get("pid"), int) and _alive(holder["pid"]))):
                    raise self._refuse(holder) from None
                with contextlib.suppress(FileNotFoundError):  # stale (dead pid) or unreadable: take it over
                    lock.unlink()
                continue
            except OSError as exc:
                raise OutputError(f"Cannot create the lock file {str(lock)!r}: {describe_oserror(exc)}; choose "
                                  "another --out.") from None
            with os.fdopen(fd, "w") as fh:
                json.dump({"pid": pid, "host": host, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}, fh)
            self.acquired = True
            return self
        raise OutputLockedError(f"Could not take the lock {str(lock)!r}; "  # pragma: no cover
                                "another process keeps taking it.")

    def release(self) -> None:
        if not self.acquired:
            return
        self.acquired = False
        holder = _read_lock(self.lock)
        if holder is not None and holder.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                self.lock.unlink()

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def locks_output(what: str = "output directory") -> Callable:
    """Decorator: hold :class:`OutputLock` on the function's second argument (its output directory)."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(path: Any, out: str | os.PathLike, *args: Any, **kwargs: Any) -> Any:
            with OutputLock(prepare_dir(out, what), what):
                return func(path, out, *args, **kwargs)
        return wrapper

    return decorate
