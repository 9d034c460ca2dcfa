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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.build import Case, build_instance
from ..errors import ConfigError


def _toml(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value).lower() if isinstance(value, bool) \
        else repr(value)


def write_parties(case: Case, out: str | Path, *, instance: Any = None, seed: int | None = None,
                  budget: tuple[float, float] | None = None, report_feasibility: bool = False) -> list[Path]:
    """One party folder per agent of ``case`` (see the module docstring); the party files' paths, in order."""
    instance = build_instance(case) if instance is None else instance
    return party_folders(instance.agents, out, seed=seed, budget=budget, report_feasibility=report_feasibility)


def party_folders(agents: Sequence[Any], out: str | Path, *, seed: int | None = None,
                  budget: tuple[float, float] | None = None, report_feasibility: bool = False) -> list[Path]:
    """``out/<agent>/party.toml`` and ``agents.pkl`` for each agent (one party per agent, its owner only)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
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
        lines = ["[party]", f"name = {_toml(agent.name)}", 'agents = "agents.pkl"', 'state = "state"']
        if seed is not None:
            lines.append(f"seed = {int(seed)}  # research only: reproducible noise")
        if budget is not None:
            lines += [f"budget_epsilon = {float(budget[0])!r}", f"budget_delta = {float(budget[1])!r}"]
        lines.append(f"report_feasibility = {_toml(report_feasibility)}")
        (folder / "party.toml").write_text("\n".join(lines) + "\n")
        files.append(folder / "party.toml")
    return files


def write_plan(case: Case, path: str | Path, *, parties: Sequence[str], agents: Sequence[str], out: str | Path,
               checkpoint: str | Path | None = None, wait: float = 120.0, timeout: float = 600.0) -> Path:
    """The coordinator's plan: the case's algorithm, privacy and run tables (public), the parties and the agents'
    order, where to write the result and the checkpoint."""
    plan = {"name": case.name, "algorithm": case.algorithm, "privacy": case.privacy, "run": case.run,
            "parties": list(parties), "agents": list(agents), "out": str(Path(out).resolve()),
            "checkpoint": None if checkpoint is None else str(Path(checkpoint).resolve()), "wait": wait,
            "timeout": timeout}
    path = Path(path)
    path.write_text(json.dumps(plan, indent=2))
    return path


__all__ = ["party_folders", "write_parties", "write_plan"]
