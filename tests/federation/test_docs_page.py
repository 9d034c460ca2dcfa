"""The one-machine blocks of docs/federation.md, run as written: the page's own commands, in its order, each
``background`` block a process of its own (a terminal), then the coordinator's command; plain HTTP and TLS with
SuperNode authentication (where a party whose key is not registered is then refused). Real SuperLink and party
processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cvxdp.run import load_result

pytestmark = pytest.mark.federation

PAGE = Path(__file__).resolve().parents[2] / "docs" / "federation.md"
BLOCK = re.compile(r"<!-- (one-machine(?:-tls)?): (setup|coordinator|background (\S+)) -->\n```bash\n(.*?)```", re.S)


def page_blocks(variant: str) -> list[tuple[str, str | None, str]]:
    """``(kind, name, commands)`` of the page's blocks of ``variant``, in the page's order."""
    return [(kind.split()[0], name, body.strip()) for v, kind, name, body in BLOCK.findall(PAGE.read_text())
            if v == variant]


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _wait_port(port: int, seconds: float = 60.0) -> None:
    for _ in range(int(seconds / 0.2)):
        if _listening(port):
            return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def _an_unregistered_party_is_refused(coordinator: str, tmp_path: Path, env: dict) -> None:
    """With SuperNode authentication, a party whose key the coordinator did not register is refused by the SuperLink:
    its SuperNode is not activated and the party stops, saying so."""
    superlink = re.search(r"--superlink (\S+)", coordinator).group(1)
    for cmd in (["ssh-keygen", "-q", "-t", "ecdsa", "-b", "384", "-N", "", "-f", "intruder.key"],
                ["cvxdp", "parties", "case14_3zones", "--mechanism", "ObjG", "--epsilon", "1", "--out", "intruder"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, env=env, timeout=300)
    intruder = subprocess.run(["cvxdp", "party", "intruder/zone1/party.toml", "--superlink", superlink,
                               "--root-certificates", "ca.crt", "--auth-key", "intruder.key"], cwd=tmp_path,
                              capture_output=True, text=True, env={**env, "FLWR_HOME": str(tmp_path / "home-x")},
                              timeout=300)
    assert intruder.returncode != 0 and "Failed to activate SuperNode" in intruder.stdout, intruder.stdout[-2000:]


@pytest.mark.parametrize("variant", ["one-machine", "one-machine-tls"])
def test_the_pages_one_machine_blocks_run_as_written(variant, tmp_path):
    blocks = page_blocks(variant)
    kinds = [kind for kind, _, _ in blocks]
    assert kinds.count("coordinator") == 1 and kinds.count("background") == 4, kinds
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
    background: list[subprocess.Popen] = []
    logs = tmp_path / "terminals"
    logs.mkdir()
    try:
        for kind, name, commands in blocks:
            if kind == "background":
                home = tmp_path / f"home-{name}"  # each terminal's own Flower home
                home.mkdir()
                log = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the test
                background.append(subprocess.Popen(["bash", "-c", commands], cwd=tmp_path, stdout=log,
                                                   stderr=subprocess.STDOUT, env={**env, "FLWR_HOME": str(home)},
                                                   start_new_session=True))
                port = re.search(r"--port (\d+)", commands)
                if name == "superlink" and port:
                    _wait_port(int(port.group(1)))
                continue
            done = subprocess.run(["bash", "-e", "-c", commands], cwd=tmp_path, capture_output=True, text=True,
                                  env=env, timeout=900)
            assert done.returncode == 0, f"{kind} block failed:\n{commands}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            if kind == "coordinator":
                assert "coordinator: round 3:" in done.stderr  # one line per round, as the page says
                if variant == "one-machine-tls":
                    _an_unregistered_party_is_refused(commands, tmp_path, env)
    finally:
        for proc in background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in background:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    result = load_result(tmp_path / "coordinator" / "result")
    assert len(result.history) == 3 and result.stop_reason == "rounds"
    for zone in ("zone1", "zone2", "zone3"):
        lines = (tmp_path / "parties" / zone / "state" / "ledger.jsonl").read_text().splitlines()
        assert [r["round"] for r in map(json.loads, lines) if r["kind"] == "charge"] == [1, 2, 3]
        assert f"party '{zone}': stopped" in (logs / f"{zone}.log").read_text()  # SIGTERM stopped it cleanly
