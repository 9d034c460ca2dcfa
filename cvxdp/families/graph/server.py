"""The graph family (SPEC §3-§4): M-ADMM, PP, DVP, R-ADMM, MR-ADMM on the round loop.

Node i (:class:`GraphNode`) holds its data, its exact primal update (:class:`cvxdp.families.graph.local.LocalProx`),
its own generator and its dual. It releases ``f_i`` every iteration — nothing else. The neighbour exchange is
simulated by the loop: the server routes the released ``f_j(t-1)`` of node i's neighbours into node i's
message of round t. Node i first completes the dual update of iteration t-1 with them (eq. 11 / 15;
``lambda_i += step/2 sum_j (f_i - f_j)``, the step sent in the message, none after a recycled iteration),
then runs the primal update of iteration t: the exact one (10)/(14) with Gamma-norm noise under
``PenaltyPerturbation`` (PP eq. 24; MR-ADMM eq. 18) or the recycled step (16)/(19).

The server plans each iteration without data: the penalties ``eta_i(t)``, the noise parameter
``alpha_i`` and the per-node claims (the summands of (26) or (32)); recycled iterations spend nothing (they
are recorded as free). Released metrics (computed from the released ``f``): consensus_residual (sum over edges
``||f_i - f_j||``), max_deviation, primal_residual, dual_residual ``||F(t) - F(t-1)||``, eta_min/eta_max,
bound_P / eps_basic (/ eps_rdp). Non-private evaluation (node side): objective, average_loss (ERM nodes),
max_violation, noise_magnitude (the actual ``||eps||``), solver names and times.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...errors import DeclarationError
from ...model.agent import Agent
from ...model.local_solver import SolveReport
from ...params import check_float, fail
from ...run.backends import Backend, NodeSpec
from ...run.protocol import Evaluation, Family, Release, RoundPlan
from .topology import Topology, check_graph, describe_graph

HISTORY_COLUMNS = ["round", "iteration", "objective", "consensus_residual", "max_deviation", "primal_residual",
                   "average_loss", "max_violation", "dual_residual", "noise_magnitude", "eta_min", "eta_max",
                   "solver_time", "wall_time"]


def _record_step(ledger: Any, name: str, t: int, epsilon: float | None) -> None:
    """Record node ``name``'s iteration ``t``: a pure ``epsilon``-DP step (bound (26)/(32) summand, replace-one
    relation on D_i), or a step that touches no data (``epsilon=None``: a recycled MR-ADMM iteration).

    The one place where the graph family writes to its :class:`~cvxdp.privacy.PrivacyLedger`.
    """
    import dp_accounting

    from .mechanism import gamma_step_event

    event = dp_accounting.NoOpDpEvent() if epsilon is None else gamma_step_event(float(epsilon))
    ledger.record_event(name, event)


@dataclass(frozen=True)
class GraphMessage:
    """Server -> node i in iteration t: the neighbours' released f_j(t-1) and the plan of the iteration.

    Attributes
    ----------
    round : int
    neighbours : ndarray, shape (V_i, d)
        ``f_j(t-1)`` of node i's neighbours, in the graph's neighbour order.
    dual_step : float or None
        The step of the pending dual update of iteration t-1 (None: nothing pending).
    eta : float
        ``eta_i(t)``.
    exact : bool
        An exact (data-reading) iteration, or a recycled one.
    alpha : float or None
        Gamma-norm noise parameter of this iteration (None: no noise).
    """

    round: int
    neighbours: np.ndarray
    dual_step: float | None
    eta: float
    exact: bool
    alpha: float | None = None


class GraphNode:
    """One node of the graph family, built where the backend places it (see the module docstring)."""

    def __init__(self, agent: Agent, algorithm: Any, degree: int, seed: np.random.SeedSequence,
                 solvers: tuple[str, ...], private: bool) -> None:
        from .local import LocalProx
        from .mechanism import erm_constants

        self.agent = agent
        self.recycling = algorithm.kind == "radmm"
        self.gamma = float(getattr(algorithm, "gamma", 0.0))
        self.V = degree
        self.private = private
        self.prox = LocalProx(agent, method=algorithm.local_solver, solvers=solvers)
        self.rng = np.random.default_rng(seed)
        d = agent.layout.size
        self.d = d
        try:
            self.erm = erm_constants(agent)
        except DeclarationError:
            self.erm = None
        if agent.initial is not None:
            self.f = self.prox.to_f(agent.layout.flatten(agent.initial))
        elif algorithm.init_scale > 0:
            self.f = algorithm.init_scale * self.rng.standard_normal(d)
        else:
            self.f = np.zeros(d)
        self.lam = np.zeros(d)
        self.recycled = np.zeros(d)
        self.projection = None
        if self.recycling and agent.constraints:
            from ...model.local_solver import compile_projection

            self.projection = compile_projection(agent, solvers=solvers)
        self._last: tuple[float, SolveReport] = (0.0, SolveReport(solver="recycled"))

    def initial(self) -> np.ndarray:
        """``f_i(0)``: random from the node's generator (data-free) or the agent's public ``initial``."""
        return self.f.copy()

    def solver_info(self) -> SimpleNamespace:
        """The local solver's method and tolerance (public; for the ledger's note)."""
        return SimpleNamespace(method=self.prox.method, tol=self.prox.tol)

    def step(self, msg: GraphMessage) -> Release:
        nbr = msg.neighbours
        V, f, eta = self.V, self.f, msg.eta
        if msg.dual_step is not None:  # the dual update of iteration t-1, with the neighbours' f_j(t-1)
            self.lam = self.lam + 0.5 * msg.dual_step * (V * f - nbr.sum(axis=0))
        noise_norm = 0.0
        if msg.exact:
            nb_sum = V * f + nbr.sum(axis=0)
            p = eta * nb_sum - 2.0 * self.lam
            if msg.alpha is not None:
                from .mechanism import sample_gamma_norm

                eps = sample_gamma_norm(self.rng, msg.alpha, self.d)
                noise_norm = float(np.linalg.norm(eps))
                p = p - (eps if self.recycling else 2.0 * eta * V * eps)
            f_new, report = self.prox.solve(eta * V, p, f, round=msg.round)
            if self.recycling:  # eps + grad O(f_i(2k-1)) from the KKT condition of (14)/(18)
                self.recycled = -2.0 * self.lam - eta * (2.0 * V * f_new - nb_sum)
        else:
            from .local import recycled_step

            disagreement = V * f - nbr.sum(axis=0)
            f_new = recycled_step(f, self.recycled, self.lam, eta, disagreement, V, self.gamma)
            report = SolveReport(solver="recycled")
            if self.projection is not None:
                u, report = self.projection.project(self.prox.to_u(f_new), np.ones(self.d), round=msg.round)
                f_new = self.prox.to_f(u)
            if self.private:
                noise_norm = math.nan  # no noise drawn on a recycled iteration
        self.f = f_new
        self._last = (noise_norm, report)
        return Release(self.agent.name, msg.round, {"f": f_new.copy()})

    def evaluate(self, round: int) -> Evaluation:
        """Non-private evaluation of the current iterate on this node's data (never part of a release)."""
        noise_norm, report = self._last
        value = self.prox.value(self.f)
        values = {"objective": value, "noise_magnitude": noise_norm, "solver_time": report.seconds}
        if self.erm is not None:
            values["loss"] = (value - self.erm.reg * 0.5 * float(self.f @ self.f)) / self.erm.C
        if self.agent.constraints:
            values["violation"] = self.prox.violation(self.f)
        return Evaluation(self.agent.name, round, values=values, labels={"solver": report.solver})

    def local(self) -> np.ndarray:
        return np.array(self.prox.to_u(self.f), copy=True)

    def state(self) -> dict:
        return {"f": self.f.copy(), "lam": self.lam.copy(), "recycled": self.recycled.copy(),
                "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.f = np.asarray(state["f"], dtype=float).copy()
        self.lam = np.asarray(state["lam"], dtype=float).copy()
        self.recycled = np.asarray(state["recycled"], dtype=float).copy()
        self.rng.bit_generator.state = state["rng"]


@dataclass
class GraphState:
    """The server's side of a graph run (part of the checkpoint): the released iterates and the pending step."""

    F: np.ndarray
    dual_step: np.ndarray | None = None


class GraphFamily(Family):
    """M-ADMM / DVP / R-ADMM / MR-ADMM on the round loop (see the module docstring)."""

    history_order = tuple(HISTORY_COLUMNS[:-1])
    agent_order = ("round", "agent", "objective", "residual", "noise_magnitude", "eta", "epsilon", "solver_time",
                   "solver")
    progress = ("deviation", "max_deviation")
    unit = "iter"

    def __init__(self, algorithm: Any, agents: Sequence[Any], **kwargs: Any) -> None:
        from .local import _check_nodes, _check_privacy, _penalty_schedule
        from .mechanism import check_bound_condition, erm_constants

        super().__init__(algorithm, agents, **kwargs)
        owner = type(algorithm).__name__
        self.privacy = _check_privacy(self.privacy, owner)
        if not isinstance(agents, (list, tuple)) or not agents:
            raise fail("agents", "solve", "a non-empty list of cvxdp.Agent", agents)
        self.d, self.sizes = _check_nodes(agents, owner)
        names = self.names
        self.topo: Topology = check_graph(algorithm.build_graph(names), names, owner=f"{owner}'s graph")
        self.V = self.topo.degrees
        self.nbrs = [np.array(nb, dtype=int) for nb in self.topo.neighbors]
        self.edges = np.array(self.topo.edges, dtype=int).reshape(-1, 2)
        self.recycling = algorithm.kind == "radmm"
        self.eta_of = _penalty_schedule(algorithm, names)
        if not self.recycling:
            algorithm.check_convergence_condition(names)
        budget = self.budget
        if self.target_delta is None:
            self.target_delta = budget[1] if budget is not None and budget[1] > 0 else 1e-6
        self.target_delta = check_float(self.target_delta, "target_delta", "solve", 0.0, 1.0, closed="left")
        self.erm = None
        try:
            self.erm = [erm_constants(a) for a in agents]
        except DeclarationError:
            if self.privacy is not None:
                raise
        if self.privacy is not None:
            from ...privacy.checks import check_public_initial

            check_public_initial(agents)
            self.alpha1 = self.privacy.alphas(names)
            if self.recycling:
                check_bound_condition(self.erm, self.eta_of(1), self.V, names, weight_name="eta_i(1)", owner=owner)
            else:
                check_bound_condition(self.erm, algorithm.thetas(names), self.V, names, weight_name="theta",
                                      owner=owner)
        offsets = np.cumsum([0] + [self.sizes[k] for k in sorted(self.sizes)])
        self.shared_idx = {k: np.arange(offsets[j], offsets[j + 1]) for j, k in enumerate(sorted(self.sizes))}

    @property
    def rounds(self) -> int:
        return self.algorithm.rounds

    def config(self) -> dict[str, Any]:
        return {"target_delta": self.target_delta, "graph": describe_graph(self.topo.graph),
                "degrees": self.V.tolist(), "shared_sizes": self.sizes,
                "erm": [c.to_dict() for c in self.erm] if self.erm is not None else None}

    def node_specs(self, seeds: Sequence[np.random.SeedSequence]) -> list[NodeSpec]:
        private = self.privacy is not None
        return [NodeSpec(a.name, GraphNode, (a, self.algorithm, int(v), s, self.solvers, private),
                         work=float(a.layout.size))  # the agent's number of variables (public), as in consensus
                for a, v, s in zip(self.agents, self.V, seeds)]

    def start(self, backend: Backend) -> GraphState:
        return GraphState(F=np.array(backend.call("initial"), dtype=float).reshape(len(self.names), self.d))

    def new_ledger(self) -> Any:
        from ...privacy.accounting import PrivacyLedger

        return PrivacyLedger(self.names, target_delta=self.target_delta)

    def ledger_from_dict(self, data: Mapping[str, Any]) -> Any:
        from ...privacy.accounting import PrivacyLedger

        return PrivacyLedger.from_dict(data)

    def notes(self, ledger: Any, backend: Backend) -> None:
        if self.privacy is not None:
            from .mechanism import inexact_solve_note

            ledger.note(inexact_solve_note(backend.call("solver_info")), voids=False)

    # ---------------------------------------------------------------- one iteration
    def plan(self, t: int, state: GraphState) -> RoundPlan:
        from .local import _step_epsilons

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
                step_eps = _step_epsilons(self.erm, alpha, eta, self.V, self.recycling)
                charges = [float(e) for e in step_eps]
            else:
                charges = ["free"] * N
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

    def would_exceed(self, ledger: Any, plan: RoundPlan) -> bool:
        from .mechanism import gamma_step_event

        # the papers' bound is the basic sum of the per-iteration epsilons: the guard compares that total
        return any(ledger.would_exceed(n, gamma_step_event(c), 1, self.budget, accountant="basic")
                   for n, c in zip(self.names, plan.charges) if isinstance(c, float))

    def record(self, ledger: Any, t: int, plan: RoundPlan) -> None:
        for n, c in zip(self.names, plan.charges):
            if c is not None:
                _record_step(ledger, n, t, None if c == "free" else c)

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

    def privacy_row(self, ledger: Any, t: int) -> dict[str, float]:
        worst = max(ledger.spent(n, "basic")[0] for n in self.names)
        row = {"bound_P": worst, "eps_basic": worst}
        if self.accountant == "rdp":
            row["eps_rdp"] = max(ledger.spent(n, "rdp")[0] for n in self.names)
        return row

    def evaluation_row(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
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
    def solution(self, state: GraphState, local: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        mean = state.F.mean(axis=0)
        return {k: mean[idx] for k, idx in self.shared_idx.items()}

    def summary(self, ledger: Any) -> dict[str, Any]:
        from .mechanism import gamma_summary

        summary = gamma_summary(ledger, bound="(32)" if self.recycling else "(26)", pld=self.privacy is not None)
        if self.privacy is None:
            summary["paper_bound"] = None
            summary["worst"]["paper_bound"] = None
        return summary
