"""The party side of the trust boundary: what a node is, what it releases and what it evaluates (SPEC §7).

A node holds one agent's private data, compiled local problem, random generator and local iterate. It runs
where the party runs (in-process for the serial backend, in a Ray actor, or on the party's own machine in a
federation) and never imports coordinator code. The coordinator reaches it only through the methods of
:class:`Node`:

* :meth:`Node.declare` — the public declaration read once before round 1 (shapes, declared bounds, the public
  initial copy); nothing computed on private data unless the run is non-private and says so;
* :meth:`Node.step` — one round: a message in, a :class:`Release` out. The release is exactly what leaves the
  node and exactly what the ledger accounts for;
* :meth:`Node.evaluate` — values computed on private data after a round (an :class:`Evaluation`, labelled
  :data:`EVALUATION_LABEL`); they never travel in a release and are asked for only when evaluation is on;
* :meth:`Node.state` / :meth:`Node.restore` — the node's private checkpoint (iterates, duals, generator);
* :meth:`Node.local` — the final local solution: private, handed over only in a simulation run by one operator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: How evaluation values are labelled in results, saved files and the CLI.
EVALUATION_LABEL = "non-private evaluation (not released)"


@dataclass(frozen=True)
class Release:
    """What one node sends in one round: exactly the arrays that leave it (and that the ledger accounts for).

    Attributes
    ----------
    agent : str
        The sending node.
    round : int
        The round it belongs to.
    arrays : mapping str -> ndarray
        The released arrays by name (consensus: ``{"ez": E_p z_p}``; graph: ``{"f": f_i}``; sharing:
        ``{"q": D_m x_m + noise}``).
    """

    agent: str
    round: int
    arrays: Mapping[str, np.ndarray]

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    @property
    def size(self) -> int:
        """Number of released values (all arrays together)."""
        return int(sum(np.asarray(a).size for a in self.arrays.values()))


@dataclass(frozen=True)
class Evaluation:
    """Values one node computed on its private data after a round: never part of a release.

    Attributes
    ----------
    agent : str
    round : int
    values : mapping str -> float
        Scalars (objective, violation, noise magnitude, solver time, ...).
    lists : mapping str -> tuple of float
        Per-call values the aggregator pools (e.g. every noise norm of the round's J local updates).
    labels : mapping str -> str
        Text diagnostics (solver names, fallbacks).
    arrays : mapping str -> ndarray
        Private vectors the aggregator pools for a network-wide evaluation (e.g. the noiseless predictions
        ``D_m x_m`` of the sharing family, for the training loss).
    """

    agent: str
    round: int
    values: Mapping[str, float] = field(default_factory=dict)
    lists: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)


class Node(ABC):
    """One party's node (see the module docstring). Subclasses: one per algorithm family.

    Attributes
    ----------
    name : str
        The agent's name (every error and every release names it).
    """

    name: str

    @abstractmethod
    def declare(self) -> dict[str, Any]:
        """The node's public declaration, read once before round 1 (family-specific keys)."""

    @abstractmethod
    def step(self, message: Any) -> Release:
        """Run one round on the message from the coordinator; return what leaves the node."""

    @abstractmethod
    def evaluate(self, round: int) -> Evaluation:
        """Non-private evaluation of the last step on this node's data (never part of a release)."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """Everything needed to resume this node exactly (private: it stays with the node's checkpoint)."""

    @abstractmethod
    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state`."""

    @abstractmethod
    def local(self) -> np.ndarray:
        """The node's final local solution (private; a simulation hands it to its operator)."""

    @abstractmethod
    def charge(self, message: Any) -> tuple[Any, tuple[float, float], int] | None:
        """What a step on ``message`` costs this node, computed from its own declaration and the message's public
        values: ``(dp_event, (epsilon, delta) per call, calls)``, or None when the step reads no data privately.
        A party's own ledger records it (and refuses past the party's budget) before the node releases anything;
        a node raises :class:`~cvxdp.errors.PartyRefusedError` when the message asks for less noise than its own
        declared sensitivity needs."""
