"""The party side of a consensus run (LinearizedADMM, ADMM): private data, compiled subproblem, generator, copies.

A :class:`ConsensusNode` lives where its party runs (in-process for the serial backend, a Ray actor, or the
party's own machine). Its ``step`` returns a :class:`~cvxdp.model.node.Release` holding the shared block
``E_p z_p`` only (and exact ADMM's one polish bit); values computed on the agent's private data (objective,
constraint violation, the actual noise norms, solver names, timings and fallbacks) come only from
:meth:`ConsensusNode.evaluate` (:class:`~cvxdp.model.node.Evaluation`), which the loop calls only when evaluation
is on. It imports the party's side of cvxdp only (:mod:`cvxdp.model`, :mod:`cvxdp.privacy`, its family's
parameters and update math), never coordinator code.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import PartyRefusedError, SlowGradientWarning
from ...model import (
    DEFAULT_SOLVERS,
    Agent,
    Evaluation,
    Node,
    ProxSolver,
    Release,
    compile_projection,
    compiled_metrics,
    lipschitz_constants,
    set_verdict,
)
from ...privacy import check_plan_matches
from .updates import StepWork, dual_update, linearized_updates, smallest_weight, take, whole_range

if TYPE_CHECKING:  # annotations only
    from .params import ConsensusAlgorithm

#: a run's gradient time (at one agent) must reach this many seconds before it is compared with its solve time
SLOW_GRADIENT_SECONDS = 0.5


@dataclass(frozen=True)
class RoundMessage:
    """Server -> agent: the round, the agent's slice of w, the penalty and the noise plan (or None)."""

    round: int
    bw: np.ndarray
    rho: float
    eta: float
    plan: object | None = None  # cvxdp.privacy.NoisePlan
    placement: str | None = None
    #: exact ADMM's consensus polishing: this agent's slice of the mean of the copies released in the round
    #: before (public; None: no polish this round), and whether every agent's last attempted polish was feasible
    #: (keep it)
    polish: np.ndarray | None = None
    keep_polish: bool = False


class ConsensusNode(Node):
    """Holds one agent's state and runs its local step; see :class:`RoundMessage` and the module docstring.

    Parameters
    ----------
    agent : cvxdp.Agent
    seed : numpy.random.SeedSequence
        The node's own entropy (its generator is never reseeded).
    algorithm : LinearizedADMM or ADMM
    solvers : tuple of str
        The local solver chain.
    mechanism : cvxdp.ObjectivePerturbation, cvxdp.OutputPerturbation or None
        The node's own privacy mechanism (in a federation: the party's own policy). It decides everything about the
        noise: the node calibrates its plan from its own declared sensitivity (:meth:`plan`) and a message's plan is
        only compared with it. None: a non-private node. Private nodes read only declared curvature bounds.
    accountant : {"pld", "rdp", "basic"}
        How ``calibrate="total"`` spreads the mechanism's total over the run's ``rounds x local_updates`` calls.
    """

    def __init__(self, agent: Agent, seed: np.random.SeedSequence, algorithm: ConsensusAlgorithm,
                 solvers: tuple[str, ...] = DEFAULT_SOLVERS, mechanism: Any = None, accountant: str = "pld") -> None:
        self.agent = agent
        self.name = agent.name
        self.algorithm = algorithm
        # the party's own privacy policy: its noise is calibrated here, from its own declarations, whatever a message
        # says (a message's plan is only compared with it); None: a non-private node
        self.mechanism = mechanism
        self.accountant = accountant
        self.steps = algorithm.rounds * algorithm.local_updates  # the run's calls per agent (calibrate="total")
        self._plans: tuple[float, Any] | None = None  # (min weight, the noise plan calibrated for it)
        private = mechanism is not None
        curvature = algorithm.needs_curvature(private)
        self.rng = np.random.default_rng(seed)
        self.sidx = agent.layout.shared_indices
        # one canonicalization per agent and data (cached across runs) serves the projection, the checks and the
        # initial point: of W_p (LinearizedADMM), of min f_p s.t. W_p (exact ADMM: the prox step too)
        exact = algorithm.exact
        self.projection = compile_projection(agent, solvers=solvers, exact=exact)
        if self.projection.is_box:  # emptiness and boundedness read off the bounds
            agent.check_box(self.projection.lo, self.projection.hi)
        else:  # raw Clarabel solves on the same compiled data
            set_verdict(agent, self.projection.data)  # cached: check_feasible reads it
            agent.check_feasible()
        self.prox = ProxSolver(agent, solvers=solvers) if exact else None
        if agent.initial is not None:
            self.z = agent.layout.flatten(agent.initial)
        else:
            n = agent.layout.size
            self.z, _ = self.projection.project(np.zeros(n), np.ones(n), round=0)
        self.lam = np.zeros(self.sidx.size)
        # the local step's selection of the shared coordinates: all of them in order is a slice (no gather)
        self._sel = slice(None) if whole_range(self.sidx, agent.layout.size) else self.sidx
        self._last: tuple[list[float], list, float] = ([], [], 0.0)  # the last step's diagnostics (private)
        # L_p for eta: the declared public bound (private runs), or the smaller of it and an estimate at the start;
        # an explicit eta is only checked against L_p: a declared bound serves as it is (nothing is estimated), and
        # an agent on CVXPY's Expression.grad is not estimated either (the ~51 gradient calls of the estimate cost
        # ~0.3 s each there; the end-of-run diagnosis still reads the released residuals)
        explicit = algorithm.auto_eta is None
        self.curvature = lipschitz_constants([agent], [self.z.copy()], private=private, prefer_declared=explicit,
                                             estimate=not (explicit and self._cvxpy_gradient))[0] \
            if curvature else None
        # consensus polishing (exact ADMM): this round's polished point and the last one every agent completed
        # (private local solutions: they leave the node only through :meth:`polished`, at the end of a run)
        self.pending: tuple[int, np.ndarray | None] | None = None
        self.kept: tuple[int, np.ndarray] | None = None
        # local wall time of this run's gradient calls and local solves (LinearizedADMM): a warning, once, when the
        # gradients cost more (timings stay at the party; the warning says nothing about the data)
        self.timing = {"gradient": 0.0, "solve": 0.0, "warned": False}

    @cached_property
    def metrics(self) -> Any:
        """The per-round objective and violation (:func:`cvxdp.model.compiled_metrics`), built on first use: a run
        that never evaluates (``evaluate=False``) never builds them."""
        return compiled_metrics(self.agent)

    def declare(self) -> dict:
        """Public: the local size, the shared size, whether the set is a box, the curvature bound ``L_p`` (a
        :class:`~cvxdp.model.curvature.Curvature` or None) and the initial copy ``E_p z_p`` (the agent's public
        ``initial``, or the projection of 0 onto its feasible set, treated as public)."""
        return {"name": self.name, "size": self.agent.layout.size, "shared_size": int(self.sidx.size),
                "is_box": self.projection.is_box, "curvature": self.curvature, "shared": self.z[self.sidx].copy()}

    def step(self, msg: RoundMessage) -> Release:
        start = time.perf_counter()
        if self.prox is not None:
            z, report = self.prox.solve(msg.bw + self.lam / msg.rho, msg.rho, round=msg.round)
            norms, reports = [], [report]
            if msg.keep_polish and self.pending is not None and self.pending[1] is not None:
                self.kept = self.pending  # every agent's last attempted polish was feasible
            if msg.polish is not None:
                x, _ = self.prox.polish(msg.polish, round=msg.round)  # its time counts in compute_time
                self.pending = (msg.round, x)
        else:
            project = lambda v, c: self.projection.project(v, c, round=msg.round)  # noqa: E731
            grad = self._gradient(msg)
            if self._cvxpy_gradient:  # only CVXPY's Expression.grad can warn: time it (nothing else is timed)
                grad = self._timed(grad)
            plan = self.plan(msg)
            z, norms, reports = linearized_updates(
                self.z, grad=grad, project=project, sidx=self._sel, bw=msg.bw, lam=self.lam,
                rho=msg.rho, eta=msg.eta, J=self.algorithm.local_updates, perturb=self._perturber(plan),
                placement=self.placement, grad_point=self._grad_point(msg), work=self._work)
            if self._cvxpy_gradient:
                self.timing["solve"] += sum(r.seconds for r in reports)
                self._warn_slow_gradient()
        self.z = z
        ez = take(z, self._sel)  # a new array: the release never aliases the node's state
        self.lam = dual_update(self.lam, msg.rho, msg.bw, ez)
        self._last = (norms, reports, time.perf_counter() - start)
        if msg.polish is None:
            return Release(self.agent.name, msg.round, {"ez": ez})
        # one bit leaves with the copy: whether the shared block fixed to the public mean was feasible here
        feasible = np.array([float(self.pending[1] is not None)])
        return Release(self.agent.name, msg.round, {"ez": ez, "polished": feasible})

    @property
    def placement(self) -> str | None:
        """Where this node's noise goes: "objective" (ObjPert), "output" (OutPert) or None (non-private)."""
        return None if self.mechanism is None else self.mechanism.placement

    def plan(self, msg: RoundMessage) -> Any:
        """This node's own noise plan for the round of ``msg`` (None: non-private): its mechanism calibrated to its own
        declared sensitivity at the step's smallest weight ``min(c)`` (from the message's public eta and rho), the
        run's steps and its own accountant. Calibrated again only when ``min(c)`` changes."""
        if self.mechanism is None:
            return None
        min_c = smallest_weight(msg.eta, float(np.min(msg.rho)), self.agent.layout.size > self.sidx.size)
        cached = self._plans
        if cached is None or cached[0] != min_c:
            plan = self.mechanism.noise_plan(self.agent, min_weight=min_c, separable=self.projection.is_box,
                                             steps=self.steps, accountant=self.accountant)
            cached = self._plans = (min_c, plan)
        return cached[1]

    def charge(self, msg: RoundMessage) -> tuple[Any, tuple[float, float], int] | None:
        """J calls of this node's own noise plan (:meth:`plan`). The message's plan (the coordinator's) is only a
        cross-check: a message that asks for no noise, another mechanism or another noise than the node's own is
        refused (:func:`cvxdp.privacy.check_plan_matches`)."""
        plan = self.plan(msg)
        check_plan_matches(plan, msg.plan, agent=self.name, round=msg.round)
        if plan is None:
            return None
        return plan.dp_event(), (plan.epsilon, plan.delta), self.algorithm.local_updates

    def _gradient(self, msg: RoundMessage):
        """The local gradient of the step: the agent's own (full batch), or, under a subsampled noise plan, a fresh
        Poisson sample of the agent's records at the plan's rate (from this node's generator) with per-example
        gradients clipped to the plan's ``clip_norm`` (:meth:`cvxdp.model.PerExample.gradient`): exactly the
        query the plan's ``PoissonSampledDpEvent`` accounts for."""
        plan = self.plan(msg)
        if plan is None or not plan.sampled:
            return lambda u: self.agent.grad(u, round=msg.round)
        pe = self.agent.per_example
        if pe is None:
            raise PartyRefusedError(f"Agent {self.name!r} refuses round {msg.round}: the noise plan is subsampled "
                                    f"(rate {plan.sampling_rate:g}) but the agent declares no per-example gradients.",
                                    party=self.name, round=msg.round, reason="sampling")
        rng, q, clip = self.rng, plan.sampling_rate, plan.clip_norm
        return lambda u: pe.gradient(u, rng, q, clip)

    def polished(self, latest: bool) -> tuple[int, np.ndarray] | None:
        """The polished local solution (round, flat u) that the run returns: this round's when ``latest`` (every
        agent's polish of it was feasible), else the last one kept; None if there is none."""
        if latest and self.pending is not None and self.pending[1] is not None:
            return self.pending[0], self.pending[1].copy()
        return None if self.kept is None else (self.kept[0], self.kept[1].copy())

    def evaluate(self, round: int) -> Evaluation:
        """Non-private evaluation of the last step on this agent's data (never part of a release)."""
        norms, reports, compute_time = self._last
        z = self.z
        values = {"objective": self.metrics.objective(z, round=round), "violation": self.metrics.violation(z),
                  "solver_time": sum(r.seconds for r in reports), "compute_time": compute_time}
        if self.pending is not None and self.pending[0] == round:  # the polished point's cost (NaN: infeasible)
            x = self.pending[1]
            values["polished_objective"] = math.nan if x is None else self.metrics.objective(x, round=round)
        return Evaluation(
            self.agent.name, round,
            values=values,
            lists={"noise_norms": tuple(norms), "fallbacks": tuple(f for r in reports for f in r.fallbacks)},
            labels={"solver": "+".join(sorted({r.solver for r in reports}))})

    @cached_property
    def _work(self) -> StepWork:
        """The local step's work arrays, kept from round to round (:class:`~.updates.StepWork`; no state: the
        numbers are the same without them)."""
        return StepWork()

    @cached_property
    def _cvxpy_gradient(self) -> bool:
        """Whether this agent's gradient is CVXPY's ``Expression.grad`` (no ``gradient=``, no compiled gradient)."""
        return self.agent.gradient is None and self.agent.compiled_gradient is None

    def _timed(self, gradient):
        """``gradient`` with its wall time added to ``timing["gradient"]``."""
        timing = self.timing

        def grad(u: np.ndarray) -> np.ndarray:
            t0 = time.perf_counter()
            g = gradient(u)
            timing["gradient"] += time.perf_counter() - t0
            return g
        return grad

    def _warn_slow_gradient(self) -> None:
        """Once per run: a :class:`~cvxdp.errors.SlowGradientWarning` when this agent's gradient is CVXPY's
        ``Expression.grad`` (no ``gradient=`` and an atom the compiled gradient does not cover) and has taken more
        than :data:`SLOW_GRADIENT_SECONDS` and more time than its local solves. A user's or a compiled gradient
        never warns: a box agent's local solve is a clip, so its gradient always costs more, and nothing faster
        is at hand."""
        t = self.timing
        if t["warned"] or t["gradient"] < SLOW_GRADIENT_SECONDS or t["gradient"] <= t["solve"]:
            return
        t["warned"] = True
        warnings.warn(SlowGradientWarning(
            f"Agent {self.name!r}: this run has spent {t['gradient']:.2f} s computing gradients and {t['solve']:.2f} s "
            "in local solves; its objective uses an atom the compiled gradient does not cover (see "
            "docs/own-agent.md), so CVXPY's Expression.grad runs at every call: pass gradient= (a numpy function of "
            "the flat local vector) or write the objective with the covered atoms.", agent=self.name), stacklevel=2)

    def _grad_point(self, msg: RoundMessage):
        """Private runs: where the gradient is taken, ``Proj_W(u)`` (SPEC §2.1: the sensitivity holds on W).

        A box is a clip (the identity on W, so ObjPert's iterates are unchanged bit for bit); other sets are
        projected (c-weighted, like the update) only under output perturbation, whose noisy outputs leave W — ObjPert's
        iterates are already the outputs of a projection onto W.
        """
        if self.mechanism is None:
            return None
        if self.projection.is_box:
            lo, hi = self.projection.lo, self.projection.hi
            return lambda u, c: (np.clip(u, lo, hi), None)
        if self.placement != "output":
            return None
        return lambda u, c: self.projection.project(u, c, round=msg.round)

    def _perturber(self, plan):
        """``value -> value + xi`` with this agent's own generator (never reseeded)."""
        if plan is None:
            return None
        rng = self.rng
        if plan.noise_source == "opendp":  # the addition itself happens inside OpenDP
            return lambda value: plan.perturb(rng, value)
        return lambda value: value + plan.sample(rng, value.size)

    def local(self) -> np.ndarray:
        return self.z.copy()

    def state(self) -> dict:
        """Everything needed to resume this worker exactly (local copy, dual, generator state)."""
        return {"z": self.z.copy(), "lam": self.lam.copy(), "rng": self.rng.bit_generator.state,
                "pending": self.pending, "kept": self.kept}

    def restore(self, state: dict) -> None:
        self.z = np.asarray(state["z"], dtype=float).copy()
        self.lam = np.asarray(state["lam"], dtype=float).copy()
        self.rng.bit_generator.state = state["rng"]
        self.pending, self.kept = state.get("pending"), state.get("kept")
