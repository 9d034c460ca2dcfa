"""Results of a run: tidy histories, the consensus solution, local copies, the privacy ledger; save/load."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import CorruptFileError, CvxdpError, OutputError, describe_oserror
from ..privacy import ledger_from_dict
from .storage import atomic_write, atomic_write_text, prepare_dir

RESULT_FILE = "result.json"
RESULT_FORMAT = "cvxdp-result/1"

#: History columns that are functions of released values (messages, consensus, schedule) or of the public
#: accounting only; everything else (objective, violation, test metrics, noise norms, timings) reads private
#: data or the secret noise and stays out of a public export.
PUBLIC_HISTORY_COLUMNS = ("round", "epoch", "iteration", "consensus_residual", "primal_residual", "mismatch",
                          "dual_residual", "rho", "sigma", "bound_P", "eps_basic", "eps_rdp", "eps_pld",
                          "eps_corollary1", "polished")
PUBLIC_AGENT_COLUMNS = ("round", "epoch", "agent", "sigma", "sent_arrays", "sent_values", "epsilon")


def jsonable(obj: Any) -> Any:
    """Plain JSON types: arrays -> lists, NaN -> None (JSON null), +-inf -> "inf"/"-inf" (JSON has neither)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
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


def _unjson_infinities(obj: Any) -> Any:
    """Inverse of :func:`jsonable` for infinities: the strings "inf"/"-inf" back to floats (privacy totals)."""
    if isinstance(obj, dict):
        return {k: _unjson_infinities(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unjson_infinities(v) for v in obj]
    if obj in ("inf", "-inf"):
        return float(obj)
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
    solution_violation : dict or None
        Distance of the consensus solution to every agent's feasible set (``{"max", "agent", "per_agent"}``,
        :func:`cvxdp.model.central.solution_violation`); large in noise-dominated runs. It reads the feasible sets
        W_p, public by assumption (a ledger note of every private run says so; docs/what-is-public.md); not
        accounted for, and dropped by :meth:`release`.
    polished : dict or None
        Exact :class:`~cvxdp.ADMM`'s polished point (``polish=True``), or None when no round's polish was
        feasible for every agent: ``{"round", "solution", "local"}``. ``solution`` is the mean of the copies
        released in the round before ``round`` (public), ``local`` each agent's solution of its own problem with
        its shared block fixed to it (private). Together they are a feasible point of the whole problem whose
        copies agree exactly; its cost is the history's ``polished_objective`` in that round.
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
    solution_violation: dict[str, Any] | None = None
    polished: dict[str, Any] | None = None

    @property
    def evaluation(self) -> pd.DataFrame:
        """The history's *non-private evaluation* columns (computed on the agents' private data by their
        ``evaluate``; never released nor accounted for): ``round`` plus ``config["evaluation"]["columns"]``.
        Empty (only ``round``) for a run with ``evaluate=False``."""
        cols = [c for c in (self.config.get("evaluation") or {}).get("columns", []) if c in self.history.columns]
        return self.history[[c for c in ("round",) if c in self.history.columns] + cols]

    @property
    def seed(self) -> int | None:
        """The run's seed, or None for a default (unseeded, secret-noise) run."""
        seed = self.config.get("seed")
        return None if seed is None else int(seed)

    @property
    def seeded(self) -> bool:
        """Whether the noise was seeded (replayable by whoever knows the seed: research, not release)."""
        return bool(self.config.get("seeded", self.config.get("seed") is not None))

    def release(self) -> Result:
        """The public view of this result: only what the agents released and the privacy accounting.

        Keeps the consensus solution (post-processing of the released messages), the history columns in
        :data:`PUBLIC_HISTORY_COLUMNS` (residuals of released values, the penalty schedule, privacy spent),
        the ledger and the configuration without the seed. Drops every value computed on private data
        (objective, constraint violation, train/test metrics, norms of local models), the noise norms,
        timings, and the local copies ``z_p`` (their private coordinates never left the agents); of the
        polished point it keeps the round and the public mean, not the agents' polished local solutions.
        """
        config = {k: v for k, v in self.config.items() if k != "seed"}
        case = config.get("case")
        if isinstance(case, dict) and isinstance(case.get("run"), dict):
            config["case"] = {**case, "run": {k: v for k, v in case["run"].items() if k != "seed"}}
        config["public"] = True
        if isinstance(config.get("evaluation"), dict):  # the public view carries no evaluation values
            config["evaluation"] = {**config["evaluation"], "evaluated": False, "rounds": [], "columns": [],
                                    "agent_columns": []}
        return Result(history=self.history[[c for c in self.history.columns if c in PUBLIC_HISTORY_COLUMNS]],
                      agent_history=self.agent_history[[c for c in self.agent_history.columns
                                                        if c in PUBLIC_AGENT_COLUMNS]],
                      solution={k: np.array(v, copy=True) for k, v in self.solution.items()}, local={},
                      privacy=self.privacy, config=config, stop_reason=self.stop_reason, ledger=self.ledger,
                      polished=None if self.polished is None else
                      {"round": self.polished["round"],
                       "solution": {k: np.array(v, copy=True) for k, v in self.polished["solution"].items()},
                       "local": {}})

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
        public = bool(self.config.get("public"))
        present = set(self.history.columns) if public or len(self.history) else None
        for col in ("objective", "consensus_residual", "primal_residual", "dual_residual", "max_violation"):
            if present is None or col in present:  # evaluation columns are absent with evaluate=False
                out[col] = float(last[col]) if last is not None else float("nan")
        for col, how in (("noise_magnitude", "mean"), ("wall_time", "sum"), ("solver_time", "sum")):
            if present is None or col in present:  # noise_magnitude: paper eq. 29
                out[col] = float(getattr(self.history[col], how)()) if len(self.history) else 0.0
        worst = self.privacy.get("worst", {}) if self.privacy else {}
        out["privacy"] = {k: worst.get(k) for k in ("basic", "rdp", "pld")} if worst else None
        if self.solution_violation is not None:
            out["solution_violation"] = self.solution_violation.get("max")
        if self.polished is not None:
            out["polished_round"] = int(self.polished["round"])
            cost = self.history.loc[self.history["round"] == self.polished["round"], "polished_objective"] \
                if "polished_objective" in self.history.columns else []
            if len(cost):
                out["polished_objective"] = float(cost.iloc[0])
        if self.privacy and "guarantee" in self.privacy:
            out["guarantee"] = self.privacy["guarantee"]
            out["privacy_notes"] = [n["reason"] for n in self.privacy.get("notes", [])]
        out["seeded"] = self.seeded
        return jsonable(out)

    # ------------------------------------------------------------------ I/O
    def save(self, path: str | Path, *, overwrite: bool = False, public: bool = False) -> Path:
        """Write the result to directory ``path`` (CSV histories, NPZ arrays, JSON config/ledger).

        ``result.json`` is written last: its presence marks a complete save. A directory that already holds
        a saved result is refused unless ``overwrite=True``; an incomplete save (no ``result.json``) is
        replaced. A failed write (disk full, read-only) raises :class:`~cvxdp.errors.OutputError`.

        ``public=True`` writes :meth:`release` instead: no seed, no values computed on private data, no
        local copies — the files are then safe to share (see docs/privacy.md, "What is released").
        The default writes everything (for the data owner, resume and research).
        """
        if public and not self.config.get("public"):
            return self.release().save(path, overwrite=overwrite)
        path = prepare_dir(path, "result directory")
        meta_file = path / RESULT_FILE
        if meta_file.exists() and not overwrite:
            raise OutputError(f"The directory {str(path)!r} already holds a saved cvxdp result; pass "
                              "overwrite=True (CLI: --overwrite) to replace it, or choose another directory.")
        meta = {"format": RESULT_FORMAT, "config": self.config, "privacy": self.privacy,
                "stop_reason": self.stop_reason, "summary": self.summary(),
                "ledger": self.ledger.to_dict() if self.ledger is not None else None,
                "solution_violation": self.solution_violation,
                "polished_round": None if self.polished is None else int(self.polished["round"])}
        arrays = {f"w:{k}": v for k, v in self.solution.items()}
        arrays.update({f"z:{k}": v for k, v in self.local.items()})
        if self.polished is not None:
            arrays.update({f"pw:{k}": v for k, v in self.polished["solution"].items()})
            arrays.update({f"pz:{k}": v for k, v in self.polished["local"].items()})
        try:
            meta_file.unlink(missing_ok=True)  # an interrupted overwrite must not look complete
        except OSError as exc:
            raise OutputError(f"Could not replace {str(meta_file)!r}: {describe_oserror(exc)}.") from None
        atomic_write(path / "history.csv", lambda fh: self.history.to_csv(fh, index=False, float_format="%.17g"),
                     "result file")
        atomic_write(path / "agent_history.csv",
                     lambda fh: self.agent_history.to_csv(fh, index=False, float_format="%.17g"), "result file")
        atomic_write(path / "arrays.npz", lambda fh: np.savez(fh, **arrays), "result file")
        atomic_write_text(meta_file, json.dumps(jsonable(meta), indent=2), "result file")
        return path


def _corrupt(path: Path, name: str, exc: BaseException | str) -> CorruptFileError:
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return CorruptFileError(f"The saved result in {str(path)!r} is incomplete or corrupt: {name} {reason}. "
                            "Delete the directory and run again (a study re-runs that cell).")


def load_result(path: str | Path) -> Result:
    """Read a result written by :meth:`Result.save`.

    Raises :class:`FileNotFoundError` when ``path`` holds no result and
    :class:`~cvxdp.errors.CorruptFileError` naming the file when one of its files is missing or unreadable.
    """
    path = Path(path)
    meta_file = path / RESULT_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"No cvxdp result in {str(path)!r}: {RESULT_FILE} is missing.")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise _corrupt(path, RESULT_FILE, exc) from None
    if not isinstance(meta, dict) or not str(meta.get("format", "")).startswith("cvxdp-result/") \
            or not {"config", "privacy", "stop_reason"} <= set(meta):
        raise _corrupt(path, RESULT_FILE, "is not a cvxdp result (no 'format': 'cvxdp-result/...' header)")
    for name in ("arrays.npz", "history.csv", "agent_history.csv"):
        if not (path / name).is_file():
            raise _corrupt(path, name, "is missing")
    try:
        with np.load(path / "arrays.npz") as arrays:
            solution = {k[2:]: arrays[k] for k in arrays.files if k.startswith("w:")}
            local = {k[2:]: arrays[k] for k in arrays.files if k.startswith("z:")}
            polished = None if meta.get("polished_round") is None else {
                "round": int(meta["polished_round"]),
                "solution": {k[3:]: arrays[k] for k in arrays.files if k.startswith("pw:")},
                "local": {k[3:]: arrays[k] for k in arrays.files if k.startswith("pz:")}}
    except Exception as exc:  # noqa: BLE001 - zipfile, pickle and OS errors all mean an unreadable file
        raise _corrupt(path, "arrays.npz", exc) from None
    tables = {}
    for name in ("history.csv", "agent_history.csv"):
        try:
            tables[name] = pd.read_csv(path / name, float_precision="round_trip")
        except pd.errors.EmptyDataError:
            tables[name] = pd.DataFrame()
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise _corrupt(path, name, exc) from None
    ledger = None
    if meta.get("ledger"):
        try:
            ledger = ledger_from_dict(meta["ledger"])  # graph runs saved before the one ledger are converted
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _corrupt(path, RESULT_FILE, f"has an unreadable ledger ({type(exc).__name__}: {exc})") from None
    return Result(history=tables["history.csv"], agent_history=tables["agent_history.csv"],
                  solution=solution, local=local, privacy=_unjson_infinities(meta["privacy"]), config=meta["config"],
                  stop_reason=meta["stop_reason"], ledger=ledger,
                  solution_violation=meta.get("solution_violation"), polished=polished)
