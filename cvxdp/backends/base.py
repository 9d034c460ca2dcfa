"""The backend protocol: where agents' workers live and how a round is dispatched to them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from ..agent import Agent
from ..algorithms.base import Algorithm
from ..worker import LocalReport, RoundMessage, WorkerInfo


class Backend(ABC):
    """Lifecycle: :meth:`start` (workers built where they run), :meth:`step` per round, :meth:`close`.

    A worker holds its agent's data, compiled subproblem and generator; the engine only ever sees
    :class:`LocalReport` objects, so the same seeds give the same numbers on every backend.
    """

    @abstractmethod
    def start(self, agents: Sequence[Agent], algorithm: Algorithm, seeds: Sequence[np.random.SeedSequence],
              solvers: tuple[str, ...]) -> list[WorkerInfo]: ...

    @abstractmethod
    def initial_shared(self) -> list[np.ndarray]: ...

    @abstractmethod
    def step(self, messages: Sequence[RoundMessage]) -> list[LocalReport]: ...

    @abstractmethod
    def local_solutions(self) -> list[np.ndarray]: ...

    @abstractmethod
    def states(self) -> list[dict]: ...

    @abstractmethod
    def restore(self, states: Sequence[dict]) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
