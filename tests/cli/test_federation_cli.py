"""The federation's commands as an operator meets them: `cvxdp federate --superlink` fails fast with one line when the
SuperLink cannot be reached or its certificate is refused; `cvxdp parties` writes each party's own policy;
`cvxdp party --ledger` prints the lifetime ledger."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from cvxdp.cli.main import cli
from cvxdp.federation.coordinator import LocalChannel, run_federation
from cvxdp.federation.party import PartyFile

pytestmark = pytest.mark.federation


def _federate(tmp_path: Path, *extra: str):
    return CliRunner().invoke(cli, ["federate", "toy", "--parties", "agent0,agent1", "--rounds", "1", "--out",
                                    str(tmp_path / "coordinator"), *extra])


def test_an_unreachable_superlink_ends_federate_at_once_with_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens on it once closed
    out = _federate(tmp_path, "--superlink", f"127.0.0.1:{port}", "--insecure")
    assert out.exit_code != 0
    assert "flwr run was refused" in out.output and "SuperLink is unavailable" in out.output
    assert "Traceback" not in out.output


def test_a_refused_certificate_ends_federate_at_once_with_one_line(tmp_path):
    """A SuperLink that does not speak TLS with the given CA (here: a socket that closes every connection)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def refuse() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    ca = tmp_path / "ca.crt"
    from cvxdp.federation.launch import make_certificates

    ca.write_bytes(make_certificates(tmp_path / "certs")["ca"].read_bytes())
    try:
        out = _federate(tmp_path, "--superlink", f"127.0.0.1:{server.getsockname()[1]}", "--root-certificates",
                        str(ca))
    finally:
        stop.set()
        thread.join()
        server.close()
    assert out.exit_code != 0 and "flwr run was refused" in out.output and "Traceback" not in out.output


def test_parties_writes_each_partys_own_policy_and_party_prints_its_ledger(tmp_path):
    out = CliRunner().invoke(cli, ["parties", "toy", "--mechanism", "ObjG", "--epsilon", "0.5", "--delta", "1e-6",
                                   "--accountant", "rdp", "--budget-epsilon", "3", "--budget-delta", "1e-5",
                                   "--out", str(tmp_path / "parties"), "--json"])
    assert out.exit_code == 0, out.output
    files = [Path(f) for f in json.loads(out.stdout.strip().splitlines()[-1])["parties"]]
    policy = PartyFile(files[0]).policy
    assert policy.privacy == {"mechanism": "ObjG", "epsilon": 0.5, "delta": 1e-6} and policy.accountant == "rdp"
    assert policy.budget == (3.0, 1e-5)
    plan = {"name": "toy", "algorithm": {"name": "ladmm", "rho": 1.0, "eta": 2.0, "rounds": 2},
            "privacy": {"mechanism": "ObjG", "epsilon": 0.5, "delta": 1e-6}, "run": {"accountant": "rdp"},
            "agents": [f.parent.name for f in files]}
    run_federation(plan, LocalChannel(files))
    ledger = CliRunner().invoke(cli, ["party", str(files[0]), "--ledger"])
    assert ledger.exit_code == 0, ledger.output
    assert "budget (3, 1e-05)" in ledger.output and "agent0: 2 releases (2 calls) in 1 run(s)" in ledger.output
    report = json.loads(CliRunner().invoke(cli, ["party", str(files[0]), "--ledger", "--json"]).stdout.splitlines()[-1])
    assert report["agents"]["agent0"]["spent"]["basic"][0] == pytest.approx(1.0)
    assert [h["budget"] for h in report["budget_history"]] == [[3.0, 1e-5]]


def test_a_party_file_without_a_policy_says_what_to_write(tmp_path):
    file = tmp_path / "party.toml"
    file.write_text('[party]\nname = "zone1"\nagents = "agents.pkl"\n')
    out = CliRunner().invoke(cli, ["party", str(file), "--ledger"])
    assert out.exit_code != 0 and "no [privacy] table" in out.output and 'mechanism = "none"' in out.output
    file.write_text('[party]\nname = "zone1"\nagents = "agents.pkl"\nbudget_epsilon = 1.0\n')
    out = CliRunner().invoke(cli, ["party", str(file), "--ledger"])
    assert "budget_epsilon moved to [budget] epsilon" in out.output
