"""``cvxdp party``: one party's process, its SuperNode and its executor, from start to stop.

:func:`serve_party` checks the party before it connects (its file, policy, agents, data and ledger: a mistake is said
in one line then, not at the first request), writes a fresh SuperExec secret readable by the party's user only,
starts Flower's SuperNode with ``--isolation process`` on a free local port (or the one given), so that the SuperNode
runs no app itself, and answers its messages with the party's own executor (:mod:`.executor`) in this process, where
the party's agents, compiled nodes and state stay in memory. It prints one line per request, and stops its SuperNode
on any stop signal (SIGTERM from a service manager, SIGINT from Ctrl-C, SIGHUP); if it is killed outright, the
SuperNode gets SIGTERM from the kernel (Linux: a parent-death signal). If the SuperNode stops (the SuperLink refused
its key, for example), the party stops too and says why, with the last lines of the SuperNode's log.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import BackendError
from .party import Party

BIN = Path(sys.executable).parent
#: no telemetry, no update check: nothing leaves the machine
QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
#: how long the SuperNode may take to open its Runtime API
START_SECONDS = 60.0
SUPERNODE_LOG = "supernode.log"
#: a SuperNode that the SuperLink forgot (it exits 0) is started again, at most this many times in RESTART_WINDOW s
MAX_RESTARTS = 5
RESTART_WINDOW = 600.0
SECRET_FILE = ".superexec-secret"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def supernode_command(name: str, superlink: str, *, port: int, secret_file: Path,
                      root_certificates: Path | None = None, auth_key: Path | None = None,
                      insecure: bool = False) -> list[str]:
    """The ``flower-supernode`` command of a party: no app of its own (``--isolation process``), its Runtime API on
    127.0.0.1:``port`` behind the SuperExec secret. ``insecure`` (plain HTTP) must be asked for; otherwise the
    SuperLink's certificate is checked against ``root_certificates``."""
    cmd = [str(BIN / "flower-supernode"), "--superlink", superlink, "--isolation", "process",
           "--superexec-auth-secret-file", str(secret_file), "--host", "127.0.0.1", "--port", str(port),
           "--node-config", f"party='{name}'"]
    if insecure:
        cmd.append("--insecure")
    elif root_certificates is not None:
        cmd += ["--root-certificates", str(Path(root_certificates).resolve())]
    if auth_key is not None:
        cmd += ["--auth-supernode-private-key", str(Path(auth_key).resolve())]
    return cmd


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Linux: the child gets SIGTERM when the party's process dies, however it dies (prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _start_supernode(cmd: list[str], log: Path, port: int, stop: threading.Event, name: str) -> subprocess.Popen:
    """Start the party's SuperNode and wait until its Runtime API listens."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **QUIET},
                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    deadline = time.monotonic() + START_SECONDS
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > deadline or stop.is_set():
            if proc.poll() is None:
                proc.terminate()
            raise BackendError(f"Party {name!r}: its SuperNode did not start (log {log}):\n{_tail(log)}")
        time.sleep(0.1)
    return proc


def serve_party(party_file: str | Path, superlink: str, *, port: int | None = None,
                root_certificates: Path | None = None, auth_key: Path | None = None, insecure: bool = False,
                say: Callable[[str], None] = print, poll: float = 0.2) -> int:
    """Run one party until it is stopped (see the module docstring); its exit code (0 after a stop signal)."""
    party = Party(party_file)
    name = party.name
    plain = say

    def say(line: str) -> None:  # every line with its time (milliseconds): the party's log
        plain(f"{datetime.datetime.now().strftime('%H:%M:%S.%f')[:-3]} {line}")

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT,
                                                                          signal.SIGHUP)}
    proc: subprocess.Popen | None = None
    secret_file = party.state / SECRET_FILE
    try:
        for path in party.file.private_files():
            say(f"warning: party {name!r}: {path} can be read by other users of this machine (chmod go-rwx)")
        say(_introduction(party))
        secret = secrets.token_bytes(32)
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
        port = port or free_port()
        log = party.state / SUPERNODE_LOG
        cmd = supernode_command(name, superlink, port=port, secret_file=secret_file,
                                root_certificates=root_certificates, auth_key=auth_key, insecure=insecure)
        proc = _start_supernode(cmd, log, port, stop, name)
        say(f"party {name!r}: SuperNode on 127.0.0.1:{port} (its log: {log}), connecting to {superlink}; it answers "
            "with cvxdp's own app only. Stop it with Ctrl-C or SIGTERM.")
        from .executor import PartyExecutor  # noqa: PLC0415 - optional: Flower loads only when a party serves

        executor = PartyExecutor(party.answer, f"127.0.0.1:{port}", secret, party=name, log=say, poll=poll)
        party.log = say
        restarts: list[float] = []
        try:
            while not stop.is_set():
                if proc.poll() is not None:
                    # exit code 0 that the party did not ask for: the SuperLink forgot the node (it was started
                    # again); start the SuperNode again, the party keeping everything it holds
                    now = time.monotonic()
                    restarts = [r for r in restarts if now - r < RESTART_WINDOW] + [now]
                    if proc.returncode != 0 or len(restarts) > MAX_RESTARTS:
                        say(f"party {name!r}: its SuperNode stopped (exit code {proc.returncode}); last lines of "
                            f"{log}:\n{_tail(log)}")
                        return proc.returncode or 1
                    say(f"party {name!r}: the SuperLink no longer knows its SuperNode (it was started again?); "
                        "starting the SuperNode again")
                    proc = _start_supernode(cmd, log, port, stop, name)
                    continue
                if not executor.serve_one():
                    stop.wait(poll)
        finally:
            executor.close()
        say(f"party {name!r}: stopped")
        return 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            secret_file.unlink()
        party.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _introduction(party: Party) -> str:
    """One line: the party, its agents, its policy, its budget and what it has spent."""
    policy, summary = party.policy, party.ledger.summary()
    privacy = ", ".join(f"{k} {v}" for k, v in policy.privacy.items() if k != "mechanism")
    spent = max((a["spent"][policy.accountant][0] for a in summary["agents"].values()), default=0.0)
    budget = "no lifetime budget" if policy.budget is None else \
        f"lifetime budget ({policy.budget[0]:g}, {policy.budget[1]:g}), spent {spent:.4g} ({policy.accountant})"
    return (f"party {party.name!r}: {len(party.agents)} agent(s) ({', '.join(party.agents)}), policy "
            f"{policy.mechanism_name}{' (' + privacy + ')' if privacy else ''}, {budget}")


def describe_ledger(party_file: str | Path) -> dict[str, Any]:
    """``cvxdp party PARTY.toml --ledger``: the lifetime ledger's summary (the party is not started)."""
    party = Party(party_file, lock=False)
    return party.ledger_report()


__all__ = ["QUIET", "describe_ledger", "free_port", "serve_party", "supernode_command"]
