"""Checkpoints of a run: everything needed to continue it with the same random streams.

A checkpoint is written atomically (temporary file, then ``os.replace``), so a run killed at any moment
(SIGINT, SIGKILL, a crashed solver) leaves either the previous checkpoint or the new one, never half of one.
It carries a fingerprint of the run's configuration and data; a checkpoint of another run is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CvxdpError

CHECKPOINT_FILE = "checkpoint.pkl"


def fingerprint(config: dict[str, Any], agents: Sequence[Any]) -> str:
    """Hash of the run's configuration and every agent's data (parameter and constant values)."""
    h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for agent in agents:
        h.update(agent.name.encode())
        for param in agent.problem.parameters():
            h.update(np.ascontiguousarray(np.asarray(param.value, dtype=float)).tobytes())
    return h.hexdigest()


def checkpoint_path(path: str | Path) -> Path:
    path = Path(path)
    return path / CHECKPOINT_FILE if path.suffix != ".pkl" else path


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Atomically write ``payload`` (pickle) to ``path`` (a directory or a .pkl file)."""
    target = checkpoint_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)


def load_checkpoint(path: str | Path, expected: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if there is one; raise if it belongs to another run."""
    target = checkpoint_path(path)
    if not target.exists():
        return None
    with open(target, "rb") as fh:
        payload = pickle.load(fh)
    if payload.get("fingerprint") != expected:
        raise CvxdpError(f"The checkpoint {target} belongs to a run with another configuration or other data; "
                         "remove it or choose another checkpoint path.")
    return payload


def remove_checkpoint(path: str | Path) -> None:
    target = checkpoint_path(path)
    if target.exists():
        target.unlink()
