"""The serial backend: every node in this process, called one after the other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Backend, NodeSpec


class SerialBackend(Backend):
    """Runs the nodes in order in the calling process (the embedded default)."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.names: list[str] = []

    def start(self, specs: Sequence[NodeSpec]) -> None:
        self.names = [s.name for s in specs]
        self.nodes = [s.build(*s.args) for s in specs]

    def call(self, method: str, args: Sequence[tuple] | None = None, *, round: int | None = None) -> list[Any]:
        if args is None:
            return [getattr(node, method)() for node in self.nodes]
        return [getattr(node, method)(*a) for node, a in zip(self.nodes, args)]
