"""Results of a run: tidy histories, the consensus solution, local copies, the privacy ledger; save/load."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import CvxdpError

RESULT_FILE = "result.json"


def _jsonable(obj: Any) -> Any:
    """Plain JSON types: arrays -> lists, NaN -> None (JSON null), +-inf -> "inf"/"-inf" (JSON has neither)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        if math.isnan(f):
            return None
        return f if math.isfinite(f) else str(f)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


@dataclass
class Result:
    """What :func:`cvxdp.solve` returns.

    Attributes
    ----------
    history : pandas.DataFrame
        One row per round (SPEC §2.3 metrics).
    agent_history : pandas.DataFrame
        One row per (round, agent).
    solution : dict str -> ndarray
        Global consensus value of every shared key.
    local : dict str -> ndarray
        Each agent's final flat local copy z_p.
    privacy : dict
        The ledger's summary: per agent and worst agent, basic / rdp / pld totals.
    config : dict
        Everything needed to rerun: algorithm, mechanism, accountant, seed, agents.
    stop_reason : str
        "rounds", "tolerance" or "budget".
    """

    history: pd.DataFrame
    agent_history: pd.DataFrame
    solution: dict[str, np.ndarray]
    local: dict[str, np.ndarray]
    privacy: dict[str, Any]
    config: dict[str, Any]
    stop_reason: str
    ledger: Any = field(default=None, repr=False)
    agents: list = field(default_factory=list, repr=False)

    @property
    def seed(self) -> int:
        return int(self.config["seed"])

    def values(self, agent: str) -> dict:
        """The final local copy of ``agent`` as ``{cvxpy.Variable: array}`` (needs the live agents)."""
        for a in self.agents:
            if a.name == agent:
                return a.layout.split(self.local[agent])
        raise CvxdpError(f"No live agent named {agent!r} in this result (loaded results keep flat arrays "
                         "in result.local).")

    def summary(self) -> dict[str, Any]:
        """Final metrics in one flat, JSON-able dict (what the CLI prints)."""
        last = self.history.iloc[-1] if len(self.history) else None
        out: dict[str, Any] = {"rounds": int(len(self.history)), "stop_reason": self.stop_reason}
        for col in ("objective", "consensus_residual", "primal_residual", "dual_residual", "max_violation"):
            out[col] = float(last[col]) if last is not None else float("nan")
        noise = self.history["noise_magnitude"] if len(self.history) else pd.Series(dtype=float)
        out["noise_magnitude"] = float(noise.mean()) if len(noise) else 0.0  # paper eq. 29
        out["wall_time"] = float(self.history["wall_time"].sum()) if len(self.history) else 0.0
        out["solver_time"] = float(self.history["solver_time"].sum()) if len(self.history) else 0.0
        worst = self.privacy.get("worst", {}) if self.privacy else {}
        out["privacy"] = {k: worst.get(k) for k in ("basic", "rdp", "pld")} if worst else None
        return _jsonable(out)

    # ------------------------------------------------------------------ I/O
    def save(self, path: str | Path) -> Path:
        """Write the result to directory ``path`` (CSV histories, NPZ arrays, JSON config/ledger)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.history.to_csv(path / "history.csv", index=False, float_format="%.17g")
        self.agent_history.to_csv(path / "agent_history.csv", index=False, float_format="%.17g")
        arrays = {f"w:{k}": v for k, v in self.solution.items()}
        arrays.update({f"z:{k}": v for k, v in self.local.items()})
        np.savez(path / "arrays.npz", **arrays)
        meta = {"format": "cvxdp-result/1", "config": self.config, "privacy": self.privacy,
                "stop_reason": self.stop_reason, "summary": self.summary(),
                "ledger": self.ledger.to_dict() if self.ledger is not None else None}
        tmp = path / (RESULT_FILE + ".tmp")
        tmp.write_text(json.dumps(_jsonable(meta), indent=2))
        tmp.replace(path / RESULT_FILE)  # result.json appears last: its presence marks a complete save
        return path


def load_result(path: str | Path) -> Result:
    """Read a result written by :meth:`Result.save`."""
    path = Path(path)
    meta_file = path / RESULT_FILE
    if not meta_file.exists():
        raise FileNotFoundError(f"No cvxdp result in {str(path)!r}: {RESULT_FILE} is missing.")
    meta = json.loads(meta_file.read_text())
    with np.load(path / "arrays.npz") as arrays:
        solution = {k[2:]: arrays[k] for k in arrays.files if k.startswith("w:")}
        local = {k[2:]: arrays[k] for k in arrays.files if k.startswith("z:")}
    ledger = None
    if meta.get("ledger"):
        if meta["ledger"].get("format") == "cvxdp-gamma-ledger/1":  # graph runs (cvxdp.decentralized)
            from .privacy.gamma import GammaLedger
            ledger = GammaLedger.from_dict(meta["ledger"])
        else:
            from .privacy import PrivacyLedger
            ledger = PrivacyLedger.from_dict(meta["ledger"])
    return Result(history=pd.read_csv(path / "history.csv", float_precision="round_trip"),
                  agent_history=pd.read_csv(path / "agent_history.csv", float_precision="round_trip"),
                  solution=solution, local=local, privacy=meta["privacy"], config=meta["config"],
                  stop_reason=meta["stop_reason"], ledger=ledger)
