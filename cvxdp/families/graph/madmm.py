"""Algorithm B: M-ADMM over a graph with private penalties; DVP; penalty perturbation (SPEC §3), "madmm".

Zhang, Khalili & Liu (ICML 2018). Node i of a connected undirected graph (neighbours V_i, V_i = |V_i|) holds
``O(f, D_i)`` and updates

    f_i(t+1) = argmin_f O(f, D_i) + 2 lambda_i(t)^T f + eta_i(t+1) sum_{j in V_i} ||f - (f_i(t) + f_j(t))/2||^2   (10)
    lambda_i(t+1) = lambda_i(t) + theta/2 sum_{j in V_i} (f_i(t+1) - f_j(t+1))                                   (11)

with a private, non-decreasing penalty ``eta_i(t) = eta_i(1) q_i^(t-1)`` decoupled from the dual step theta.
With ``privacy=cvxdp.PenaltyPerturbation(alpha=...)`` Gamma-norm noise enters the penalty (PP, eq. 24); DVP
(Zhang & Zhu 2017) is the same with ``eta_i(t) = theta``. Each node is an ordinary :class:`cvxdp.Agent` whose
shared blocks cover all its variables (every node shares the full f); the graph's nodes are the agents'
names. The constructors only store parameters; :meth:`validate` checks them; ``cvxdp.solve`` runs them on the
round loop through :class:`cvxdp.families.graph.server.GraphFamily` (``family = "graph"``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from ...params import check_choice, check_float, check_int, fail
from ..consensus.updates import Algorithm
from .topology import TOPOLOGIES, describe_graph, make_graph

LOCAL_SOLVERS = ("auto", "newton", "lbfgs", "cvxpy")
PerNode = float | Sequence[float] | Mapping[str, float]


def _check_per_node(value: Any, name: str, owner: str, low: float, closed: str = "neither") -> None:
    from .mechanism import _per_node

    _per_node(value, name, owner, low, closed)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value]
    return value


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
    private_ok = True
    kind = "madmm"

    def __init__(self, graph: nx.Graph | str | None = None, *, rounds: int = 100, graph_seed: int = 0,
                 edge_prob: float | None = None, init_scale: float = 0.1, local_solver: str = "auto",
                 tol: float | None = None) -> None:
        super().__init__(rounds=rounds)
        self.graph = graph
        self.graph_seed = graph_seed
        self.edge_prob = edge_prob
        self.init_scale = init_scale
        self.local_solver = local_solver
        self.tol = tol

    # ------------------------------------------------------------------ parameters
    def validate(self) -> None:
        owner = type(self).__name__
        check_int(self.rounds, "rounds", owner, 1)
        g = self.graph
        if g is not None and not isinstance(g, nx.Graph) and g not in TOPOLOGIES:
            raise fail("graph", owner, "a networkx.Graph, None or one of " + ", ".join(map(repr, TOPOLOGIES)), g)
        check_int(self.graph_seed, "graph_seed", owner, 0)
        if self.edge_prob is not None:
            check_float(self.edge_prob, "edge_prob", owner, 0.0, 1.0, closed="right")
        check_float(self.init_scale, "init_scale", owner, 0.0, math.inf, closed="left")
        check_choice(self.local_solver, "local_solver", owner, LOCAL_SOLVERS)
        if self.tol is not None:
            check_float(self.tol, "tol", owner, 0.0, math.inf)

    def build_graph(self, names: Sequence[str]) -> nx.Graph:
        """The run's graph over the agents' ``names``."""
        kind = "random" if self.graph is None else self.graph
        return make_graph(kind, list(names), seed=self.graph_seed, edge_prob=self.edge_prob)

    def describe(self) -> dict:
        self.validate()
        graph = describe_graph(self.graph) if isinstance(self.graph, nx.Graph) else (self.graph or "random")
        return {"name": self.name, "rounds": self.rounds, "graph": graph, "graph_seed": self.graph_seed,
                "edge_prob": self.edge_prob, "init_scale": self.init_scale, "local_solver": self.local_solver,
                "tol": self.tol}

    # ------------------------------------------------------------------ schedules (per node, vectorised)
    def penalties(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(eta_i(1) or eta_hat_i, q_i)`` per node."""
        raise NotImplementedError

    def eta_at(self, t: int, names: Sequence[str] | None = None) -> Any:  # type: ignore[override]
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                         if k not in ("rho", "tol_primal", "tol_dual") and not k.endswith("_schedule"))
        return f"{type(self).__name__}({args})"


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

    def validate(self) -> None:
        super().validate()
        owner = type(self).__name__
        _check_per_node(self.eta, "eta", owner, 0.0)
        _check_per_node(self.q, "q", owner, 1.0, closed="left")
        _check_per_node(self.theta, "theta", owner, 0.0)
        check_float(self.theta_growth, "theta_growth", owner, 1.0, math.inf, closed="left")

    def describe(self) -> dict:
        return {**super().describe(), "eta": _jsonable(self.eta), "q": _jsonable(self.q),
                "theta": _jsonable(self.theta), "theta_growth": self.theta_growth}

    def penalties(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        from .mechanism import node_values

        owner = type(self).__name__
        return node_values(self.eta, names, "eta", owner), node_values(self.q, names, "q", owner)

    def thetas(self, names: Sequence[str]) -> np.ndarray:
        """``theta_i(1)`` per node."""
        from .mechanism import node_values

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

    def __init__(self, graph: nx.Graph | str | None = None, *, theta: float = 0.5, rounds: int = 100,
                 graph_seed: int = 0, edge_prob: float | None = None, init_scale: float = 0.1,
                 local_solver: str = "auto", tol: float | None = None) -> None:
        super().__init__(graph, eta=theta, q=1.0, theta=theta, rounds=rounds, graph_seed=graph_seed,
                         edge_prob=edge_prob, init_scale=init_scale, local_solver=local_solver, tol=tol)

    def validate(self) -> None:
        GraphADMM.validate(self)
        check_float(self.theta, "theta", type(self).__name__, 0.0, math.inf)
        self.eta, self.q = self.theta, 1.0

    def describe(self) -> dict:
        return {**GraphADMM.describe(self), "theta": self.theta}

    def __repr__(self) -> str:
        return (f"DVP(graph={self.graph!r}, theta={self.theta!r}, rounds={self.rounds!r}, "
                f"graph_seed={self.graph_seed!r})")
