"""Three power zones as three parties, on this machine: a real Flower SuperLink and three SuperNodes on 127.0.0.1.

    python examples/three_zones/federate.py OUT_DIR [--tls]

Each utility's folder (``OUT_DIR/parties/zoneK``) holds its party file and its copy of ``zone_party.py``, which
builds its own zone agent from the public network and its own loads. The coordinator's plan holds the case's public
tables only. The run uses objective perturbation (ObjG, epsilon 1 per local update), 3 rounds, research seed 0:
its released values equal ``cvxdp run cases/case14_3zones.toml --mechanism ObjG --epsilon 1 --rounds 3 --seed 0``.
On three machines, the same folders run with ``cvxdp party`` at each utility and ``cvxdp federate --superlink`` at
the coordinator (docs/federation.md).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from cvxdp.config.build import load_case
from cvxdp.federation.launch import LocalFederation
from cvxdp.federation.parties import write_plan
from cvxdp.run import load_result

HERE = Path(__file__).resolve().parent
CASE = HERE.parents[1] / "cases" / "case14_3zones.toml"


def party_folders(out: Path, seed: int | None = 0) -> list[Path]:
    """One folder per utility: its party file and its copy of the party module (its owner only)."""
    files = []
    for k in (1, 2, 3):
        folder = out / f"zone{k}"
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        shutil.copy(HERE / "zone_party.py", folder / "zone_party.py")
        lines = ["[party]", f'name = "zone{k}"', 'module = "zone_party.py"', f'function = "zone{k}"', 'state = "state"']
        if seed is not None:
            lines.append(f"seed = {seed}  # research only: reproducible noise")
        # the utility's own policy: what it releases, whatever the coordinator asks
        lines += ["", "[privacy]", 'mechanism = "ObjG"', "epsilon = 1.0", "delta = 1e-6"]
        (folder / "party.toml").write_text("\n".join(lines) + "\n")
        files.append(folder / "party.toml")
    return files


def plan_for(out: Path, rounds: int = 3, seed: int = 0) -> Path:
    """The coordinator's plan: the case's public tables with ObjG at epsilon 1."""
    case = load_case(CASE)
    case.algorithm["rounds"] = rounds
    case.privacy = {"mechanism": "ObjG", "epsilon": 1.0, "delta": 1e-6}
    case.run["seed"] = seed
    names = ["zone1", "zone2", "zone3"]
    return write_plan(case, out / "plan.json", parties=names, agents=names, out=out / "coordinator",
                      checkpoint=out / "coordinator" / "checkpoint")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tls", action="store_true", help="TLS and SuperNode authentication (throw-away keys)")
    args = parser.parse_args()
    files = party_folders(args.out / "parties")
    plan = plan_for(args.out)
    (args.out / "coordinator").mkdir(parents=True, exist_ok=True)
    with LocalFederation(files, args.out / "flower", tls=args.tls, auth=args.tls) as federation:
        status = federation.run(plan)
    if status["status"] != "done":
        raise SystemExit(f"the federation failed: {status.get('error')}")
    result = load_result(args.out / "coordinator" / "result")
    print(result.history[["round", "consensus_residual", "primal_residual", "dual_residual", "eps_rdp"]]
          .to_string(index=False))
    print(f"privacy (worst zone): {result.privacy['worst']}")
    print(f"public result: {args.out / 'coordinator' / 'result'}; each zone's own evaluation and ledger: "
          f"{args.out / 'parties'}/zoneK/state/")


if __name__ == "__main__":
    main()
