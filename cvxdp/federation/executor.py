"""The party's own executor: the only thing that answers the messages its SuperNode receives.

Flower's SuperNode normally starts a ClientApp process for every message, from the app (FAB) that whoever submitted
the run chose: anyone who can submit a run to the SuperLink could run code at the party. ``cvxdp party`` starts its
SuperNode with ``--isolation process`` instead, so the SuperNode starts nothing, and runs this executor in its own
long-lived process: it claims the SuperNode's tasks over the SuperNode's local Runtime API (authenticated with a
secret only the party's user can read: ``--superexec-auth-secret-file``), reads each message and answers it with the
installed cvxdp :class:`~cvxdp.federation.party.Party`, which keeps its agents, compiled nodes and state in memory.

It never installs, imports or runs anything from a FAB. A run whose app is not cvxdp's own (:func:`is_cvxdp_app`:
the FAB holds cvxdp's ``pyproject.toml`` only, naming cvxdp's ServerApp and ClientApp) is answered with an error
and a line in the party's log; its messages reach no party code. A message of cvxdp's app is bytes for the party's
protocol (:mod:`.messages`): data, never code.

This speaks the Runtime API of Flower 1.42 (``AcquireTask``, ``PullTaskInput``, ``PushMessages``,
``PushTaskOutput``), through Flower's own client functions.
"""

from __future__ import annotations

import io
import socket
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from typing import Any

import httpx
from flwr.app import ConfigRecord, Error, Message, RecordDict
from flwr.common.constant import ErrorCode, SubStatus
from flwr.proto.runtime_pb2 import AcquireTaskRequest, SendTaskHeartbeatRequest  # pylint: disable=E0611
from flwr.supercore.constant import TaskType
from flwr.supercore.interceptors import (
    RuntimeTokenHttpInterceptor,
    RuntimeVersionHttpInterceptor,
    SuperExecAuthHttpInterceptor,
)
from flwr.supercore.retry import RetryInvoker, exponential
from flwr.supercore.runtime import RuntimeHttpClient
from flwr.supernode.runtime.run_clientapp import pull_task_input, push_message, push_task_output

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the app a cvxdp party answers: the components of cvxdp's FAB (cvxdp/federation/app/pyproject.toml)
COMPONENTS = {"serverapp": "cvxdp.federation.server_app:app", "clientapp": "cvxdp.federation.client_app:app"}
#: the files cvxdp's FAB holds (the second is Flower's own manifest)
FAB_FILES = {"pyproject.toml", ".info/CONTENT"}
#: the message type of cvxdp's requests
MESSAGE_TYPE = "query.cvxdp"
#: how often a claimed task's token is renewed while the party works on it (Flower lets it lapse after 60 s)
HEARTBEAT_SECONDS = 20.0


def _retries(tries: int) -> RetryInvoker:
    """Retry a local call a few times on a transport error, nothing else (Flower's own invoker retries forever and
    sends its process SIGINT on a 401: right for a process per task, not for a long-lived party)."""
    return RetryInvoker(lambda: exponential(max_delay=2.0), (httpx.TransportError,), max_tries=tries, max_time=30.0)


def is_cvxdp_app(fab_content: bytes) -> tuple[bool, str]:
    """Whether a FAB is cvxdp's own app (and, if not, why): nothing but cvxdp's ``pyproject.toml`` (and Flower's
    manifest), naming cvxdp's installed ServerApp and ClientApp. Its content is read, never run."""
    try:
        with zipfile.ZipFile(io.BytesIO(fab_content)) as fab:
            names = set(fab.namelist())
            if not names <= FAB_FILES or "pyproject.toml" not in names:
                extra = sorted(names - FAB_FILES)
                return False, f"it carries files of its own ({', '.join(extra[:3])}{'...' if len(extra) > 3 else ''})"
            project = tomllib.loads(fab.read("pyproject.toml").decode("utf-8"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, ValueError) as exc:
        return False, f"its app is unreadable ({type(exc).__name__})"
    components = project.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {})
    if components != COMPONENTS:
        return False, f"its components are {components!r}, not cvxdp's"
    return True, ""


class PartyExecutor:
    """Claims and answers the tasks of one SuperNode (see the module docstring).

    Parameters
    ----------
    answer : callable
        ``bytes -> bytes``: the party's answer to a request (:meth:`cvxdp.federation.party.Party.answer`).
    address : str
        The SuperNode's Runtime API, ``127.0.0.1:PORT``.
    secret : bytes
        The SuperExec secret the SuperNode was started with.
    party : str
        Named in the log.
    log : callable
        One line per request (default: nothing).
    poll : float
        Seconds between two claims while idle.
    """

    def __init__(self, answer: Callable[[bytes], bytes], address: str, secret: bytes, *, party: str,
                 log: Callable[[str], None] = lambda line: None, poll: float = 0.2) -> None:
        self.answer, self.address, self.party, self.log, self.poll = answer, address, party, log, poll
        self.claims = RuntimeHttpClient.from_server_address(
            server_address=address, insecure=True, root_certificates=None,
            interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec"),
                          SuperExecAuthHttpInterceptor(master_secret=secret, protected_methods=frozenset(
                              {"/flwr.proto.Runtime/AcquireTask"}))],
            retry_invoker=_retries(1))
        self.handled = 0
        self.refused_apps = 0

    def serve(self, stop: threading.Event) -> None:
        """Answer tasks until ``stop`` is set."""
        while not stop.is_set():
            if not self.serve_one():
                stop.wait(self.poll)

    def serve_one(self) -> bool:
        """Claim and answer one task, if the SuperNode has one; whether it had."""
        try:
            claim = self.claims.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
        except httpx.HTTPError:  # the SuperNode is gone or restarting: the caller checks its process
            return False
        if not (claim.HasField("task") and claim.token):
            return False
        client = RuntimeHttpClient.from_server_address(
            server_address=self.address, insecure=True, root_certificates=None,
            interceptors=[RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                          RuntimeTokenHttpInterceptor(claim.token)],
            retry_invoker=_retries(5))
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(client, done), daemon=True)
        beat.start()
        try:
            self._serve(client)
        except Exception as exc:  # noqa: BLE001 - one task lost (its coordinator names the party); the party goes on
            self.log(f"party {self.party!r}: a task failed at the SuperNode's Runtime API ({type(exc).__name__}: {exc}); its coordinator "
                     "will report the party as not answering")
        finally:
            done.set()
            client.close()
        self.handled += 1
        return True

    def _serve(self, client: Any) -> None:
        """One claimed task: its message, the party's answer (or the refusal of a foreign app), its end."""
        message, context, run, fab = pull_task_input(client)
        ok, why = is_cvxdp_app(fab.content)
        if not ok:
            self.refused_apps += 1
            self.log(f"party {self.party!r}: refused run {run.run_id} of app {run.fab_id!r}: {why}; it runs only "
                     "cvxdp's own app")
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                  reason=f"party {self.party!r} runs only cvxdp's app; {why}"), reply_to=message)
        else:
            reply = self._reply(message)
        push_message(client, reply, context)
        push_task_output(client, context, SubStatus.COMPLETED, "")

    def _reply(self, message: Any) -> Any:
        content = message.content
        try:
            data = bytes(content.config_records["request"]["payload"])
        except (KeyError, TypeError):
            return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                             reason="not a cvxdp request (no request payload)"), reply_to=message)
        answer = self.answer(data)
        return Message(RecordDict({"reply": ConfigRecord({"payload": answer})}), reply_to=message)

    def _heartbeat(self, client: Any, done: threading.Event) -> None:
        """Keep a long task's claim alive (Flower's own heartbeat thread raises SIGINT on failure: not here)."""
        request = SendTaskHeartbeatRequest()
        while not done.wait(HEARTBEAT_SECONDS):
            try:
                client.SendTaskHeartbeat(request)
            except Exception:  # noqa: BLE001 - the task then lapses and the coordinator names the party
                return

    def close(self) -> None:
        self.claims.close()


def wait_until_listening(address: str, timeout: float) -> bool:
    """Whether a TCP server answers at ``address`` (host:port) within ``timeout`` seconds."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


__all__ = ["COMPONENTS", "MESSAGE_TYPE", "PartyExecutor", "is_cvxdp_app", "wait_until_listening"]
