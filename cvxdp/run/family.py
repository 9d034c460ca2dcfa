"""The coordinator side of an algorithm family: a small set of hooks the one round loop calls (SPEC §7).

Like a Flower Strategy, a :class:`Family` holds no transport and no data: it sets up from the agents' public
declarations, says which nodes to build, plans each round from released values only (penalties, messages and
the round's privacy :class:`Charge` per node), aggregates the nodes' releases into its state and the released
history row, pools the nodes' private evaluations (only when evaluation is on) and reads the public solution off
its state. The loop (:mod:`cvxdp.run.loop`) owns everything else for every family alike: the budget guard, the
ledger, the privacy columns and summary, stopping, checkpoints, progress and the :class:`~cvxdp.Result`.

Abstract hooks (7): :meth:`~Family.nodes`, :meth:`~Family.start`, :meth:`~Family.plan`,
:meth:`~Family.aggregate`, :meth:`~Family.evaluate`, :meth:`~Family.converged`, :meth:`~Family.solution`.
Optional: :meth:`~Family.config`, :meth:`~Family.privacy_columns`, :meth:`~Family.finish`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..model import Evaluation, Release
    from ..privacy import PrivacyLedger
    from .backends import Backend, NodeSpec
    from .results import Result


#: The prefix of a ledger note naming a public assumption the run relies on (non-voiding: the guarantee holds
#: under it; docs/what-is-public.md lists them)
PUBLIC_ASSUMPTION = "Public assumption: "
#: Each agent's feasible set (every family whose Result reports ``solution_violation``)
FEASIBLE_SETS_PUBLIC = ("each agent's feasible set W_p is public (fixed before any data are read, not computed from "
                        "private data); result.solution_violation (a simulation's distance of the solution to every "
                        "W_p) reads the sets, unaccounted")


def initial_points_public(names: Sequence[str]) -> str:
    """The assumption of agents that start from a declared ``initial`` point."""
    return (f"the initial point of {', '.join(repr(n) for n in names)} is public (initial_public=True: not computed "
            "from private data); its shared part is sent before round 1, unaccounted")


@dataclass(frozen=True)
class Charge:
    """What one node's release in one round costs: ``count`` calls of a mechanism.

    Attributes
    ----------
    event : dp_accounting.DpEvent
        One call (Laplace, Gaussian, pure-epsilon or NoOp: a step that reads no data).
    claim : (float, float)
        One call's (epsilon, delta), for basic composition.
    count : int
        Calls in the round (LinearizedADMM: its J local updates).
    """

    event: Any
    claim: tuple[float, float]
    count: int = 1


@dataclass
class RoundPlan:
    """A round planned by the coordinator from public values only.

    Attributes
    ----------
    messages : list
        One message per node (the argument of its ``step``).
    charges : list of Charge or None
        One per node: what its release costs (None: nothing, a non-private run).
    released : dict
        Plan values that go into the history as released (rho, eta, the noise scale ...).
    agent_released : list of dict, optional
        Per node plan values for the agent history (eta_i, epsilon_i ...).
    notes : list of str
        Guarantee notes for the ledger found while planning (e.g. a paper's assumption that failed).
    context : object
        Values the family needs again in :meth:`Family.aggregate` (e.g. the broadcast w).
    """

    messages: list[Any]
    charges: list[Charge | None]
    released: dict[str, Any] = field(default_factory=dict)
    agent_released: list[dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)
    context: Any = None


class Family(ABC):
    """The coordinator side of an algorithm family; see the module docstring.

    Parameters
    ----------
    algorithm : cvxdp algorithm
        Its parameters (validated).
    agents : list
        The agents (in a simulation: the declared objects; their names and public declarations are what the
        coordinator reads).
    privacy : mechanism or None
    accountant : {"pld", "rdp", "basic"}
    budget : (epsilon, delta) or None
    solvers : tuple of str
    target_delta : float or None

    Attributes set by subclasses
    ----------------------------
    history_order, agent_order : tuple of str
        Canonical column order of the history and the agent history (others follow).
    unit : str
        The progress bar's unit.
    progress : (str, str)
        The progress bar's residual: (label, released history column).
    guard_accountant : str
        The accountant of the budget guard (default: the run's).
    notes : list of (str, bool, bool)
        Guarantee notes the ledger starts with: (reason, whether it voids the guarantee, whether to warn), e.g. a
        paper preset that is not a guarantee.
    violation_check : bool
        Whether the Result reports the solution's distance to every agent's feasible set.
    """

    history_order: tuple[str, ...] = ("round",)
    agent_order: tuple[str, ...] = ("round", "agent")
    unit = "round"
    progress = ("residual", "primal_residual")
    violation_check = True
    #: set by the loop: a simulation (one operator holds every party's agent) or a federation (False)
    simulation = True
    #: what the family's agents are (checked before anything runs) and how an error names them
    agent_type: tuple[type, ...] = ()
    agent_label = "cvxdp.Agent"

    def __init__(self, algorithm: Any, agents: Sequence[Any], *, privacy: Any, accountant: str,
                 budget: tuple[float, float] | None, solvers: tuple[str, ...], target_delta: float | None) -> None:
        self.algorithm = algorithm
        self.agents = list(agents)
        self.names = [a.name for a in self.agents]
        self.privacy = privacy
        self.accountant = accountant
        self.guard_accountant = accountant
        self.budget = budget
        self.solvers = tuple(solvers)
        self.target_delta = target_delta
        self.notes: list[tuple[str, bool, bool]] = []  # (reason, voids the guarantee, warn)

    @property
    def rounds(self) -> int:
        """Maximum number of rounds."""
        return int(self.algorithm.rounds)

    def assume(self, reason: str) -> None:
        """Record a public assumption the run relies on: a non-voiding, silent ledger note (:data:`PUBLIC_ASSUMPTION`
        + ``reason``), recorded by the loop after :meth:`start` (families call it from ``__init__`` or ``start``)."""
        self.notes.append((PUBLIC_ASSUMPTION + reason, False, False))

    # ---------------------------------------------------------------- set-up
    @abstractmethod
    def nodes(self) -> list[NodeSpec]:
        """What the backend builds at each party: one node per agent, ``build(agent, seed, *args)`` with the party's
        own agent and entropy (:class:`~cvxdp.run.backends.NodeSpec`)."""

    @abstractmethod
    def start(self, declarations: Sequence[Mapping[str, Any]]) -> Any:
        """The coordinator's state at round 0, from the nodes' public declarations (:meth:`Node.declare`)."""

    # ---------------------------------------------------------------- one round
    @abstractmethod
    def plan(self, t: int, state: Any) -> RoundPlan:
        """Plan round ``t``: messages, released plan values and each node's :class:`Charge` (no data read)."""

    @abstractmethod
    def aggregate(self, t: int, plan: RoundPlan, releases: Sequence[Release], state: Any
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Update ``state`` from the releases; return the released history row and agent rows."""

    @abstractmethod
    def evaluate(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Pool the nodes' private evaluations into the evaluation columns of the history and agent history."""

    @abstractmethod
    def converged(self, t: int, state: Any, row: Mapping[str, Any]) -> bool:
        """The tolerance stop (from released values only)."""

    @abstractmethod
    def solution(self, state: Any) -> dict[str, np.ndarray]:
        """The run's public solution, read off the coordinator's state (released values and their
        post-processing only)."""

    # ---------------------------------------------------------------- optional
    def config(self) -> dict[str, Any]:
        """Family-specific configuration entries (merged into ``result.config``; part of the fingerprint)."""
        return {}

    def fingerprint_data(self) -> dict[str, Any]:
        """Public arrays besides the agents' problems that a checkpoint of this run must match (e.g. labels)."""
        return {}

    def privacy_columns(self, ledger: PrivacyLedger, t: int) -> dict[str, float]:
        """Family-specific privacy columns of round ``t`` besides eps_basic / eps_rdp (e.g. a paper's bound)."""
        return {}

    def finish(self, result: Result, state: Any, backend: Backend) -> None:  # noqa: B027 - optional hook
        """Last touches on the Result before the nodes are closed (config entries, summary extras, what a
        simulation's nodes hand over besides their local copies)."""


def ordered(frame: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """``frame`` with the columns of ``order`` first (those present), then the others as they are."""
    first = [c for c in order if c in frame.columns]
    return frame[first + [c for c in frame.columns if c not in first]]
