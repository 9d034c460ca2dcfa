"""The trust boundary and the family protocol of the one round loop (:mod:`cvxdp.run.loop`, SPEC §7).

A node (one agent, living inside a backend) answers two calls that matter for privacy:

* ``step(message) -> Release``: the arrays that leave the node this round — nothing else. The loop
  routes them to the aggregator (and, for the graph family, to the node's neighbours); the ledger accounts
  for exactly these.
* ``evaluate(round) -> Evaluation``: values computed on the node's private data (objective, constraint
  violation, the actual noise norms, solver timings and names). They never travel in a release; the loop
  asks for them only when ``evaluate=True`` and labels them "non-private evaluation (not released)".

A :class:`Family` is the server side of one algorithm family (consensus, graph, sharing): it sets up from
the agents, says which nodes to build, plans a round without touching data (penalties, noise plans, DP
events), aggregates the releases into the server state and the released metrics, and reads off the solution.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .backends import Backend, NodeSpec

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
        ``{"Ax": A_m x_m}``).
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


@dataclass
class RoundPlan:
    """A round planned by the server without touching data.

    Attributes
    ----------
    messages : list
        One message per node (the argument of its ``step``).
    charges : list
        One entry per node: what the ledger records for this round (family-specific; None = nothing).
    released : dict
        Plan values that go into the history as released (rho, eta, the noise scale ...).
    agent_released : list of dict
        Per node plan values for the agent history (eta_i, epsilon_i ...).
    context : object
        Server-side values the family needs again in :meth:`Family.aggregate` (e.g. the broadcast w).
    """

    messages: list[Any]
    charges: list[Any]
    released: dict[str, Any] = field(default_factory=dict)
    agent_released: list[dict[str, Any]] | None = None
    context: Any = None


class Family(ABC):
    """The server side of an algorithm family; see the module docstring for the round structure.

    Subclasses set :attr:`history_order` (the canonical column order of the merged history) and implement
    the abstract methods. The loop owns everything else (budget, ledger, stopping, checkpoint, Result).
    """

    #: Canonical column order of the history (released and evaluation columns merged); others follow.
    history_order: tuple[str, ...] = ("round",)
    #: Canonical column order of the agent history.
    agent_order: tuple[str, ...] = ("round", "agent")
    #: The progress bar's unit.
    unit = "round"
    #: The progress bar's residual: (label, history column).
    progress = ("residual", "primal_residual")
    #: Whether the Result reports the solution's distance to every agent's feasible set.
    violation_check = True

    def __init__(self, algorithm: Any, agents: Sequence[Any], *, privacy: Any, accountant: str,
                 budget: tuple[float, float] | None, solvers: tuple[str, ...],
                 target_delta: float | None) -> None:
        self.algorithm = algorithm
        self.agents = list(agents)
        self.names = [a.name for a in self.agents]
        self.privacy = privacy
        self.accountant = accountant
        self.budget = budget
        self.solvers = tuple(solvers)
        self.target_delta = target_delta

    # ---------------------------------------------------------------- set-up
    @property
    @abstractmethod
    def rounds(self) -> int:
        """Maximum number of rounds."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """Family-specific configuration entries (merged into ``result.config``; part of the fingerprint)."""

    @abstractmethod
    def node_specs(self, seeds: Sequence[np.random.SeedSequence]) -> list[NodeSpec]:
        """What the backend builds: one node per agent, each with its own SeedSequence."""

    @abstractmethod
    def start(self, backend: Backend) -> Any:
        """The server state at round 0 (may read the nodes' public initial values)."""

    def new_ledger(self) -> Any:
        """An empty ledger for this run (default: a :class:`~cvxdp.privacy.PrivacyLedger` over the agents)."""
        from ..privacy.accounting import PrivacyLedger

        return PrivacyLedger(self.names, target_delta=self.target_delta)

    def ledger_from_dict(self, data: Mapping[str, Any]) -> Any:
        """The ledger stored in a checkpoint (the inverse of ``ledger.to_dict()``)."""
        from ..privacy.accounting import PrivacyLedger

        return PrivacyLedger.from_dict(data)

    def notes(self, ledger: Any, backend: Backend) -> None:  # noqa: B027 - optional hook
        """Add guarantee notes to the ledger (paper presets, inexact solves)."""

    def fingerprint(self, config: Mapping[str, Any], checkpoint: Any) -> dict[str, str]:
        """What a checkpoint of this run must match (configuration and the agents' problems and data)."""
        from .checkpoint import fingerprint

        return fingerprint(config, self.agents, context=checkpoint)

    # ---------------------------------------------------------------- one round
    @abstractmethod
    def plan(self, t: int, state: Any) -> RoundPlan:
        """Plan round ``t`` (penalties, noise plans, the DP charges) from public values only."""

    @abstractmethod
    def would_exceed(self, ledger: Any, plan: RoundPlan) -> bool:
        """Whether recording ``plan``'s charges would exceed the budget for some agent."""

    def before_step(self, t: int, plan: RoundPlan, state: Any, ledger: Any) -> None:  # noqa: B027 - optional
        """Checks between the budget guard and the step (e.g. a paper's assumption on public values)."""

    @abstractmethod
    def record(self, ledger: Any, t: int, plan: RoundPlan) -> None:
        """Record the round's charges (called once the releases arrived)."""

    @abstractmethod
    def aggregate(self, t: int, plan: RoundPlan, releases: Sequence[Release], state: Any
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Update ``state`` from the releases; return the released history row and agent rows."""

    @abstractmethod
    def privacy_row(self, ledger: Any, t: int) -> dict[str, float]:
        """Privacy spent so far, after round ``t`` (history columns)."""

    @abstractmethod
    def evaluation_row(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Pool the nodes' evaluations into the evaluation columns of the history and agent history."""

    @abstractmethod
    def converged(self, t: int, state: Any, row: Mapping[str, Any]) -> bool:
        """The tolerance stop (from released values only)."""

    # ---------------------------------------------------------------- the end
    @abstractmethod
    def solution(self, state: Any, local: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The solution of the run (``local``: every node's final local copy)."""

    def collect(self, state: Any, backend: Backend) -> dict[str, Any]:
        """What the nodes hand over at the end besides their local copies, as :class:`~cvxdp.Result` fields
        (exact ADMM's ``polished`` point); called once, after the last round, before the backend closes."""
        return {}

    @abstractmethod
    def summary(self, ledger: Any) -> dict[str, Any]:
        """The ledger's summary stored in ``result.privacy``."""

    def finish_history(self, history: pd.DataFrame, summary: Mapping[str, Any]) -> pd.DataFrame:
        """Last touches on the history (e.g. the final PLD column)."""
        return history

    def finish(self, result: Any, state: Any) -> Any:
        """Last touches on the :class:`~cvxdp.Result` (e.g. recorded messages)."""
        return result

    def postfix(self, state: Any, row: Mapping[str, Any]) -> dict[str, str]:
        """The progress bar's postfix: :attr:`progress` (a released residual) and, when evaluated, the objective."""
        label, column = self.progress
        out = {label: f"{row[column]:.2e}"}
        if "objective" in row:
            out["objective"] = f"{row['objective']:.4g}"
        return out


def ordered(frame: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """``frame`` with the columns of ``order`` first (those present), then the others as they are."""
    first = [c for c in order if c in frame.columns]
    return frame[first + [c for c in frame.columns if c not in first]]
