"""The consensus family (SPEC §2): LinearizedADMM and ADMM over agents with shared blocks.

The coordinator: ``w = global_update(E z, lambda)`` and ``lambda_p += rho (B_p w - E_p z_p)``; the nodes
(:class:`cvxdp.families.consensus.node.ConsensusNode`) run the J local updates and release ``E_p z_p`` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CvxdpError, DeclarationError, InvalidParameterError, check_float, fail
from ...model import Evaluation, Release, check_declarations, check_public_initial
from ...privacy import PAPER_PRESET
from ...run import FEASIBLE_SETS_PUBLIC, Backend, Charge, Family, NodeSpec, RoundPlan, initial_points_public
from .node import ConsensusNode, RoundMessage
from .params import LinearizedADMM
from .step_sizes import (
    EtaPlan,
    NoiseEta,
    auto_rho_start,
    diagnose,
    next_rho,
    release_noise_std,
)
from .updates import dual_update, global_update, holders, selectors, smallest_weight, take

HISTORY_COLUMNS = ["round", "objective", "consensus_residual", "primal_residual", "dual_residual", "mismatch",
                   "max_violation",
                   "noise_magnitude", "rho", "eta", "solver_time", "fallbacks", "wall_time"]


def _check_privacy(privacy: Any, algorithm: Any) -> None:
    """None, or a mechanism ``algorithm`` accepts (validated); the refusal says what the family runs."""
    if privacy is None:
        return
    if isinstance(privacy, str) or not LinearizedADMM.accepts(privacy):  # a name, or no consensus mechanism
        raise fail("privacy", "solve", "None, cvxdp.ObjectivePerturbation or cvxdp.OutputPerturbation",
                   type(privacy).__name__)
    privacy.validate()
    if not algorithm.accepts(privacy):
        raise InvalidParameterError(f"{type(algorithm).__name__} is the non-private baseline (it runs no mechanism; "
                                    f"got {privacy.short_name}); use cvxdp.LinearizedADMM for a private run, or "
                                    "privacy=None.")


def _default_target_delta(privacy: Any, budget: tuple[float, float] | None, steps: int) -> float:
    if budget is not None and budget[1] > 0:
        return budget[1]
    delta = privacy.delta if privacy is not None else None
    if delta:
        return float(min(delta if privacy.scope == "total" else delta * steps, 0.5))
    return 1e-6


def penalty_weights(agents: Sequence[Any], offsets: Mapping[str, int], size: int) -> np.ndarray | None:
    """The declared relative penalty weight of every global coordinate (``Agent(rho_scale=...)``), or None when
    no agent declares any. Holders of one key must agree; a mismatch raises a DeclarationError naming both."""
    if not any(a.rho_scale for a in agents):
        return None
    weights = np.ones(size)
    owner: dict[str, tuple[str, np.ndarray]] = {}
    for agent in agents:
        for key in agent.layout.shared:
            mine = agent.rho_weights(key)
            if key in owner and not np.array_equal(owner[key][1], mine):
                raise DeclarationError(
                    f"Agents {owner[key][0]!r} and {agent.name!r} declare different rho_scale weights for the "
                    f"shared key {key!r} ({owner[key][1].tolist()} vs {mine.tolist()}); holders of a key must "
                    "declare the same weights (or none).")
            owner[key] = (agent.name, mine)
            weights[offsets[key]:offsets[key] + mine.size] = mine
    return weights


def relaxed_targets(w: np.ndarray, previous: Sequence[np.ndarray], gidx: Sequence[np.ndarray | slice],
                    relaxation: float) -> list[np.ndarray]:
    """Each agent's target ``a B_p w + (1 - a) E_p z_p`` (over-relaxation, Boyd et al. §3.4.3, with ``E_p z_p``
    the agent's previous released copy); ``B_p w`` itself when ``a == 1``. The agent's prox step and its dual
    update both use it, and so does the aggregator's copy of the dual. An index ``slice(None)``
    (:func:`~cvxdp.families.consensus.updates.selectors`) takes a copy of ``w`` instead of a gather."""
    if relaxation == 1.0:
        return [take(w, g) for g in gidx]
    return [relaxation * w[g] + (1.0 - relaxation) * ez for g, ez in zip(gidx, previous)]


def _copy_sums(shared: Sequence[np.ndarray], gidx: Sequence[np.ndarray | slice], size: int, *,
               squares: bool = False, count: float | np.ndarray | None = None,
               ) -> tuple[np.ndarray, np.ndarray | None, float | np.ndarray]:
    """Per global coordinate: the sum of the released copies, of their squares (when asked) and their number
    (:func:`~cvxdp.families.consensus.updates.holders`: given, or computed here). An agent whose indices are
    ``slice(None)`` (every coordinate in order) adds with whole-array additions: the same sums, in the same agent
    order, as the scatter."""
    total = np.zeros(size)
    sq = np.zeros(size) if squares else None
    square = np.empty(size) if squares else None  # each copy's squares, in one reused array
    for ez, idx in zip(shared, gidx):
        if isinstance(idx, slice):
            total += ez
            if sq is not None:
                sq += np.multiply(ez, ez, out=square)
            continue
        np.add.at(total, idx, ez)
        if sq is not None:
            np.add.at(sq, idx, ez * ez)
    return total, sq, holders(gidx, size) if count is None else count


def copies_mismatch(shared: Sequence[np.ndarray], gidx: Sequence[np.ndarray | slice], size: int,
                    count: float | np.ndarray | None = None) -> float:
    """How far the agents' released copies of each shared coordinate disagree with each other.

    The l2 norm, over every shared coordinate ``k`` and every ordered pair ``(p, q)`` of its holders, of
    ``(E_p z_p)_k - (E_q z_q)_k``: PowerModelsADA's consensus mismatch as its ``calc_mismatch!`` computes it
    by default (each area compares its copy with every neighbour's). Its ADMM (v0.1.1 on) passes
    ``central=true`` and compares each copy with the mean of the pair, which gives half of this value. Unlike
    ``primal_residual`` (``||B w - E z||``, the distance to the target the round started from) it does not move
    with the dual term of ``w``. Reads released values only. ``count``: the holders of each coordinate
    (:func:`~cvxdp.families.consensus.updates.holders`; computed when None).
    """
    total, squares, count = _copy_sums(shared, gidx, size, squares=True, count=count)
    # sum over ordered pairs of (a_p - a_q)^2 = 2 n sum a_p^2 - 2 (sum a_p)^2
    pairs = 2.0 * count * squares - 2.0 * total * total
    return math.sqrt(max(float(np.sum(np.maximum(pairs, 0.0))), 0.0))


def dual_residual(rho: float | np.ndarray, w: np.ndarray, w_prev: np.ndarray, all_gidx: np.ndarray,
                  stacked: np.ndarray | None = None) -> float:
    """``||rho B (w - w_prev)||`` with ``B`` stacking every agent's copy of the global coordinates (``all_gidx``:
    the agents' global indices concatenated): one global vector, then a gather, so O(P) per round. ``stacked``
    (a work array of ``len(all_gidx)`` entries, only when every agent holds every coordinate in order, so that
    ``all_gidx`` is ``P`` copies of ``0..n-1``) receives the ``P`` copies by whole-array copies instead of a gather:
    the same vector, so the same norm."""
    move = rho * (w - w_prev)
    if stacked is None:
        return float(np.linalg.norm(move[all_gidx]))
    np.copyto(stacked.reshape(-1, move.size), move)
    return float(np.linalg.norm(stacked))


def copies_mean(shared: Sequence[np.ndarray], gidx: Sequence[np.ndarray | slice], size: int,
                count: float | np.ndarray | None = None) -> np.ndarray:
    """The mean of the agents' released copies of every shared coordinate (exact ADMM's polishing target)."""
    total, _, count = _copy_sums(shared, gidx, size, count=count)
    total /= np.maximum(count, 1.0)  # in place: the same quotients
    return total


@dataclass
class ConsensusState:
    """The aggregator's side of a consensus run (part of the checkpoint)."""

    ez: list[np.ndarray]
    lam: list[np.ndarray]
    rho_prev: float | None = None
    primal: float = 0.0
    dual: float = 0.0
    mismatch: float = math.inf
    first_mismatch: float = math.inf  # the copies' mismatch after round 1 (exact ADMM's polish gate compares with it)
    w_prev: np.ndarray | None = None
    weights: np.ndarray | None = None  # current per-coordinate penalty weights (declared, then per-block adapted)
    noise_eta: NoiseEta | None = None  # private runs with eta="auto": eta multipliers grown from released moves
    polished: tuple[int, np.ndarray] | None = None  # exact ADMM: the last round every polish was feasible, its mean
    polish_complete: bool = False  # whether the last attempted polish was feasible for every agent
    polish_failures: int = 0  # consecutive attempted polishes that were not (ADMM.polish_gap backs off after them)
    polish_next: int = 1  # the next round that polishes


#: The declared bounds of a private consensus run (a public assumption)
CONSENSUS_BOUNDS = ("the bounds each agent declares are public and true: its gradient sensitivity (under its declared "
                    "relation), its curvature bound L_p (eta/rho 'auto', OutPert's weights) and its penalty weights "
                    "rho_scale; the noise and the step sizes are set from them and nothing checks them against the data")


class ConsensusFamily(Family):
    """LinearizedADMM / ADMM on the round loop (see the module docstring)."""

    history_order = tuple(HISTORY_COLUMNS[:-1])
    agent_order = ("round", "agent", "objective", "violation", "residual", "noise_magnitude", "solver_time",
                   "compute_time", "solver", "fallbacks")

    def __init__(self, algorithm: Any, agents: Sequence[Any], **kwargs: Any) -> None:
        super().__init__(algorithm, agents, **kwargs)
        privacy, accountant = self.privacy, self.accountant
        _check_privacy(privacy, algorithm)
        self.sizes = check_declarations(agents, private=False)
        if privacy is not None:
            check_public_initial(agents)
            for agent in agents:  # fails fast, naming the agent, when its sensitivity is missing
                privacy.noise_plan(agent, min_weight=1.0, separable=True, steps=1, accountant=accountant)
        keys = sorted(self.sizes)
        self.keys = keys
        self.offsets = dict(zip(keys, np.cumsum([0] + [self.sizes[k] for k in keys])[:-1].tolist()))
        self.n_global = int(sum(self.sizes.values()))
        self.gidx = [np.concatenate([self.offsets[k] + np.arange(len(a.layout.shared[k]))
                                     for k in sorted(a.layout.shared)]) for a in agents]
        self.all_gidx = np.concatenate(self.gidx) if self.gidx else np.zeros(0, dtype=int)  # B of the whole run
        self.gsel = selectors(self.gidx, self.n_global)  # slice(None) for an agent holding every coordinate
        self.count = holders(self.gsel, self.n_global)  # each coordinate's holders (a float: every agent holds all)
        # the dual residual's P stacked copies of the global move: a work array when every agent holds every
        # coordinate (whole-array copies instead of a gather), else the gather over all_gidx
        self._stacked = np.empty(self.all_gidx.size) if np.ndim(self.count) == 0 and self.gidx else None
        # per-block penalties: exact ADMM with rho="auto" and public weights declared by the agents
        self.algorithm = algorithm = algorithm.resolved(privacy.epsilon if privacy is not None else None)
        blocks = algorithm.auto_blocks
        self.blocks = blocks if blocks is not None and algorithm.rho_is_auto else None
        self.weights = penalty_weights(agents, self.offsets, self.n_global) if self.blocks is not None else None
        self.J = algorithm.local_updates
        self.steps = algorithm.rounds * self.J
        self.target_delta = _default_target_delta(privacy, self.budget, self.steps) if self.target_delta is None \
            else check_float(self.target_delta, "target_delta", "solve", 0.0, 1.0)
        if privacy is not None and privacy.sensitivity == "paper":
            self.notes.append((PAPER_PRESET, True, True))
        self.infos: list[dict[str, Any]] = []
        self._plans: dict[int, tuple[float, Any]] = {}  # agent -> (min weight, its noise plan)

    def config(self) -> dict[str, Any]:
        out = {"target_delta": self.target_delta, "shared_sizes": self.sizes}
        if self.weights is not None:  # declared per-block penalties (public); part of the fingerprint
            out["rho_scale"] = {k: self.weights[o:o + self.sizes[k]].tolist() for k, o in self.offsets.items()
                                if not np.all(self.weights[o:o + self.sizes[k]] == 1.0)}
        return out

    def penalty(self, rho: float, state: ConsensusState) -> float | np.ndarray:
        """rho of every global coordinate: the scalar, or ``rho * weights`` with declared ``rho_scale``."""
        return rho if state.weights is None else rho * state.weights

    def nodes(self) -> list[NodeSpec]:
        # each node calibrates its own noise from the mechanism and the accountant (the plans here are the same numbers,
        # for the coordinator's copy of the ledger); work: the agent's number of variables (a shape, public), for
        # backends that balance nodes per worker
        return [NodeSpec(a.name, ConsensusNode, (self.algorithm, self.solvers, self.privacy, self.accountant),
                         work=float(a.layout.size)) for a in self.agents]

    def start(self, declarations: Sequence[Mapping[str, Any]]) -> ConsensusState:
        self.infos = list(declarations)
        if self.privacy is not None:  # the public assumptions the guarantee relies on (non-voiding ledger notes)
            self.assume(FEASIBLE_SETS_PUBLIC)
            defaults = [a.name for a in self.agents if not a.initial]
            if defaults:
                self.assume(f"the initial copy E_p z_p(0) of {', '.join(map(repr, defaults))} is the projection of 0 "
                            "onto W_p (exact ADMM: of the minimiser over W_p) and is sent before round 1, unaccounted "
                            "(public because W_p is)")
            starts = [a.name for a in self.agents if a.initial]
            if starts:
                self.assume(initial_points_public(starts))
            self.assume(CONSENSUS_BOUNDS)
        # eta per agent when eta="auto" (declared public bounds in private runs; cvxdp.families.consensus.step_sizes)
        self.eta_plan = EtaPlan.start(self.algorithm, self.names, [d["curvature"] for d in declarations],
                                      private=self.privacy is not None)
        # rho="auto" of LinearizedADMM starts at the agents' curvature scale when that is below 1 (public in a
        # private run: the eta plan reads declared bounds only)
        self.rho_schedule = (auto_rho_start(self.algorithm.rho_schedule, self.eta_plan)
                             if self.algorithm.rho_is_auto else self.algorithm.rho_schedule)
        return ConsensusState(ez=[d["shared"] for d in declarations], lam=[np.zeros(len(g)) for g in self.gidx],
                              weights=None if self.weights is None else self.weights.copy(),
                              noise_eta=NoiseEta.start(len(self.agents)) if self._grows_eta() else None)

    def _grows_eta(self) -> bool:
        """Whether eta grows with the noise (:mod:`cvxdp.families.consensus.step_sizes`): a private run with ``eta="auto"``."""
        auto = self.algorithm.auto_eta
        return self.privacy is not None and auto is not None and auto.noise_growth > 1.0

    def etas(self, t: int, state: ConsensusState) -> list[float]:
        """eta of each agent in round ``t``: the plan's, times the noise multipliers of a private auto run."""
        etas = self.eta_plan.at(t)
        noise_eta = state.noise_eta
        return etas if noise_eta is None else [e * float(m) for e, m in zip(etas, noise_eta.scale)]

    # ---------------------------------------------------------------- one round
    def plan(self, t: int, state: ConsensusState) -> RoundPlan:
        alg, privacy = self.algorithm, self.privacy
        rho = next_rho(self.rho_schedule, t, state, self.gidx)  # rho="auto": relative released residuals
        etas = self.etas(t, state)  # one eta per agent
        eta = max(etas)
        rho_g = self.penalty(rho, state)
        w = global_update(state.ez, state.lam, self.gsel, self.n_global, rho_g, self.count)
        plans: list[Any] = [None] * len(self.agents)
        released: dict[str, Any] = {"rho": rho, "eta": eta}
        if privacy is not None:
            for p, (agent, info) in enumerate(zip(self.agents, self.infos)):
                min_c = smallest_weight(etas[p], rho, info["size"] > info["shared_size"])
                plans[p] = self._noise_plan(p, agent, min_c, info["is_box"])
            released["noise_scale"] = float(np.mean([plan.scale for plan in plans]))
        placement = privacy.placement if privacy is not None else None
        relaxation = alg.relaxation_at(t)
        targets = relaxed_targets(w, state.ez, self.gsel, relaxation)
        rhos = [rho] * len(self.gidx) if state.weights is None else [rho_g[g] for g in self.gidx]
        polish = alg.polish and t >= state.polish_next and alg.polish_pays(state.mismatch, state.first_mismatch)
        mean = copies_mean(state.ez, self.gsel, self.n_global, self.count) if polish else None
        keep = state.polish_complete
        messages = [RoundMessage(round=t, bw=bw, rho=r, eta=e, plan=plan, placement=placement,
                                 polish=None if mean is None else mean[g], keep_polish=keep)
                    for bw, r, plan, e, g in zip(targets, rhos, plans, etas, self.gidx)]
        charges = [None if plan is None else Charge(plan.dp_event(), (plan.epsilon, plan.delta), self.J)
                   for plan in plans]
        return RoundPlan(messages=messages, charges=charges, released=released,
                         context=(w, targets, rhos, mean, plans))

    def _noise_plan(self, p: int, agent: Any, min_weight: float, separable: bool) -> Any:
        """Agent ``p``'s noise plan for the smallest projection weight ``min_weight``: calibrated again only when that
        weight changes (the mechanism, the agent's declarations, the steps and the accountant are fixed for the run)."""
        cached = self._plans.get(p)
        if cached is None or cached[0] != min_weight:
            plan = self.privacy.noise_plan(agent, min_weight=min_weight, separable=separable, steps=self.steps,
                                           accountant=self.accountant)
            cached = self._plans[p] = (min_weight, plan)
        return cached[1]

    def aggregate(self, t: int, plan: RoundPlan, releases: Sequence[Release], state: ConsensusState
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        (w, targets, rhos, mean, noise_plans), rho = plan.context, plan.released["rho"]
        res_sq, consensus, agent_rows = 0.0, 0.0, []
        # without over-relaxation each target B_p w holds w's values, so the residual B_p w - E_p z_p is the dual
        # update's first step: it continues from it (rho r + lambda, in place: the same operations, so the same
        # numbers as dual_update) instead of subtracting again
        plain = self.algorithm.relaxation_at(t) == 1.0
        for p, rel in enumerate(releases):
            r = w[self.gsel[p]] - rel["ez"]
            sq = float(r @ r)
            residual = math.sqrt(sq)  # what np.linalg.norm(r) computes, from the one dot product
            consensus += residual
            res_sq += sq
            if plain:
                r *= rhos[p]
                r += state.lam[p]
                state.lam[p] = r
            else:
                state.lam[p] = dual_update(state.lam[p], rhos[p], targets[p], rel["ez"])  # as the agent does
            agent_rows.append({"residual": residual})
        if state.noise_eta is not None:  # released copies and public noise scales only
            privacy = self.privacy
            stds = [release_noise_std(c.scale, privacy.noise, privacy.placement, m.eta + float(np.mean(r)))
                    for c, m, r in zip(noise_plans, plan.messages, rhos)]
            state.noise_eta.observe(state.ez, [rel["ez"] for rel in releases], stds,
                                    remaining=self.algorithm.rounds - t, growth=self.algorithm.auto_eta.noise_growth)
        state.ez = [rel["ez"] for rel in releases]
        mismatch = state.mismatch = copies_mismatch(state.ez, self.gsel, self.n_global, self.count)
        if t == 1:
            state.first_mismatch = mismatch
        state.primal = math.sqrt(res_sq)
        state.dual = dual_residual(self.penalty(rho, state), w, state.w_prev, self.all_gidx, self._stacked) \
            if state.w_prev is not None else math.inf
        if state.weights is not None and state.w_prev is not None:  # per-block balance (released values only)
            state.weights = self.blocks.update(t, state.weights, self.weights, rho=rho, w=w, w_prev=state.w_prev,
                                               shared=state.ez, duals=state.lam, gidx=self.gidx)
        state.w_prev, state.rho_prev = w, rho
        row = {"consensus_residual": consensus, "primal_residual": state.primal, "dual_residual": state.dual,
               "mismatch": mismatch}
        if mean is not None:  # one released bit per agent: its polish of the previous round's mean was feasible
            state.polish_complete = all(float(rel["polished"][0]) == 1.0 for rel in releases)
            state.polish_failures = 0 if state.polish_complete else state.polish_failures + 1
            state.polish_next = t + self.algorithm.polish_gap(state.polish_failures)
            if state.polish_complete:
                state.polished = (t, mean)
            row["polished"] = float(state.polish_complete)
        elif self.algorithm.polish:
            row["polished"] = math.nan  # not attempted this round
        return row, agent_rows

    def evaluate(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        norms = [x for ev in evaluations for x in ev.lists["noise_norms"]]
        row = {"objective": sum(ev.values["objective"] for ev in evaluations),
               "max_violation": max(ev.values["violation"] for ev in evaluations),
               "noise_magnitude": float(np.mean(norms)) if norms else 0.0,
               "solver_time": sum(ev.values["solver_time"] for ev in evaluations),
               "fallbacks": sum(len(ev.lists["fallbacks"]) for ev in evaluations)}
        if all("polished_objective" in ev.values for ev in evaluations):  # NaN unless every polish was feasible
            row["polished_objective"] = float(sum(ev.values["polished_objective"] for ev in evaluations))
        agents = []
        for ev in evaluations:
            own = ev.lists["noise_norms"]
            agents.append({"objective": ev.values["objective"], "violation": ev.values["violation"],
                           "noise_magnitude": float(np.mean(own)) if own else 0.0,
                           "solver_time": ev.values["solver_time"], "compute_time": ev.values["compute_time"],
                           "solver": ev.labels["solver"], "fallbacks": ";".join(ev.lists["fallbacks"])})
        return row, agents

    def converged(self, t: int, state: ConsensusState, row: Mapping[str, Any]) -> bool:
        """Both residuals below ``tol_primal`` and ``tol_dual``, or the copies' mismatch below ``tol_mismatch``
        (released values only)."""
        alg = self.algorithm
        if alg.tol_mismatch is not None and state.mismatch <= alg.tol_mismatch:
            return True
        return (alg.tol_primal is not None and alg.tol_dual is not None
                and state.primal <= alg.tol_primal and state.dual <= alg.tol_dual)

    # ---------------------------------------------------------------- the end
    def solution(self, state: ConsensusState) -> dict[str, np.ndarray]:
        rho = state.rho_prev if state.rho_prev is not None else self.rho_schedule(1)
        w = global_update(state.ez, state.lam, self.gsel, self.n_global, self.penalty(rho, state), self.count)
        return {k: w[self.offsets[k]:self.offsets[k] + self.sizes[k]] for k in self.keys}

    def _polished(self, state: ConsensusState, backend: Backend) -> dict[str, Any] | None:
        """Exact ADMM's polished point (:attr:`cvxdp.Result.polished`): the round, the mean of the copies the
        agents fixed their shared blocks to (public) and their polished local solutions (private)."""
        polished = state.polished
        if polished is None:
            return None
        t, mean = polished
        solution = {k: mean[self.offsets[k]:self.offsets[k] + self.sizes[k]].copy() for k in self.keys}
        if not self.simulation:  # the polished local solutions are private: they stay with the parties
            return {"round": t, "solution": solution}
        answers = backend.call(ConsensusNode.polished, [(bool(state.polish_complete),) for _ in self.names])
        if any(a is None or a[0] != t for a in answers):  # the nodes must hold the round the server recorded
            raise CvxdpError(f"The agents' polished solutions do not belong to round {t}: "
                             f"{[None if a is None else a[0] for a in answers]}.")
        return {"round": t, "solution": solution, "local": {n: a[1] for n, a in zip(self.names, answers)}}

    def finish(self, result: Any, state: ConsensusState, backend: Backend) -> None:
        result.polished = self._polished(state, backend)
        if state.weights is not None:  # the per-block penalty weights the run ended with
            result.config["rho_blocks"] = {f"{v:g}": float(state.weights[self.weights == v][0])
                                           for v in np.unique(self.weights)}
        if self.rho_schedule is not self.algorithm.rho_schedule:  # rho="auto" started below 1 (auto_rho_start)
            result.config["rho_start"] = float(self.rho_schedule.start)
        described = self.eta_plan.describe()
        if described is not None:
            if state.noise_eta is not None:  # the eta each agent ended with
                for row, m in zip(described.values(), state.noise_eta.scale):
                    row.update(noise_growth=float(m), final_eta=row["eta"] * float(m))
            result.config["eta_per_agent"] = described
        # divergence / stagnation, read from released residuals only; the warning names the agent
        # stacklevel 5: diagnose <- finish <- run_loop <- solve <- the caller of cvxdp.solve
        diagnose(result.history, result.agent_history, stop_reason=result.stop_reason, algorithm=self.algorithm,
                 etas=self.etas(self.algorithm.rounds, state), constants=self.eta_plan.constants,
                 private=self.privacy is not None, stacklevel=5)
