"""The graph family's algorithms and their declared parameters: M-ADMM and DVP (SPEC §3), R-ADMM and MR-ADMM (§4).

M-ADMM, "madmm":

Zhang, Khalili & Liu (ICML 2018). Node i of a connected undirected graph (neighbours V_i, V_i = |V_i|) holds
``O(f, D_i)`` and updates

    f_i(t+1) = argmin_f O(f, D_i) + 2 lambda_i(t)^T f + eta_i(t+1) sum_{j in V_i} ||f - (f_i(t) + f_j(t))/2||^2   (10)
    lambda_i(t+1) = lambda_i(t) + theta/2 sum_{j in V_i} (f_i(t+1) - f_j(t+1))                                   (11)

with a private, non-decreasing penalty ``eta_i(t) = eta_i(1) q_i^(t-1)`` decoupled from the dual step theta.
With ``privacy=cvxdp.PenaltyPerturbation(alpha=...)`` Gamma-norm noise enters the penalty (PP, eq. 24); DVP
(Zhang & Zhu 2017) is the same with ``eta_i(t) = theta``. Each node is an ordinary :class:`cvxdp.Agent` whose
shared blocks cover all its variables (every node shares the full f); the graph's nodes are the agents'
names. R-ADMM / MR-ADMM (Zhang et al., IEEE TIFS 2019) alternate an exact (odd) and a recycled (even) iteration
that reads no data. Parameters are declared once per class (:mod:`cvxdp.params`); constructors only store.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import networkx as nx
import numpy as np

from ...errors import ConfigError, fail
from ...params import (
    COUNT,
    NONNEGATIVE,
    OPTIONAL_POSITIVE,
    Algorithm,
    Instance,
    Interval,
    NoneValue,
    Options,
    Param,
    param,
)
from ...params import PerNode as PerNodeValue
from .mechanism import PenaltyPerturbation, node_values
from .topology import TOPOLOGIES, describe_graph, make_graph

LOCAL_SOLVERS = ("auto", "newton", "lbfgs", "cvxpy")
PerNode = float | Sequence[float] | Mapping[str, float]


class GraphADMM(Algorithm):
    """Shared parameters of the decentralized ADMM family over a graph (SPEC §3-§4).

    Parameters
    ----------
    graph : networkx.Graph, {"random", "ring", "grid", "complete"} or None
        The network; its nodes must be the agents' names. A name builds that topology over the agents (in
        their order); None means "random". See :mod:`cvxdp.families.graph.topology`.
    rounds : int
        Number of iterations T (each iteration is one primal and one dual update per node).
    graph_seed : int
        Seed of the "random" topology.
    edge_prob : float, optional
        Edge probability of the "random" topology (default :func:`cvxdp.families.graph.topology.default_edge_prob`).
    init_scale : float
        ``f_i(0) ~ N(0, init_scale^2 I)`` from node i's generator ("generate f_i(0) randomly"); an agent's
        ``initial`` takes precedence. 0 starts from zero.
    local_solver : {"auto", "newton", "lbfgs", "cvxpy"}
        The exact primal update. "auto": damped Newton when the agent's gradient is a
        :class:`cvxdp.SmoothObjective` with a Hessian and there are no constraints, L-BFGS
        when it has a gradient and no constraints, else the compiled CVXPY problem (DPP: only the penalty's
        square root and the linear term change).
    tol : float, optional
        Stop when, after an exact iteration, every node moved by at most ``tol`` and every node is within
        ``tol`` of the network mean.
    """

    family = "graph"
    extra_file_keys = ("edges",)  # the graph's edges themselves, instead of graph
    #: "madmm" (M-ADMM, DVP: every iteration exact) or "radmm" (R-ADMM, MR-ADMM: odd exact, even recycled)
    kind: ClassVar[str] = "madmm"

    parameters: ClassVar[dict[str, Param]] = {
        "graph": param(Instance((nx.Graph,), "a networkx.Graph", describe_graph), Options(TOPOLOGIES), NoneValue(),
                       help="random | ring | grid | complete (a case file may give the edges instead: edges = "
                       "[[\"node0\", \"node1\"], ...])"),
        "rounds": param(COUNT, help="number of iterations T"),
        "graph_seed": param(Interval(0, float("inf"), integer=True), help="seed of a random topology"),
        "edge_prob": param(Interval(0.0, 1.0, "right"), NoneValue(), help="edge probability of a random topology"),
        "init_scale": param(NONNEGATIVE, help="f_i(0) ~ N(0, init_scale^2 I) from the node's generator"),
        "local_solver": param(Options(LOCAL_SOLVERS), help="the exact primal update: auto | newton | lbfgs | cvxpy"),
        "tol": param(*OPTIONAL_POSITIVE, help="stop when, after an exact iteration, every node moved by at most tol "
                     "and is within tol of the network mean"),
    }

    @classmethod
    def accepts(cls, privacy: object) -> bool:
        """The non-private run and Gamma-norm penalty perturbation (``"gamma"``)."""
        if isinstance(privacy, str):
            return privacy in ("none", PenaltyPerturbation.short_name)
        return privacy is None or isinstance(privacy, PenaltyPerturbation)

    def __init__(self, graph: nx.Graph | str | None = None, *, rounds: int = 100, graph_seed: int = 0,
                 edge_prob: float | None = None, init_scale: float = 0.1, local_solver: str = "auto",
                 tol: float | None = None) -> None:
        self.graph = graph
        self.rounds = rounds
        self.graph_seed = graph_seed
        self.edge_prob = edge_prob
        self.init_scale = init_scale
        self.local_solver = local_solver
        self.tol = tol

    def build_graph(self, names: Sequence[str]) -> nx.Graph:
        """The run's graph over the agents' ``names``."""
        kind = "random" if self.graph is None else self.graph
        return make_graph(kind, list(names), seed=self.graph_seed, edge_prob=self.edge_prob)

    def penalties(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(eta_i(1) or eta_hat_i, q_i)`` per node."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, table: Mapping[str, Any], where: str, *, ignore: Any = ()) -> GraphADMM:
        """From an [algorithm] table; ``edges = [["node0", "node1"], ...]`` gives the graph itself."""
        table = dict(table)
        if "edges" in table:
            edges = table.pop("edges")
            if not isinstance(edges, list) or not all(isinstance(e, (list, tuple)) and len(e) == 2 for e in edges):
                raise ConfigError(f"The 'edges' entry of {where} must be a list of [node, node] pairs. Got {edges!r}.")
            if "graph" in table:
                raise ConfigError(f"{where}: give either 'graph' (a topology name) or 'edges', not both.")
            g = nx.Graph()
            g.add_edges_from((str(u), str(v)) for u, v in edges)
            g.graph["topology"] = "given"
            table["graph"] = g
        return super().from_config(table, where, ignore=ignore)


class MADMM(GraphADMM):
    """M-ADMM (eqs. 10-11) with private per-node penalties ``eta_i(t) = eta_i(1) q_i^(t-1)``.

    With ``privacy=cvxdp.PenaltyPerturbation(alpha=...)`` this is the penalty perturbation (PP) method,
    Algorithm 1 of Zhang, Khalili & Liu (2018); its privacy bound is eq. (26) (see
    :mod:`cvxdp.families.graph.mechanism`; the parameter condition ``2 c1 < B_i/C (rho/N + 2 theta V_i)`` is checked).

    Parameters
    ----------
    graph : networkx.Graph, topology name or None
        See :class:`GraphADMM`.
    eta : float, list or dict
        ``eta_i(1)``: one value, one per node (agents' order) or ``{node: value}``; > 0.
    q : float, list or dict
        ``q_i >= 1``: the penalty grows as ``eta_i(1) q_i^(t-1)`` (non-decreasing, private to the node).
    theta : float, list or dict
        Dual step size (eq. 11); > 0; per node allowed. Convergence (Thm 3.1) needs ``eta_i(t) >= theta``.
    theta_growth : float
        ``theta_i(t) = theta_i q_theta^(t-1)`` (a varying dual step), >= 1; default 1 (fixed).
    rounds, graph_seed, edge_prob, init_scale, local_solver, tol
        See :class:`GraphADMM`.
    """

    name = "madmm"
    parameters: ClassVar[dict[str, Param]] = {
        **GraphADMM.parameters,
        "eta": param(PerNodeValue(0.0), help="each node's penalty eta_i(1)"),
        "q": param(PerNodeValue(1.0, "left"), help="penalty growth eta_i(t) = eta_i(1) q_i^(t-1)"),
        "theta": param(PerNodeValue(0.0), help="dual step"),
        "theta_growth": param(Interval(1.0, float("inf"), "left"), help="growth of theta"),
    }

    def __init__(self, graph: nx.Graph | str | None = None, *, eta: PerNode = 0.5, q: PerNode = 1.0,
                 theta: PerNode = 0.5, theta_growth: float = 1.0, rounds: int = 100, graph_seed: int = 0,
                 edge_prob: float | None = None, init_scale: float = 0.1, local_solver: str = "auto",
                 tol: float | None = None) -> None:
        super().__init__(graph, rounds=rounds, graph_seed=graph_seed, edge_prob=edge_prob,
                         init_scale=init_scale, local_solver=local_solver, tol=tol)
        self.eta = eta
        self.q = q
        self.theta = theta
        self.theta_growth = theta_growth

    def penalties(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        owner = type(self).__name__
        return node_values(self.eta, names, "eta", owner), node_values(self.q, names, "q", owner)

    def thetas(self, names: Sequence[str]) -> np.ndarray:
        """``theta_i(1)`` per node."""
        return node_values(self.theta, names, "theta", type(self).__name__)

    def eta_at(self, t: int, names: Sequence[str] | None = None) -> Any:  # type: ignore[override]
        """``eta_i(t) = eta_i(1) q_i^(t-1)``: per node (an array) given ``names``, else a float (scalar eta, q)."""
        if names is None:
            if isinstance(self.eta, (int, float)) and isinstance(self.q, (int, float)):
                return float(self.eta) * float(self.q) ** (t - 1)
            raise fail("names", f"{type(self).__name__}.eta_at", "the node names (eta or q is per node)", None)
        eta1, q = self.penalties(names)
        return eta1 * q ** (t - 1)

    def theta_at(self, t: int, names: Sequence[str]) -> np.ndarray:
        """``theta_i(t) = theta_i q_theta^(t-1)`` per node."""
        return self.thetas(names) * float(self.theta_growth) ** (t - 1)

    def check_convergence_condition(self, names: Sequence[str]) -> None:
        """Warn when ``eta_i(1) < theta_i`` (Theorem 3.1 assumes ``eta_i(t) >= theta``)."""
        eta1, _ = self.penalties(names)
        theta = self.thetas(names)
        bad = [n for n, e, th in zip(names, eta1, theta) if e < th]
        if bad and self.theta_growth == 1.0:
            warnings.warn(f"{type(self).__name__}: eta_i(1) < theta at node(s) {bad}; the convergence theorem of "
                          "M-ADMM assumes eta_i(t) >= theta.", stacklevel=3)


class DVP(MADMM):
    """Dual variable perturbation (Zhang & Zhu 2017) = M-ADMM with ``eta_i(t) = theta`` for all i, t.

    With ``privacy=None`` it is conventional decentralized ADMM (eqs. 8-9 with eta = theta); with
    ``privacy=cvxdp.PenaltyPerturbation(alpha=...)`` the Gamma-norm noise ``eta V eps = theta V eps`` enters
    the dual variable (the PP method with a constant penalty), bound (26) with ``eta_i(t) = theta``.

    Parameters
    ----------
    graph : networkx.Graph, topology name or None
    theta : float
        Penalty and dual step, > 0.
    rounds, graph_seed, edge_prob, init_scale, local_solver, tol
        See :class:`GraphADMM`.
    """

    name = "dvp"
    q = 1.0
    theta_growth = 1.0
    parameters: ClassVar[dict[str, Param]] = {
        **GraphADMM.parameters, "theta": param(Interval(0.0, float("inf")), help="penalty and dual step"),
    }

    def __init__(self, graph: nx.Graph | str | None = None, *, theta: float = 0.5, rounds: int = 100,
                 graph_seed: int = 0, edge_prob: float | None = None, init_scale: float = 0.1,
                 local_solver: str = "auto", tol: float | None = None) -> None:
        GraphADMM.__init__(self, graph, rounds=rounds, graph_seed=graph_seed, edge_prob=edge_prob,
                           init_scale=init_scale, local_solver=local_solver, tol=tol)
        self.theta = theta

    @property
    def eta(self) -> float:  # type: ignore[override]
        """DVP's penalty is its dual step: ``eta_i(t) = theta``."""
        return self.theta


class MRADMM(GraphADMM):
    """Modified recycled ADMM (Algorithm 2; private version Algorithm 3).

    Parameters
    ----------
    graph : networkx.Graph, topology name or None
        See :class:`~cvxdp.families.graph.params.GraphADMM`.
    eta : float, list or dict
        ``eta_hat_i > 0``: one value, one per node or ``{node: value}``.
    q : float, list or dict
        ``q_i >= 1``; the penalty of odd iteration 2k-1 is ``eta_i(2k-1) = eta_hat_i q_i^k`` (constant for q = 1).
    gamma : float
        ``gamma >= 0``: the extra proximal weight of the linearized even step (16).
    rounds : int
        Number of iterations T (odd and even counted separately; K = ceil(T/2) odd iterations).
    graph_seed, edge_prob, init_scale, local_solver, tol
        See :class:`~cvxdp.families.graph.params.GraphADMM`.
    """

    name = "mradmm"
    kind = "radmm"
    parameters: ClassVar[dict[str, Param]] = {
        **GraphADMM.parameters,
        "eta": param(PerNodeValue(0.0), help="each node's penalty eta_hat_i"),
        "q": param(PerNodeValue(1.0, "left"), help="penalty growth eta_i(2k-1) = eta_hat_i q_i^k"),
        "gamma": param(NONNEGATIVE, help="the extra proximal weight of the recycled (even) step"),
    }

    def __init__(self, graph: nx.Graph | str | None = None, *, eta: PerNode = 1.0, q: PerNode = 1.0,
                 gamma: float = 0.5, rounds: int = 100, graph_seed: int = 0, edge_prob: float | None = None,
                 init_scale: float = 0.1, local_solver: str = "auto", tol: float | None = None) -> None:
        super().__init__(graph, rounds=rounds, graph_seed=graph_seed, edge_prob=edge_prob,
                         init_scale=init_scale, local_solver=local_solver, tol=tol)
        self.eta = eta
        self.q = q
        self.gamma = gamma

    def penalties(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
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
        See :class:`~cvxdp.families.graph.params.GraphADMM`.
    """

    name = "radmm"
    q = 1.0
    parameters: ClassVar[dict[str, Param]] = {k: v for k, v in MRADMM.parameters.items() if k != "q"}

    def _check(self) -> None:
        if self.q != 1.0:
            raise fail("q", type(self).__name__, "1 (R-ADMM has a constant penalty; use MRADMM)", self.q)

    def __init__(self, graph: nx.Graph | str | None = None, *, eta: PerNode = 1.0, gamma: float = 0.5,
                 rounds: int = 100, graph_seed: int = 0, edge_prob: float | None = None, init_scale: float = 0.1,
                 local_solver: str = "auto", tol: float | None = None) -> None:
        GraphADMM.__init__(self, graph, rounds=rounds, graph_seed=graph_seed, edge_prob=edge_prob,
                           init_scale=init_scale, local_solver=local_solver, tol=tol)
        self.eta = eta
        self.gamma = gamma
