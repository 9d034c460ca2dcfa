"""A federation on this machine's loopback: a real SuperLink and one real party process per party.

:class:`LocalFederation` starts them (on free ports of 127.0.0.1, each with its own ``FLWR_HOME``): the SuperLink,
and per party ``cvxdp party`` (:mod:`.serve`: its SuperNode and its own executor), submits cvxdp's Flower app with
``flwr run`` and waits for the coordinator's status file, then stops every process it started (SuperExec and
``flwr-*app`` children included). With ``tls=True`` it makes a throw-away CA and a certificate for
127.0.0.1 and every connection is TLS; with ``auth=True`` (TLS too) each party gets its own key pair, registered at
the SuperLink under the party's name, and a SuperNode without a registered key is refused.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import BackendError, OptionalDependencyError
from .party import PartyFile
from .serve import QUIET, free_port

APP_DIR = Path(__file__).resolve().parent / "app"
BIN = Path(sys.executable).parent
#: the file the coordinator's ServerApp writes into the plan's output directory when it ends
STATUS_FILE = "federation.json"
#: the file the coordinator's ServerApp appends one line per event to (``cvxdp federate`` prints them)
PROGRESS_FILE = "progress.log"
#: how long a restarted party with a registered key keeps trying to be activated (Flower: 2 x 30 s heartbeat)
ACTIVATION_WAIT = 90.0
#: how long the coordinator's ServerApp may stay silent (it says something at least every few seconds while it runs)
QUIET_SECONDS = 120.0
#: how long ``flwr run`` may take to submit a run
SUBMIT_SECONDS = 60.0
#: how often the SuperLink's executor looks for a run to start (Flower's default: 1 s)
SERVERAPP_POLL = {"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1"}


def _wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
        time.sleep(0.2)
    return False


def make_certificates(folder: Path) -> dict[str, Path]:
    """A throw-away CA and a server certificate for 127.0.0.1 (PEM files in ``folder``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cvxdp federation test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP384R1())
    import ipaddress

    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": folder / "ca.crt", "cert": folder / "server.pem", "key": folder / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return paths


def make_node_key(folder: Path, name: str) -> tuple[Path, Path]:
    """A SuperNode's authentication key pair (EC P-384, OpenSSH format): (private key, public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP384R1())
    private, public = folder / name, folder / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                          serialization.NoEncryption()))
    private.chmod(0o600)
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH))
    return private, public


def party_command(party_file: Path, superlink: str, *, port: int, root_certificates: Path | None = None,
                  auth_key: Path | None = None) -> list[str]:
    """``cvxdp party`` for ``party_file`` (plain HTTP on loopback unless a CA is given)."""
    cmd = [sys.executable, "-m", "cvxdp.cli.main", "party", str(Path(party_file).resolve()), "--superlink", superlink,
           "--port", str(port)]
    cmd += ["--root-certificates", str(root_certificates)] if root_certificates is not None else ["--insecure"]
    if auth_key is not None:
        cmd += ["--auth-key", str(auth_key)]
    return cmd


def require_flower() -> None:
    """Flower is an optional extra: a clear error when it is missing."""
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise OptionalDependencyError("A federation needs Flower: pip install 'cvxdp[federation]'.") from exc


class LocalFederation:
    """A SuperLink and one SuperNode per party file on 127.0.0.1 (a context manager; see the module docstring).

    Parameters
    ----------
    party_files : list of path
        One SuperNode per party file.
    work : path
        The federation's own folder (each process's ``FLWR_HOME``, logs, certificates, keys).
    tls, auth : bool
        TLS on every connection; SuperNode authentication (implies TLS). Without ``tls`` the processes talk plain
        HTTP on loopback, which a test on one machine asks for explicitly.
    """

    def __init__(self, party_files: Sequence[str | Path], work: str | Path, *, tls: bool = False,
                 auth: bool = False) -> None:
        require_flower()
        self.party_files = [Path(p).resolve() for p in party_files]
        self.work = Path(work).resolve()
        self.tls, self.auth = tls or auth, auth
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.certs: dict[str, Path] | None = None
        self.env = {**os.environ, **QUIET, **SERVERAPP_POLL,
                    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    # ---------------------------------------------------------------- processes
    def _home(self, name: str) -> Path:
        home = self.work / "homes" / name
        home.mkdir(parents=True, exist_ok=True)
        return home

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, env={**self.env, "FLWR_HOME": str(self._home(name))}, stdout=log,
                                stderr=subprocess.STDOUT, cwd=self.work, start_new_session=True)
        self.procs.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.work / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> LocalFederation:
        self.work.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        try:
            self._start_superlink()
            for path in self.party_files:
                self.start_party(path)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_superlink(self) -> None:
        cmd = [str(BIN / "flower-superlink"), "--host", "127.0.0.1", "--port", str(self.port),
               "--disable-runtime-dependency-installation"]
        if self.tls:
            self.certs = self.certs or make_certificates(self.work / "certificates")
            cmd += ["--ssl-ca-certfile", str(self.certs["ca"]), "--ssl-certfile", str(self.certs["cert"]),
                    "--ssl-keyfile", str(self.certs["key"])]
        else:
            cmd.append("--insecure")
        if self.auth:
            cmd.append("--enable-supernode-auth")
        proc = self._spawn("superlink", cmd)
        self.procs.remove(("superlink", proc))
        self.procs.insert(0, ("superlink", proc))  # the first process: the SuperLink
        if not _wait_port(self.port, 60):
            raise BackendError("The SuperLink did not open its port within 60 s:\n" + self.log("superlink")[-2000:])
        self._write_cli_config()

    def _write_cli_config(self) -> None:
        _write_cli_config(self._home("cli"), "local", f"127.0.0.1:{self.port}",
                          self.certs["ca"] if self.certs else None)

    def flwr(self, *args: str, timeout: float = SUBMIT_SECONDS) -> subprocess.CompletedProcess:
        """The ``flwr`` CLI against this SuperLink."""
        return subprocess.run([str(BIN / "flwr"), *args], env={**self.env, "FLWR_HOME": str(self._home("cli"))},
                              capture_output=True, text=True, timeout=timeout, cwd=self.work, check=False)

    def start_party(self, party_file: Path, *, register: bool = True) -> subprocess.Popen:
        """One party process (``cvxdp party``: its SuperNode and executor) for ``party_file`` (with auth: its key,
        registered under the party's name unless ``register`` is False; a party started again keeps its key and
        registration)."""
        name = PartyFile(party_file).name
        key = None
        restart = self.auth and (self.work / "keys" / name).is_file()
        if restart:
            key = self.work / "keys" / name
        elif self.auth:
            key, public = make_node_key(self.work / "keys", name)
            if register:
                done = self.flwr("supernode", "register", str(public), "local", "--name", name)
                if done.returncode != 0:
                    raise BackendError(f"Could not register party {name!r}'s key: {done.stdout}{done.stderr}")
        cmd = party_command(party_file, f"127.0.0.1:{self.port}", port=free_port(),
                            root_certificates=self.certs["ca"] if self.certs else None, auth_key=key)
        deadline = time.monotonic() + ACTIVATION_WAIT
        while True:
            proc = self._spawn(f"party-{name}", cmd)
            if not restart:
                return proc
            # a registered node that dropped stays online at the SuperLink for two heartbeat intervals (60 s):
            # until then a restarted node is not activated and exits; start it again
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=8)
            if proc.poll() is None or time.monotonic() > deadline:
                return proc
            self.procs.remove((f"party-{name}", proc))
            time.sleep(5)

    def run(self, plan: str | Path, *, timeout: float = 1800.0,
            say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
        """Submit cvxdp's app with ``plan`` and wait for the coordinator's status file, passing its progress lines to
        ``say``; its content."""
        superlink = self.procs[0][1]

        def superlink_alive() -> None:
            if superlink.poll() is not None:
                raise BackendError("The SuperLink stopped:\n" + self.log("superlink")[-2000:])

        return _run_app(self.flwr, "local", Path(plan).resolve(), timeout, check=superlink_alive,
                        where=f" (logs in {self.work})", say=say)

    # ---------------------------------------------------------------- stopping
    def _descendants(self, roots: Sequence[int] | None = None) -> set[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(entry.name))
        out: set[int] = set()
        todo = [proc.pid for _, proc in self.procs] if roots is None else list(roots)
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in out:
                    out.add(child)
                    todo.append(child)
        return out

    def kill_superlink(self) -> None:
        """Kill the SuperLink outright (SIGKILL), with its executor and the coordinator's ServerApp (a test of a
        coordinator's machine that fails); the parties keep running and try to reconnect."""
        name, proc = self.procs[0]
        descendants = self._descendants([proc.pid])
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in descendants:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
        self.procs.pop(0)

    def restart_superlink(self) -> None:
        """Start the SuperLink again on its port (its state is gone; the parties' SuperNodes reconnect)."""
        self._start_superlink()

    def stop_party(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one party's process and its SuperNode (a test of a party that drops), and wait for it."""
        for label, proc in self.procs:
            if label == f"party-{name}" and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop every process this federation started (SuperExec and flwr-*app children included)."""
        descendants = self._descendants() if Path("/proc").is_dir() else set()
        for _, proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in descendants:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for _, proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.procs = []


def _write_cli_config(home: Path, name: str, address: str, root_certificates: Path | None) -> None:
    """The ``flwr`` CLI's configuration in ``home``: one SuperLink connection ``name`` (TLS with the CA, else plain)."""
    lines = ["[superlink]", f'default = "{name}"', "", f"[superlink.{name}]", f'address = "{address}"']
    lines.append(f'root-certificates = "{root_certificates}"' if root_certificates is not None else "insecure = true")
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def _submitted(done: subprocess.CompletedProcess, where: str) -> None:
    """``flwr run --format json``'s answer: raise with its reason when the SuperLink did not take the run (an
    unreachable SuperLink, a refused certificate: ``flwr run`` exits 0 then, with ``"success": false``)."""
    try:
        answer = json.loads(done.stdout[done.stdout.find("{"):]) if "{" in done.stdout else {}
    except ValueError:
        answer = {}
    if done.returncode == 0 and answer.get("success", True):
        return
    reason = str(answer.get("error-message") or done.stderr or done.stdout).strip().splitlines()
    reason = [line for line in reason if line.strip() and "configuration warnings" not in line
              and not line.startswith("- Recommended")]
    raise BackendError(f"flwr run was refused{where}: {' '.join(reason[-2:]) or 'no reason given'}")


def _run_app(flwr: Callable[..., subprocess.CompletedProcess], connection: str, plan: Path, timeout: float, *,
             check: Callable[[], None] = lambda: None, where: str = "", say: Callable[[str], None] = lambda s: None,
             quiet: float = QUIET_SECONDS) -> dict[str, Any]:
    """``flwr run`` cvxdp's app over ``connection`` with ``plan``, then wait for the status file the ServerApp
    writes in the plan's ``out`` (``check`` raises when the run can no longer finish), passing each progress line it
    writes to ``say``; its status. A refused submission, or a ServerApp silent for ``quiet`` seconds, ends it with one
    line."""
    out = Path(json.loads(plan.read_text())["out"])
    status_file, progress = out / STATUS_FILE, out / PROGRESS_FILE
    status_file.unlink(missing_ok=True)
    progress.unlink(missing_ok=True)
    try:
        done = flwr("run", str(APP_DIR), connection, "--run-config", f'plan="{plan}"', "--format", "json")
    except subprocess.TimeoutExpired:
        raise BackendError(f"flwr run did not submit the run within {SUBMIT_SECONDS:g} s{where}.") from None
    _submitted(done, where)
    deadline = time.monotonic() + timeout
    heard, seen = time.monotonic(), 0
    while not status_file.exists():
        now = time.monotonic()
        if now > deadline:
            raise BackendError(f"The federation did not finish within {timeout:g} s{where}.")
        if progress.exists():
            lines = progress.read_text(errors="replace").splitlines()
            for line in lines[seen:]:
                say(line)
            if len(lines) > seen:
                heard, seen = now, len(lines)
        if now - heard > quiet:
            raise BackendError(f"The coordinator's ServerApp has said nothing for {quiet:g} s{where}: it did not "
                               "start (is cvxdp installed in the SuperLink's environment?) or it stopped.")
        check()
        time.sleep(0.25)
    if progress.exists():
        for line in progress.read_text(errors="replace").splitlines()[seen:]:
            say(line)
    return json.loads(status_file.read_text())


def submit(superlink: str, plan: str | Path, *, root_certificates: Path | None = None, insecure: bool = False,
           timeout: float = 1800.0, work: str | Path | None = None,
           say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Run cvxdp's app on a running SuperLink (the coordinator's, HOST:PORT) with ``plan``; wait for the status
    file the ServerApp writes (it runs next to the SuperLink, on the coordinator's machine), passing its progress
    lines to ``say``, and return it."""
    require_flower()
    plan = Path(plan).resolve()
    home = Path(work or json.loads(plan.read_text())["out"]) / "flwr-home"
    home.mkdir(parents=True, exist_ok=True)
    _write_cli_config(home, "coordinator", superlink, None if insecure else Path(root_certificates).resolve())

    def flwr(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "flwr"), *args], env={**os.environ, **QUIET, "FLWR_HOME": str(home)},
                              capture_output=True, text=True, timeout=SUBMIT_SECONDS, check=False)

    return _run_app(flwr, "coordinator", plan, timeout, where=f" (SuperLink {superlink})", say=say)
