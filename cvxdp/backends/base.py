"""The backend protocol: where the nodes live and how the round loop talks to them.

A backend is a transport only. It builds every node where it will run (from a picklable
:class:`NodeSpec`), calls named methods on the nodes and returns their results in node order. It knows
nothing about algorithms: the same seeds give the same numbers on every backend because every random
generator lives inside its node.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NodeSpec:
    """How to build one node where it will run: ``build(*args)`` (picklable; data travel once, at start).

    Attributes
    ----------
    name : str
        The agent's name (errors name it).
    build : callable
        A class or factory function returning the node object.
    args : tuple
        Its positional arguments (the agent, the algorithm, the node's SeedSequence, solvers, ...).
    """

    name: str
    build: Callable[..., Any]
    args: tuple = ()


class Backend(ABC):
    """Lifecycle: :meth:`start` (nodes built where they run), :meth:`call` per round, :meth:`close`."""

    @abstractmethod
    def start(self, specs: Sequence[NodeSpec]) -> None:
        """Build one node per spec (in order)."""

    @abstractmethod
    def call(self, method: str, args: Sequence[tuple] | None = None, *, round: int | None = None) -> list[Any]:
        """``getattr(node_i, method)(*args[i])`` on every node; the results in node order.

        ``args=None`` calls every node without arguments. ``round`` is only used to name the round in errors.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
