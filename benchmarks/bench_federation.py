"""cvxdp's federation against Flower's own floor, in one sitting: round time and CPU per message at the parties.

    python benchmarks/bench_federation.py                      # 3, 10 and 30 parties, 6 rounds
    python benchmarks/bench_federation.py --parties 3 --rounds 4

For each number of parties P, two federations on this machine's loopback, one after the other, each with a real
SuperLink and P real SuperNodes:

- **cvxdp**: ``cvxdp federate``'s local federation of P toy agents (``cases/toy.toml``, LinearizedADMM, ObjG at
  epsilon 1, tiny local solves): each party is a ``cvxdp party`` process (its SuperNode with ``--isolation process``
  and the party's own executor, the party in memory);
- **trivial**: ``benchmarks/flower_trivial``, a Flower app of the same shape (one message of a small array per party
  per round, every reply awaited), run the standard Flower way: each SuperNode starts a ClientApp process per
  message.

Columns, measured from the parties' side: ``s/round``, the median time between two consecutive round messages
arriving at a party (cvxdp: the party's own log; trivial: its ClientApp's), which includes Flower's polling (an idle
SuperNode asks the SuperLink every 3 s) and the slowest party; ``CPU s/message``, the CPU time of every process on
the parties' side (the SuperNodes and everything they or ``cvxdp party`` started), from the submission of the run to
its end, over the messages the parties answered (cvxdp: the introduction, the start, the rounds and the finish;
trivial: the rounds); and the ratios cvxdp / trivial. Timings depend on the machine's load: ``uptime`` is printed.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cvxdp.config.build import load_case
from cvxdp.federation.launch import LocalFederation
from cvxdp.federation.parties import write_parties, write_plan
from cvxdp.federation.serve import free_port

HERE = Path(__file__).resolve().parent
CASES = HERE.parent / "cases"
TRIVIAL = HERE / "flower_trivial"
TICKS = __import__("os").sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and everything under it, the reaped children included."""
    total, todo, seen = 0.0, [pid], set()
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS  # utime, stime, cutime, cstime
        todo.extend(children.get(p, []))
    return total


def parties_cpu(federation: LocalFederation) -> float:
    return sum(tree_cpu(proc.pid) for name, proc in federation.procs if name.startswith("party-"))


def periods(times: list[list[float]]) -> float:
    """The median interval between two consecutive messages at a party, over parties and rounds."""
    gaps = [b - a for arrivals in times for a, b in zip(arrivals, arrivals[1:])]
    return statistics.median(gaps) if gaps else float("nan")


class TrivialFederation(LocalFederation):
    """A SuperLink and P plain SuperNodes (Flower's own executor, a ClientApp process per message)."""

    def start_party(self, party_file: Path, *, register: bool = True) -> subprocess.Popen:
        name = party_file.parent.name
        cmd = [str(Path(sys.executable).parent / "flower-supernode"), "--insecure", "--superlink",
               f"127.0.0.1:{self.port}", "--port", str(free_port()), "--node-config", f"party='{name}'"]
        return self._spawn(f"party-{name}", cmd)


def cvxdp_row(parties: int, rounds: int, work: Path) -> dict:
    case = load_case(CASES / "toy.toml")
    case.model["agents"] = parties
    case.algorithm.update(rounds=rounds, eta=2.0)
    case.privacy = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}
    files = write_parties(case, work / "parties")
    names = [f.parent.name for f in files]
    plan = write_plan(case, work / "plan.json", parties=names, agents=names, out=work / "out", wait=600)
    with LocalFederation(files, work / "federation") as flower:
        time.sleep(5)  # the parties' start-up is not part of a round
        before = parties_cpu(flower)
        status = flower.run(plan, timeout=3600)
        cpu = parties_cpu(flower) - before
        logs = {n: flower.log(f"party-{n}") for n in names}
    assert status["status"] == "done", status
    times = []
    for text in logs.values():
        stamps = [_seconds(m.group(1)) for m in re.finditer(r"^(\d\d:\d\d:\d\d\.\d{3}) party '[^']+': step round",
                                                             text, re.M)]
        times.append(stamps)
    return {"s/round": periods(times), "cpu": cpu / (parties * (rounds + 3)), "messages": parties * (rounds + 3)}


def _seconds(stamp: str) -> float:
    h, m, s = stamp.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def trivial_row(parties: int, rounds: int, work: Path) -> dict:
    files = []
    for k in range(parties):
        folder = work / "names" / f"node{k}"
        folder.mkdir(parents=True)
        (folder / "party.toml").write_text(f'[party]\nname = "node{k}"\nagents = "x"\n\n[privacy]\nmechanism = '
                                           '"none"\n')
        files.append(folder / "party.toml")
    out = work / "trivial-out"
    out.mkdir()
    with TrivialFederation(files, work / "federation") as flower:
        time.sleep(5)
        before = parties_cpu(flower)
        done = flower.flwr("run", str(TRIVIAL), "local", "--run-config",
                           f'out="{out}" parties={parties} rounds={rounds}', "--format", "json")
        assert '"success": true' in done.stdout, done.stdout + done.stderr
        limit = 300 + 120 * rounds
        deadline = time.monotonic() + limit
        while not (out / "trivial.json").exists():
            if time.monotonic() > deadline:
                print(f"the trivial app did not finish within {limit} s (logs in {work / 'federation'})", flush=True)
                return {"s/round": float("nan"), "cpu": float("nan"), "messages": parties * rounds}
            time.sleep(0.5)
        time.sleep(2)  # the last replies' ClientApp processes end
        cpu = parties_cpu(flower) - before
    times = [[float(x) for x in path.read_text().split()] for path in out.glob("node-*.txt")]
    return {"s/round": periods(times), "cpu": cpu / (parties * rounds), "messages": parties * rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 10, 30])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    rows = []
    for parties in args.parties:
        with tempfile.TemporaryDirectory() as tmp:
            mine = cvxdp_row(parties, args.rounds, Path(tmp) / "cvxdp")
            print(json.dumps({"parties": parties, "cvxdp": mine}), flush=True)
            floor = trivial_row(parties, args.rounds, Path(tmp) / "trivial")
        rows.append((parties, mine, floor))
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(json.dumps({"parties": parties, "cvxdp": mine, "trivial": floor, "uptime": load}), flush=True)
    print("\n| parties | cvxdp s/round | trivial s/round | ratio | cvxdp CPU s/message | trivial CPU s/message | ratio |")
    print("|---|---|---|---|---|---|---|")
    for parties, mine, floor in rows:
        print(f"| {parties} | {mine['s/round']:.2f} | {floor['s/round']:.2f} | "
              f"{mine['s/round'] / floor['s/round']:.2f}x | {mine['cpu']:.3f} | {floor['cpu']:.3f} | "
              f"{mine['cpu'] / floor['cpu']:.2f}x |")


if __name__ == "__main__":
    main()
