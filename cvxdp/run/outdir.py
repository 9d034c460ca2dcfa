"""Output directories: creating them with clear errors, atomic writes, and a lock against two writers.

Every write of a checkpoint, a result or a study table goes through :func:`atomic_write`: a uniquely
named temporary file in the same directory, ``fsync``, then ``os.replace`` — two processes never share a
temporary name, and a reader sees the old file or the new one, never half of one. An ``OSError`` (disk
full, read-only file system, permission denied) becomes one :class:`~cvxdp.errors.OutputError` line naming
the file; the previous version of the file is left intact.

:class:`OutputLock` guards a directory with a lock file holding the owner's pid, host and start time. A
second writer is refused with a message naming the holder; a lock left by a dead process on this host is
taken over.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..errors import OutputError, OutputLockedError

LOCK_FILE = ".cvxdp.lock"


def describe_oserror(exc: OSError) -> str:
    """A short reason for ``exc``: the OS message and, when known, the errno name (``ENOSPC``)."""
    name = errno.errorcode.get(exc.errno or -1)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


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
