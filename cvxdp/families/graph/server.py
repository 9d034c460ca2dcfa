"""The coordinator side of the graph family (SPEC §3-§4): M-ADMM, PP, DVP, R-ADMM, MR-ADMM on the round loop.

The nodes (:class:`cvxdp.families.graph.node.GraphNode`) release ``f_i`` every iteration, nothing else. The
neighbour exchange goes through the coordinator as released values: it routes the released ``f_j(t-1)`` of node
i's neighbours into node i's message of iteration t.

The coordinator plans each iteration without data: the penalties ``eta_i(t)``, the noise parameter ``alpha_i`` and
each node's charge, a pure-epsilon event whose epsilon is its summand of (26) or (32); recycled iterations read no
data (a NoOp event). Released metrics (computed from the released ``f``): consensus_residual (sum over edges
``||f_i - f_j||``), max_deviation, primal_residual, dual_residual ``||F(t) - F(t-1)||``, eta_min/eta_max, bound_P
(the papers' bound so far) and the ledger's eps_basic / eps_rdp. Non-private evaluation (node side): objective,
average_loss (ERM nodes: the papers' ``L(t)``), max_violation, noise_magnitude (the actual ``||eps||``; NaN on
recycled iterations of private runs: no noise is drawn), solver names and times. The solution is the mean of the
released ``f``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np

from ...errors import DeclarationError, check_float, fail
from ...model import Evaluation, Release, check_declarations, check_public_initial
from ...run import FEASIBLE_SETS_PUBLIC, Backend, Charge, Family, NodeSpec, RoundPlan, initial_points_public
from .mechanism import (
    GAMMA_ACCOUNTANTS,
    PenaltyPerturbation,
    check_bound_condition,
    check_penalty_perturbation,
    erm_constants,
    gamma_step_event,
    inexact_solve_note,
    penalty_schedule,
    step_epsilons,
)
from .node import GraphMessage, GraphNode
from .topology import Topology, check_graph, describe_graph

HISTORY_COLUMNS = ["round", "iteration", "objective", "consensus_residual", "max_deviation", "primal_residual",
                   "average_loss", "max_violation", "dual_residual", "noise_magnitude", "eta_min", "eta_max",
                   "solver_time", "wall_time"]


def _check_nodes(agents: Sequence[Any], owner: str) -> tuple[int, dict[str, int]]:
    sizes = check_declarations(agents, private=False)
    keys = sorted(sizes)
    dims = set()
    for agent in agents:
        layout = agent.layout
        if sorted(layout.shared) != keys:
            raise DeclarationError(f"Agent {agent.name!r}: {owner} needs every node to share the same keys "
                                   f"{keys}; it shares {sorted(layout.shared)}.")
        if not np.all(layout.shared_mask):
            raise DeclarationError(f"Agent {agent.name!r}: {owner} needs every variable shared (every node shares "
                                   f"the full f); {int(np.sum(~layout.shared_mask))} local-only coordinate(s) found.")
        dims.add(layout.size)
    if len(dims) != 1:  # pragma: no cover - implied by equal shared sizes covering everything
        raise DeclarationError(f"{owner}: the nodes' local vectors differ in size ({sorted(dims)}).")
    return dims.pop(), sizes


#: The declared constants of a private graph run (a public assumption)
GRAPH_BOUNDS = ("the ERM constants each node declares are public and true: C, its sample count B_i, the regulariser "
                "rho/N, the loss curvature c1 and ||x_n|| <= 1, |L'| <= 1; the noise is calibrated to them and "
                "nothing checks them against the data")


@dataclass
class GraphState:
    """The server's side of a graph run (part of the checkpoint): the released iterates and the pending step."""

    F: np.ndarray
    dual_step: np.ndarray | None = None


class GraphFamily(Family):
    """M-ADMM / DVP / R-ADMM / MR-ADMM on the round loop (see the module docstring)."""

    history_order = (*HISTORY_COLUMNS[:-1], "bound_P", "eps_basic", "eps_rdp")
    agent_order = ("round", "agent", "objective", "residual", "noise_magnitude", "eta", "epsilon", "solver_time",
                   "solver")
    progress = ("deviation", "max_deviation")
    unit = "iter"

    def __init__(self, algorithm: Any, agents: Sequence[Any], **kwargs: Any) -> None:
        super().__init__(algorithm, agents, **kwargs)
        owner = type(algorithm).__name__
        self.privacy = check_penalty_perturbation(self.privacy, algorithm)
        if not isinstance(agents, (list, tuple)) or not agents:
            raise fail("agents", "solve", "a non-empty list of cvxdp.Agent", agents)
        self.d, self.sizes = _check_nodes(agents, owner)
        names = self.names
        self.topo: Topology = check_graph(algorithm.build_graph(names), names, owner=f"{owner}'s graph")
        self.V = self.topo.degrees
        self.nbrs = [np.array(nb, dtype=int) for nb in self.topo.neighbors]
        self.edges = np.array(self.topo.edges, dtype=int).reshape(-1, 2)
        self.recycling = algorithm.kind == "radmm"
        self.eta_of = penalty_schedule(algorithm, names)
        if not self.recycling:
            algorithm.check_convergence_condition(names)
        budget = self.budget
        if self.target_delta is None:
            self.target_delta = budget[1] if budget is not None and budget[1] > 0 else 1e-6
        self.target_delta = check_float(self.target_delta, "target_delta", "solve", 0.0, 1.0, closed="left")
        self.guard_accountant = "basic"  # the papers' bound is the basic sum of the per-iteration epsilons
        self.erm = None
        try:
            self.erm = [erm_constants(a) for a in agents]
        except DeclarationError:
            if self.privacy is not None:
                raise
        if self.privacy is not None:
            check_public_initial(agents)
            self.alpha1 = self.privacy.alphas(names)
            if self.recycling:
                check_bound_condition(self.erm, self.eta_of(1), self.V, names, weight_name="eta_i(1)", owner=owner)
            else:
                check_bound_condition(self.erm, algorithm.thetas(names), self.V, names, weight_name="theta",
                                      owner=owner)
        offsets = np.cumsum([0] + [self.sizes[k] for k in sorted(self.sizes)])
        self.shared_idx = {k: np.arange(offsets[j], offsets[j + 1]) for j, k in enumerate(sorted(self.sizes))}

    def config(self) -> dict[str, Any]:
        return {"target_delta": self.target_delta, "graph": describe_graph(self.topo.graph),
                "degrees": self.V.tolist(), "shared_sizes": self.sizes,
                "erm": [c.to_dict() for c in self.erm] if self.erm is not None else None}

    def nodes(self) -> list[NodeSpec]:
        # each node draws its own noise from its own alpha_i(1) (a mechanism of one node); work: the agent's number of
        # variables (public), as in consensus
        return [NodeSpec(a.name, GraphNode, (self.algorithm, int(v), self.solvers, self._node_mechanism(i)),
                         work=float(a.layout.size), public={"degree": int(v)})
                for i, (a, v) in enumerate(zip(self.agents, self.V))]

    def _node_mechanism(self, i: int) -> PenaltyPerturbation | None:
        """Node ``i``'s own mechanism: the run's growth and its own ``alpha_i(1)`` (None: a non-private run)."""
        if self.privacy is None:
            return None
        return PenaltyPerturbation(alpha=float(self.alpha1[i]), growth=self.privacy.growth)

    def start(self, declarations: Sequence[Mapping[str, Any]]) -> GraphState:
        if self.privacy is not None:
            self.notes.append((inexact_solve_note([d["solver"] for d in declarations]), False, True))
            # the public assumptions the guarantee relies on (non-voiding ledger notes)
            self.assume(FEASIBLE_SETS_PUBLIC)
            starts = [a.name for a in self.agents if a.initial]
            if starts:  # the others start from a random f_i(0) drawn from the node's generator (data-free)
                self.assume(initial_points_public(starts))
            self.assume(GRAPH_BOUNDS)
        initial = [d["initial"] for d in declarations]
        return GraphState(F=np.array(initial, dtype=float).reshape(len(self.names), self.d))

    # ---------------------------------------------------------------- one iteration
    def plan(self, t: int, state: GraphState) -> RoundPlan:
        N = len(self.names)
        eta = self.eta_of(t)
        exact = not self.recycling or t % 2 == 1
        step_eps = np.zeros(N)
        alpha: Any = [None] * N
        charges: list[Any] = [None] * N
        if self.privacy is not None:
            if exact:
                k = (t + 1) // 2
                alpha = self.privacy.alpha_at(self.alpha1, k if self.recycling else t)
                step_eps = step_epsilons(self.erm, alpha, eta, self.V, self.recycling)
                charges = [Charge(gamma_step_event(float(e)), (float(e), 0.0)) for e in step_eps]
            else:  # a recycled iteration reads no data
                charges = [Charge(dp_accounting.NoOpDpEvent(), (0.0, 0.0))] * N
        F = state.F
        dual = state.dual_step
        messages = [GraphMessage(round=t, neighbours=F[self.nbrs[i]], eta=float(eta[i]), exact=exact,
                                 dual_step=None if dual is None else float(dual[i]),
                                 alpha=None if alpha[i] is None else float(alpha[i]))
                    for i in range(N)]
        released = {"iteration": "exact" if exact else "recycled", "eta_min": float(eta.min()),
                    "eta_max": float(eta.max())}
        agent_released = [{"eta": float(eta[i]), "epsilon": float(step_eps[i])} for i in range(N)]
        next_step = None
        if exact:
            next_step = eta if self.recycling else self.algorithm.theta_at(t, self.names)
        return RoundPlan(messages=messages, charges=charges, released=released, agent_released=agent_released,
                         context=next_step)

    def aggregate(self, t: int, plan: RoundPlan, releases: Sequence[Release], state: GraphState
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        F_new = np.stack([rel["f"] for rel in releases])
        diffs = F_new[self.edges[:, 0]] - F_new[self.edges[:, 1]]
        en = np.linalg.norm(diffs, axis=1)
        mean = F_new.mean(axis=0)
        row = {"consensus_residual": float(en.sum()),
               "max_deviation": float(np.max(np.linalg.norm(F_new - mean, axis=1))),
               "primal_residual": float(math.sqrt(float(en @ en))),
               "dual_residual": float(np.linalg.norm(F_new - state.F))}
        agent_rows = [{"residual": float(np.linalg.norm(self.V[i] * F_new[i] - F_new[self.nbrs[i]].sum(axis=0)))}
                      for i in range(len(self.names))]
        state.F, state.dual_step = F_new, plan.context
        return row, agent_rows

    def privacy_columns(self, ledger: Any, t: int) -> dict[str, float]:
        return {"bound_P": max(ledger.spent(n, "basic")[0] for n in self.names)}

    def evaluate(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        values = [ev.values["objective"] for ev in evaluations]
        row: dict[str, Any] = {"objective": float(sum(values))}
        if self.erm is not None:
            row["average_loss"] = float(np.mean([ev.values["loss"] for ev in evaluations]))
        viol = [ev.values["violation"] for ev in evaluations if "violation" in ev.values]
        row["max_violation"] = float(max(viol)) if viol else 0.0
        row["noise_magnitude"] = float(np.array([ev.values["noise_magnitude"] for ev in evaluations]).mean())
        row["solver_time"] = float(sum(ev.values["solver_time"] for ev in evaluations))
        agents = [{"objective": ev.values["objective"], "noise_magnitude": float(ev.values["noise_magnitude"]),
                   "solver_time": ev.values["solver_time"], "solver": ev.labels["solver"]} for ev in evaluations]
        return row, agents

    def converged(self, t: int, state: GraphState, row: Mapping[str, Any]) -> bool:
        tol = self.algorithm.tol
        exact = row.get("iteration") == "exact"
        return tol is not None and exact and row["dual_residual"] / math.sqrt(len(self.names)) <= tol \
            and row["max_deviation"] <= tol

    # ---------------------------------------------------------------- the end
    def solution(self, state: GraphState) -> dict[str, np.ndarray]:
        mean = state.F.mean(axis=0)
        return {k: mean[idx] for k, idx in self.shared_idx.items()}

    def finish(self, result: Any, state: GraphState, backend: Backend) -> None:
        """The papers' bound beside the ledger's totals: per node, ``paper_bound`` (the basic sum of its claims, bound
        (26) or (32)) and the worst node's."""
        summary, bound = result.privacy, "(32)" if self.recycling else "(26)"
        private = self.privacy is not None
        for row in summary["per_agent"].values():
            row["paper_bound"] = row["basic"][0] if private else None
        worst_node = max(summary["per_agent"], key=lambda n: math.inf if summary["per_agent"][n]["basic"][0] is None
                         else summary["per_agent"][n]["basic"][0])
        summary["worst"]["paper_bound"] = summary["per_agent"][worst_node]["paper_bound"]
        summary.update(mechanism="gamma-norm", bound=bound, paper_bound=summary["worst"]["paper_bound"],
                       accountants={k: v.format(bound=bound) for k, v in GAMMA_ACCOUNTANTS.items()})
