"""Algorithm C: Recycled ADMM, R-ADMM and MR-ADMM over a graph (SPEC §4), "radmm" / "mradmm".

Zhang, Khalili & Liu (IEEE TIFS 2019). Iterations alternate:

* odd ``2k-1`` — the exact primal update (14) with the penalty ``eta_i(2k-1)`` and the dual update (15)
  (``lambda_i += eta_i(2k-1)/2 sum_j (f_i - f_j)``); with ``privacy=cvxdp.PenaltyPerturbation(...)`` the
  linear term ``eps_i(2k-1)^T f`` with Gamma-norm noise is added (18);
* even ``2k`` — the recycled gradient step (16)/(19)
  ``f_i(2k) = f_i(2k-1) - {g_i + 2 lambda_i(2k-1) + eta_i(2k-1) sum_j (f_i(2k-1) - f_j(2k-1))} / (2 eta_i(2k-1) V_i + gamma)``
  where ``g_i = eps_i(2k-1) + grad O(f_i(2k-1), D_i)`` is recovered from the odd iteration's KKT condition,
  ``g_i = -2 lambda_i(2k-2) - eta_i(2k-1) sum_j (2 f_i(2k-1) - f_i(2k-2) - f_j(2k-2))``; the dual is unchanged
  (17). An even iteration reads no data and spends no privacy (Lemma 2): the ledger records it with epsilon 0.

R-ADMM uses a constant penalty; MR-ADMM a private, non-decreasing one ``eta_i(2k-1) = eta_i q_i^k`` (the
paper's ``eta_hat_i q_1(i)^k``). The privacy bound is eq. (32).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np

from ...params import check_float, fail
from .madmm import GraphADMM, PerNode, _check_per_node, _jsonable


class MRADMM(GraphADMM):
    """Modified recycled ADMM (Algorithm 2; private version Algorithm 3).

    Parameters
    ----------
    graph : networkx.Graph, topology name or None
        See :class:`~cvxdp.families.graph.madmm.GraphADMM`.
    eta : float, list or dict
        ``eta_hat_i > 0``: one value, one per node or ``{node: value}``.
    q : float, list or dict
        ``q_i >= 1``; the penalty of odd iteration 2k-1 is ``eta_i(2k-1) = eta_hat_i q_i^k`` (constant for q = 1).
    gamma : float
        ``gamma >= 0``: the extra proximal weight of the linearized even step (16).
    rounds : int
        Number of iterations T (odd and even counted separately; K = ceil(T/2) odd iterations).
    graph_seed, edge_prob, init_scale, local_solver, tol
        See :class:`~cvxdp.families.graph.madmm.GraphADMM`.
    """

    name = "mradmm"
    kind = "radmm"

    def __init__(self, graph: nx.Graph | str | None = None, *, eta: PerNode = 1.0, q: PerNode = 1.0,
                 gamma: float = 0.5, rounds: int = 100, graph_seed: int = 0, edge_prob: float | None = None,
                 init_scale: float = 0.1, local_solver: str = "auto", tol: float | None = None) -> None:
        super().__init__(graph, rounds=rounds, graph_seed=graph_seed, edge_prob=edge_prob,
                         init_scale=init_scale, local_solver=local_solver, tol=tol)
        self.eta = eta
        self.q = q
        self.gamma = gamma

    def validate(self) -> None:
        super().validate()
        owner = type(self).__name__
        _check_per_node(self.eta, "eta", owner, 0.0)
        _check_per_node(self.q, "q", owner, 1.0, closed="left")
        check_float(self.gamma, "gamma", owner, 0.0, math.inf, closed="left")

    def describe(self) -> dict:
        return {**super().describe(), "eta": _jsonable(self.eta), "q": _jsonable(self.q), "gamma": self.gamma}

    def penalties(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        from .mechanism import node_values

        owner = type(self).__name__
        return node_values(self.eta, names, "eta", owner), node_values(self.q, names, "q", owner)

    def eta_at(self, t: int, names: Sequence[str] | None = None) -> Any:  # type: ignore[override]
        """``eta_i(2k-1) = eta_hat_i q_i^k`` with ``k = ceil(t/2)`` (the even step uses the odd one's)."""
        k = (t + 1) // 2
        if names is None:
            if isinstance(self.eta, (int, float)) and isinstance(self.q, (int, float)):
                return float(self.eta) * float(self.q) ** k
            raise fail("names", f"{type(self).__name__}.eta_at", "the node names (eta or q is per node)", None)
        eta_hat, q = self.penalties(names)
        return eta_hat * q ** k


class RADMM(MRADMM):
    """Recycled ADMM (Algorithm 1): MR-ADMM with a constant penalty ``eta`` (one value or one per node).

    Parameters
    ----------
    graph : networkx.Graph, topology name or None
    eta : float, list or dict
        The constant penalty, > 0 (it is also the dual step of the odd iterations).
    gamma : float
        ``gamma >= 0`` of the even step (16).
    rounds, graph_seed, edge_prob, init_scale, local_solver, tol
        See :class:`~cvxdp.families.graph.madmm.GraphADMM`.
    """

    name = "radmm"

    def __init__(self, graph: nx.Graph | str | None = None, *, eta: PerNode = 1.0, gamma: float = 0.5,
                 rounds: int = 100, graph_seed: int = 0, edge_prob: float | None = None, init_scale: float = 0.1,
                 local_solver: str = "auto", tol: float | None = None) -> None:
        super().__init__(graph, eta=eta, q=1.0, gamma=gamma, rounds=rounds, graph_seed=graph_seed,
                         edge_prob=edge_prob, init_scale=init_scale, local_solver=local_solver, tol=tol)

    def validate(self) -> None:
        super().validate()
        if self.q != 1.0:
            raise fail("q", type(self).__name__, "1 (R-ADMM has a constant penalty; use MRADMM)", self.q)

    def describe(self) -> dict:
        d = super().describe()
        d.pop("q", None)
        return d
