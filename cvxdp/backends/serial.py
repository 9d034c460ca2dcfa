"""The serial backend: every worker in this process, stepped one after the other."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..agent import Agent
from ..algorithms.base import Algorithm
from ..worker import AgentWorker, LocalReport, RoundMessage, WorkerInfo
from .base import Backend


class SerialBackend(Backend):
    """Runs the agents in order in the calling process (the embedded default)."""

    def __init__(self) -> None:
        self.workers: list[AgentWorker] = []

    def start(self, agents: Sequence[Agent], algorithm: Algorithm, seeds: Sequence[np.random.SeedSequence],
              solvers: tuple[str, ...]) -> list[WorkerInfo]:
        self.workers = [AgentWorker(a, algorithm, s, solvers) for a, s in zip(agents, seeds)]
        return [w.info() for w in self.workers]

    def initial_shared(self) -> list[np.ndarray]:
        return [w.shared() for w in self.workers]

    def step(self, messages: Sequence[RoundMessage]) -> list[LocalReport]:
        return [w.step(m) for w, m in zip(self.workers, messages)]

    def local_solutions(self) -> list[np.ndarray]:
        return [w.local() for w in self.workers]

    def states(self) -> list[dict]:
        return [w.state() for w in self.workers]

    def restore(self, states: Sequence[dict]) -> None:
        for w, s in zip(self.workers, states):
            w.restore(s)
