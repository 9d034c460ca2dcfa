"""Party files from a case, and the coordinator's plan.

``cvxdp parties CASE.toml --out DIR`` builds the case's agents (on the machine of whoever holds the case's data: a
demonstration, or a utility splitting its own zones) and writes one folder per agent, ``DIR/<agent>/``, readable by
its owner only: ``party.toml`` and ``agents.pkl`` (that party's agent and nobody else's). Each party then runs its
node from its folder alone. The coordinator's plan (:func:`write_plan`) holds the case's public tables only.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config.build import Case, build_instance
from ..errors import ConfigError


def _toml(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value).lower() if isinstance(value, bool) \
        else repr(value)


def write_parties(case: Case, out: str | Path, *, instance: Any = None, seed: int | None = None,
                  budget: tuple[float, float] | None = None, report_feasibility: bool = False) -> list[Path]:
    """One party folder per agent of ``case`` (see the module docstring); the party files' paths, in order. Each
    party's [privacy] policy is the case's [privacy] table and [run] accountant."""
    instance = build_instance(case) if instance is None else instance
    return party_folders(instance.agents, out, seed=seed, budget=budget, report_feasibility=report_feasibility,
                         privacy=case.privacy, accountant=case.run.get("accountant", "pld"))


def _table(name: str, values: Mapping[str, Any]) -> list[str]:
    return [f"[{name}]", *(f"{k} = {_toml(v)}" for k, v in values.items() if v is not None), ""]


def party_folders(agents: Sequence[Any], out: str | Path, *, seed: int | None = None,
                  budget: tuple[float, float] | None = None, report_feasibility: bool = False,
                  privacy: Mapping[str, Any] | None = None, accountant: str = "pld",
                  limits: Mapping[str, Any] | None = None) -> list[Path]:
    """``out/<agent>/party.toml`` and ``agents.pkl`` for each agent (one party per agent, its owner only), with the
    party's own policy: ``privacy`` (a [privacy] table; default non-private), ``accountant``, the lifetime
    ``budget`` and the ``limits``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    policy = {**dict(privacy or {"mechanism": "none"}), "accountant": accountant}
    policy.setdefault("mechanism", "none")
    files = []
    for agent in agents:
        folder = out / agent.name
        folder.mkdir(exist_ok=True)
        os.chmod(folder, 0o700)  # the party's data: its owner only
        try:
            with open(folder / "agents.pkl", "wb") as fh:
                pickle.dump([agent], fh, protocol=5)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise ConfigError(f"Agent {agent.name!r} cannot be written to a party file ({exc}); an agent must pickle "
                              "(module-level gradient functions, not closures).") from None
        os.chmod(folder / "agents.pkl", 0o600)
        lines = ["[party]", f"name = {_toml(agent.name)}", 'agents = "agents.pkl"', 'state = "state"']
        if seed is not None:
            lines.append(f"seed = {int(seed)}  # research only: reproducible noise")
        lines += [f"report_feasibility = {_toml(report_feasibility)}", ""]
        lines += ["# this party's own policy: what it releases, whatever a coordinator asks", *_table("privacy", policy)]
        if budget is not None:
            lines += ["# its lifetime budget on this data set, across every run",
                      *_table("budget", {"epsilon": float(budget[0]), "delta": float(budget[1])})]
        if limits:
            lines += _table("limits", limits)
        (folder / "party.toml").write_text("\n".join(lines))
        os.chmod(folder / "party.toml", 0o600)
        files.append(folder / "party.toml")
    return files


def write_plan(case: Case, path: str | Path, *, parties: Sequence[str], agents: Sequence[str], out: str | Path,
               checkpoint: str | Path | None = None, wait: float = 120.0, timeout: float = 600.0) -> Path:
    """The coordinator's plan: the case's algorithm, privacy and run tables (public), the parties and the agents'
    order, where to write the result and the checkpoint, and the run's id. Writing the same case's plan again to the
    same file keeps its run id (running the same command again resumes that run); another case, or another folder,
    gets a new id (a new run at every party: a party never answers a new run from an old one's records)."""
    plan = {"name": case.name, "algorithm": case.algorithm, "privacy": case.privacy, "run": case.run,
            "parties": list(parties), "agents": list(agents), "out": str(Path(out).resolve()),
            "checkpoint": None if checkpoint is None else str(Path(checkpoint).resolve()), "wait": wait,
            "timeout": timeout}
    path = Path(path)
    same = ("name", "algorithm", "privacy", "run", "parties", "agents")
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    keep = isinstance(old, dict) and all(old.get(k) == json.loads(json.dumps(plan[k])) for k in same)
    plan["run_id"] = old["run_id"] if keep and isinstance(old.get("run_id"), str) else secrets.token_hex(8)
    path.write_text(json.dumps(plan, indent=2))
    return path


__all__ = ["party_folders", "write_parties", "write_plan"]
