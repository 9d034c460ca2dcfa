"""Algorithm families on the one round loop: the server side of each (:class:`cvxdp.run.protocol.Family`).

* :mod:`.consensus` — LinearizedADMM and ADMM (SPEC §2), nodes :class:`cvxdp.families.consensus.node.AgentWorker`;
* :mod:`.graph` — M-ADMM, DVP, R-ADMM, MR-ADMM over a graph (SPEC §3-§4), nodes :class:`.graph.GraphNode`;
* :mod:`.sharing` — ADMM sharing over vertically partitioned features (SPEC §5), nodes
  :class:`.sharing.SharingNode`.
"""

from __future__ import annotations

from typing import Any


def family_class(algorithm: Any) -> type:
    """The :class:`~cvxdp.run.protocol.Family` of ``algorithm`` (by its ``family`` attribute)."""
    kind = getattr(algorithm, "family", "consensus")
    if kind == "graph":
        from .graph.server import GraphFamily

        return GraphFamily
    if kind == "sharing":
        from .sharing.server import SharingFamily

        return SharingFamily
    from .consensus.server import ConsensusFamily

    return ConsensusFamily


__all__ = ["family_class"]
