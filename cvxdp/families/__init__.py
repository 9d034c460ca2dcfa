"""Algorithm families on the one round loop: the server side of each (:class:`cvxdp.protocol.Family`).

* :mod:`.consensus` — LinearizedADMM and ADMM (SPEC §2), nodes :class:`cvxdp.worker.AgentWorker`;
* :mod:`.graph` — M-ADMM, DVP, R-ADMM, MR-ADMM over a graph (SPEC §3-§4), nodes :class:`.graph.GraphNode`;
* :mod:`.sharing` — ADMM sharing over vertically partitioned features (SPEC §5), nodes
  :class:`.sharing.SharingNode`.
"""

from __future__ import annotations

from typing import Any


def family_class(algorithm: Any) -> type:
    """The :class:`~cvxdp.protocol.Family` of ``algorithm`` (by its ``family`` attribute)."""
    kind = getattr(algorithm, "family", "consensus")
    if kind == "graph":
        from .graph import GraphFamily

        return GraphFamily
    if kind == "sharing":
        from .sharing import SharingFamily

        return SharingFamily
    from .consensus import ConsensusFamily

    return ConsensusFamily


__all__ = ["family_class"]
