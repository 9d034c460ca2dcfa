"""The consensus family's algorithms and their declared parameters (SPEC §2): LinearizedADMM and exact ADMM.

Each parameter is declared once (:class:`cvxdp.params.Param`); validation, messages, ``repr``, the JSON form and the
case-file schema derive from the tables. An algorithm's behaviour is in its class: the consensus family reads
:attr:`ConsensusAlgorithm.exact`, :meth:`~ConsensusAlgorithm.relaxation_at`, :attr:`~ConsensusAlgorithm.polish`,
:attr:`~ConsensusAlgorithm.auto_blocks`, :meth:`~ConsensusAlgorithm.resolved` and the advice its warnings give
(:meth:`~ConsensusAlgorithm.unsettled_advice`, :meth:`~ConsensusAlgorithm.stalled_advice`) and never asks which
algorithm it runs. Constructors only store; :meth:`~ConsensusAlgorithm.resolved` returns a copy with the run's schedules (the
user's object is never changed).
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Any, ClassVar

from ...params import COUNT, OPTIONAL_POSITIVE, Algorithm, Boolean, Check, Interval, Options, Param, param
from ...privacy import Perturbation
from ...privacy import mechanisms as perturbations
from .schedules import (
    AdaptiveRho,
    AutoEta,
    BlockBalance,
    Constant,
    Schedule,
    StepSchedule,
    as_schedule,
    describe,
)


def _schedule(name: str) -> Check:
    """rho / eta: "auto", a positive float, a schedule, a schedule table or a callable (:func:`as_schedule`)."""
    def check(value: Any, pname: str, owner: str) -> None:
        as_schedule(value, pname, owner)

    def to_json(value: Any, obj: Any) -> Any:  # "auto" as what it means for this algorithm (versioned with it)
        return describe(obj.schedule(name, value) if obj is not None else as_schedule(value, name, "schedule"))

    return Check(check, "'auto', a float in (0, inf) or a schedule", to_json)


class ConsensusAlgorithm(Algorithm):
    """What LinearizedADMM and ADMM share: the penalty, the rounds and the stopping tolerances."""

    family = "consensus"
    #: an exact prox step (ADMM) or J linearized updates (LinearizedADMM)
    exact: ClassVar[bool] = False
    #: what rho="auto" means for this algorithm
    auto_rho: ClassVar[Schedule]
    #: rho="auto" with per-block weights declared by the agents (ADMM only)
    auto_blocks: ClassVar[BlockBalance | None] = None
    #: consensus polishing (ADMM's parameter; LinearizedADMM never polishes)
    polish: bool = False
    local_updates: int = 1
    #: set on a :meth:`resolved` copy
    rho_schedule: Schedule | None = None
    eta_schedule: Schedule | None = None

    parameters: ClassVar[dict[str, Param]] = {
        "rho": param(_schedule("rho"), help="penalty rho^t; \"auto\" adapts it to the released residuals; a table "
                     "{kind = constant|linear|geometric|step|residual_balancing|adaptive, ...} is a schedule"),
        "rounds": param(COUNT, help="maximum number of rounds T"),
        "tol_primal": param(*OPTIONAL_POSITIVE, help="stop when the primal residual falls below it (with tol_dual)"),
        "tol_dual": param(*OPTIONAL_POSITIVE, help="stop when the dual residual falls below it (with tol_primal)"),
        "tol_mismatch": param(*OPTIONAL_POSITIVE, help="stop when the copies' mismatch falls below it "
                              "(PowerModelsADA's ADMM rule with tol t: 2 t)"),
    }

    def schedule(self, name: str, value: Any = None) -> Schedule:
        """The schedule of parameter ``name`` ("rho" or "eta"), with "auto" as this algorithm defines it."""
        value = getattr(self, name) if value is None else value
        auto = {"rho": self.auto_rho, "eta": AutoEta()}.get(name)
        return as_schedule(auto if isinstance(value, str) and value == "auto" else value, name, self._owner)

    @property
    def rho_is_auto(self) -> bool:
        return isinstance(self.rho, str) and self.rho == "auto"

    def relaxation_at(self, t: int) -> float:
        """The over-relaxation of round ``t`` (1: none)."""
        return 1.0

    def polish_gap(self, failures: int) -> int:
        """Rounds from a polishing round to the next one (only ADMM polishes)."""
        return 1

    def polish_pays(self, mismatch: float, first_mismatch: float) -> bool:
        """Whether a round polishes, given the copies' mismatch of the round before and of round 1 (only ADMM
        polishes)."""
        return False

    def unsettled_advice(self, rounds: int) -> tuple[str, dict[str, Any]]:
        """What to try after a run of ``rounds`` rounds that has not settled (copies that agree on a point that
        still moves: :func:`cvxdp.families.consensus.step_sizes.unsettled`): the hint's text and the suggested
        settings."""
        return ("more rounds, or rho='auto' (residual balancing) or a smaller rho",
                {"rounds": 2 * rounds, "rho": "auto"})

    def stalled_advice(self, agent: str | None, small_eta: float | None, lipschitz: float | None,
                       needed: float | None) -> tuple[str, dict[str, Any]]:
        """What to try after a run that diverged or stagnated (:func:`cvxdp.families.consensus.step_sizes.diagnose`).

        ``agent`` has the largest final residual; ``small_eta`` is its eta when that is below what its curvature
        bound ``lipschitz`` covers (else None), and ``needed`` the eta that bound calls for (None: unknown).
        Returns the hint's text and the suggested settings."""
        return "pass rho='auto' (the default, adaptive), or a larger or smaller rho (try 10x either way)", {"rho": "auto"}

    def resolved(self, epsilon: float | None = None) -> ConsensusAlgorithm:
        """A validated copy holding the run's schedules (``rho_schedule``, ``eta_schedule``); a
        :class:`~cvxdp.schedules.StepSchedule` declared without epsilon gets the run's (inf for a non-private
        run: its ``c2/eps`` term vanishes). The object itself is not changed."""
        self.validate()
        new = copy.copy(self)
        new.rho_schedule = self.schedule("rho")
        new.eta_schedule = self.schedule("eta") if "eta" in self.parameters else None
        for name in ("rho_schedule", "eta_schedule"):
            sched = getattr(new, name)
            if isinstance(sched, StepSchedule) and sched.epsilon is None:
                setattr(new, name, replace(sched, epsilon=float(epsilon) if epsilon else math.inf))
        return new

    def needs_curvature(self, private: bool) -> bool:
        """Whether the nodes measure ``L_p`` before round 1 (of a :meth:`resolved` copy): LinearizedADMM with
        ``eta="auto"``, or a non-private run with a constant eta (checked against it: an agent's declared bound as
        it is, an estimate only for an agent that declares none). Never when eta is given otherwise: nothing to
        estimate for. A private node reads declared bounds only, whatever it is asked."""
        if self.exact:
            return False
        return self.auto_eta is not None or (not private and isinstance(self.eta_schedule, Constant))

    def eta_at(self, t: int) -> float:
        """eta in round ``t`` (of a :meth:`resolved` copy; 0 for exact ADMM)."""
        return 0.0 if self.eta_schedule is None else self.eta_schedule(t)

    @property
    def auto_eta(self) -> AutoEta | None:
        """The :class:`~cvxdp.schedules.AutoEta` marker when eta is chosen per agent, else None."""
        return None


class LinearizedADMM(ConsensusAlgorithm):
    """Linearized ADMM: J linearized, proximal local updates per round; the average of the J outputs is sent.

    Parameters
    ----------
    rho : "auto", float or schedule, default "auto"
        Penalty rho^t. A float means constant; see :mod:`cvxdp.schedules`. ``"auto"``:
        :class:`~cvxdp.schedules.AdaptiveRho` ``(decrease=False)``: residual balancing on released residuals
        (no privacy cost) that raises rho when the primal residual dominates and never lowers it. The linearized
        step moves ``w`` more than an exact one, which reads as a large dual residual: balancing both ways
        drove rho to 0.1-0.2 on the power template's balance objective and left the copies 3.5-800x further
        apart after 300 rounds (case14 / case118 / case300 zones: consensus residual 0.014 / 0.024 / 0.078
        both ways, 1.8e-5 / 0.0022 / 0.022 upwards only). Rounds to 1e-3 of the cost optimum, both ways ->
        upwards only: case14 in 2 areas 86 -> 114, in 3 zones 132 -> 106, case118 1043 -> 1081, case300
        1127 -> 577, PGLib case14 / case118 / case300 70 / 118 / 469 -> 26 / 146 / 469. Since it only rises,
        with ``eta="auto"`` it starts at ``min(1, max_p L_p)``, the agents' curvature scale
        (:func:`cvxdp.families.consensus.step_sizes.auto_rho_start`; digits in 5 agents: 0.003, 800 rounds to 1e-3 instead of
        never in 1,500 from 1).
    eta : "auto", float or schedule, default "auto"
        Proximal weight eta^t (non-decreasing, bounded). ``"auto"`` (:class:`~cvxdp.schedules.AutoEta`): per
        agent, ``eta_p = L_p``, its curvature bound — in a private run the agent's declared public bound
        ``Agent(lipschitz=...)`` (required), else the smaller of the declared bound and an estimate from the
        data at the start — and
        ``eta_p = 0.55 L_p`` in a non-private run when the objective is quadratic (``eta_p > L_p / 2`` suffices
        for a constant Hessian; :mod:`cvxdp.families.consensus.step_sizes`). In a private run ``eta_p`` then doubles each time the
        agent's released copies move only with the noise (:mod:`cvxdp.families.consensus.step_sizes`; released values and public
        noise scales only; ``AutoEta(noise_growth=1.0)`` keeps it fixed).
    local_updates : int
        J >= 1 local updates per round.
    rounds : int
        Maximum number of rounds T.
    tol_primal, tol_dual : float, optional
        Stop when both the primal (consensus) and dual residuals fall below these.
    tol_mismatch : float, optional
        Stop when the copies' mismatch (the history's ``mismatch`` column: how far the agents' released copies
        of each shared value disagree) falls below it. PowerModelsADA's ADMM stops when half of it falls below
        its ``tol`` (``tol_mismatch = 2 * tol`` is the same rule). It reads released values only.
    """

    name = "ladmm"
    #: rho="auto": residual balancing that only raises rho (see the ``rho`` parameter)
    auto_rho = AdaptiveRho(decrease=False)

    parameters: ClassVar[dict[str, Param]] = {
        **ConsensusAlgorithm.parameters,
        "eta": param(_schedule("eta"), help="proximal weight eta^t (\"auto\": per agent, its curvature bound L_p, "
                     "0.55 L_p for a quadratic objective in a non-private run; a private run needs the model's "
                     "declared bound and doubles eta_p while the agent's released copies move only with the noise)"),
        "local_updates": param(COUNT, help="J local updates per round"),
    }

    @classmethod
    def accepts(cls, privacy: object) -> bool:
        """The non-private run, and objective or output perturbation with any registered noise (ObjL, ObjG, OutL,
        OutG)."""
        if isinstance(privacy, str):
            return privacy == "none" or privacy in perturbations()
        return privacy is None or isinstance(privacy, Perturbation)

    def __init__(self, rho: float | str | Schedule = "auto", eta: float | str | Schedule = "auto", local_updates: int = 1,
                 rounds: int = 100, *, tol_primal: float | None = None, tol_dual: float | None = None,
                 tol_mismatch: float | None = None) -> None:
        self.rho = rho
        self.eta = eta
        self.local_updates = local_updates
        self.rounds = rounds
        self.tol_primal = tol_primal
        self.tol_dual = tol_dual
        self.tol_mismatch = tol_mismatch

    @property
    def auto_eta(self) -> AutoEta | None:
        sched = self.schedule("eta")
        return sched if isinstance(sched, AutoEta) else None

    def unsettled_advice(self, rounds: int) -> tuple[str, dict[str, Any]]:
        """An exact prox step settles where the linearized one creeps: suggest exact ADMM with twice the rounds."""
        return ("exact ADMM (cvxdp.ADMM), more rounds, or a smaller rho if you set one (rho='auto' only raises it)",
                {"algorithm": "admm", "rounds": 2 * rounds})

    def stalled_advice(self, agent: str | None, small_eta: float | None, lipschitz: float | None,
                       needed: float | None) -> tuple[str, dict[str, Any]]:
        """An eta below the agent's curvature bound is the likely cause: suggest twice it (at least ``needed``)."""
        if agent is None or small_eta is None:
            return super().stalled_advice(agent, small_eta, lipschitz, needed)
        known = lipschitz is not None and math.isfinite(lipschitz)
        text = f" (its gradient Lipschitz constant is ~{lipschitz:.4g})" if known else ""
        hint = (f"eta for agent {agent!r} is {small_eta:.4g}{text}; pass eta='auto' (the default), a larger eta "
                "(e.g. 2x), or declare lipschitz= on the agent")
        return hint, {"eta": max(2 * small_eta, needed) if known and needed is not None else 2 * small_eta}


class ADMM(ConsensusAlgorithm):
    """Exact ADMM: each agent solves ``argmin_{u in W} f(u) - <lambda, E u> + rho/2 ||B w - E u||^2``.

    Parameters
    ----------
    rho : "auto", float or schedule, default "auto"
        Penalty. ``"auto"``: :class:`~cvxdp.schedules.AdaptiveRho` ``(target=0.3, mu=10)`` (residual balancing
        on released residuals, aiming at a primal residual about 3x below the dual one and acting only when
        they are more than 10x off that, frozen after its ``adapt_rounds``). When agents declare public
        per-block weights (``Agent(rho_scale=...)``), coordinate k is penalized with ``rho * weight_k`` and
        each block's weight is balanced on its own, within a decade of its declared value
        (:class:`~cvxdp.schedules.BlockBalance`); an explicit rho
        is used as given on every coordinate (the weights are then not used). A change of rho sets the local solver up again (same compiled data).
    rounds : int
        Maximum number of rounds.
    relaxation : "auto" or float in (0, 2), default "auto"
        Over-relaxation (Boyd et al. §3.4.3): each agent's target is
        ``relaxation * B_p w + (1 - relaxation) * E_p z_p`` (its previous released copy) in place of
        ``B_p w``, in both its prox step and the dual update. 1.0 is plain ADMM; values in [1.5, 1.8] usually
        need fewer rounds. ``"auto"``: 1.3 for the first 15 rounds, then 1.6 (:meth:`relaxation_at`) -- a
        strong over-relaxation amplifies the cold start's swings (PGLib case14: the cost swings +-20 % in the
        first rounds), a milder one for the warm-up damps them. A float is used in every round. It is a fixed
        schedule of the round number, so it costs no privacy.
    tol_primal, tol_dual : float, optional
        Stop when both residuals fall below these.
    tol_mismatch : float, optional
        Stop when the copies' mismatch (the history's ``mismatch`` column: how far the agents' released copies
        of each shared value disagree) falls below it. PowerModelsADA's ADMM stops when half of it falls below
        its ``tol`` (``tol_mismatch = 2 * tol`` is the same rule). It reads released values only.
    polish : bool, default True
        Consensus polishing (:meth:`cvxdp.model.local_solver.ProxSolver.polish`). In every round each agent also
        solves its own problem with its shared block fixed to the mean of the copies released in the round
        before (public: the server sends it with the round's message) and releases one bit: whether that was
        feasible. When every agent's was, the agents' polished local solutions together are a feasible point
        of the whole problem whose copies agree exactly, so its cost is an upper bound on the optimum; the
        last such point is ``result.polished`` and the history's ``polished`` column marks its rounds (its
        cost, computed on private data, is the evaluation column ``polished_objective``). It costs one more
        local solve per agent in each round that polishes and changes nothing else in the run. After
        ``polish_patience`` rounds in a row whose polish was not feasible for every agent, the rounds between
        attempts double up to ``polish_max_gap`` (:meth:`polish_gap`; it reads the released bits only, and
        a complete polish resets it); those rounds' ``polished`` is NaN. A round polishes only once the
        copies it would fix to agree well enough for that to pay off: their mismatch in the round before at most
        ``polish_below`` (0.1) times round 1's (:meth:`polish_pays`; released values only). ``False``: plain ADMM.
    """

    name = "admm"
    exact = True
    #: rho="auto": a primal-leaning balance, adapted only on a 10x imbalance (measured with over-relaxation and
    #: the power template's per-block weights: benchmarks/bench_power.py --acceptance)
    auto_rho = AdaptiveRho(target=0.3, mu=10.0)
    #: rho="auto" with per-block weights declared by the agents (Agent(rho_scale=...)): each block balanced apart
    auto_blocks = BlockBalance(target=0.3, mu=3.0, adapt_rounds=60)
    #: relaxation="auto": ``warmup_relaxation`` in rounds 1..``warmup_rounds`` (the block balance's warm-up, in
    #: which it only lowers weights), then ``steady_relaxation`` (benchmarks/bench_power.py --acceptance,
    #: bench_large_cases.py admm)
    warmup_relaxation, warmup_rounds, steady_relaxation = 1.3, auto_blocks.warmup, 1.6
    #: polish=True: attempts in every round until this many in a row failed, then at most this many rounds apart
    #: (case1354pegase / case2869pegase never polish: benchmarks/bench_polish.py --large)
    polish_patience, polish_max_gap = 8, 8
    #: polish=True: a round polishes once the copies' mismatch of the round before is at most this fraction of
    #: round 1's (None: every round); earlier polishes are rarely feasible and each costs a local solve
    #: (benchmarks/bench_polish.py: local solves per agent to PowerModelsADA's rule)
    polish_below: float | None = 0.1

    parameters: ClassVar[dict[str, Param]] = {
        **ConsensusAlgorithm.parameters,
        "relaxation": param(Options(("auto",)), Interval(0.0, 2.0),
                            help="over-relaxation of each agent's target (1.0: plain ADMM; auto: 1.3 for 15 rounds, "
                            "then 1.6)"),
        "polish": param(Boolean(), help="consensus polishing: each round every agent also solves its problem with "
                        "its shared values fixed to the mean of the copies released in the round before; when all "
                        "can, that is a feasible point whose copies agree (result.polished)"),
    }

    def __init__(self, rho: float | str = "auto", rounds: int = 100, *, relaxation: float | str = "auto",
                 tol_primal: float | None = None, tol_dual: float | None = None,
                 tol_mismatch: float | None = None, polish: bool = True) -> None:
        self.rho = rho
        self.rounds = rounds
        self.relaxation = relaxation
        self.tol_primal = tol_primal
        self.tol_dual = tol_dual
        self.tol_mismatch = tol_mismatch
        self.polish = polish

    def relaxation_at(self, t: int) -> float:
        """The over-relaxation of round ``t`` (1-based)."""
        if self.relaxation != "auto":
            return float(self.relaxation)
        return self.warmup_relaxation if t <= self.warmup_rounds else self.steady_relaxation

    def polish_gap(self, failures: int) -> int:
        """Rounds from a polishing round to the next one, after ``failures`` failed attempts in a row: 1 while
        ``failures < polish_patience``, then doubling with every further failure up to ``polish_max_gap``."""
        if failures < self.polish_patience:
            return 1
        return int(min(2 ** (failures - self.polish_patience + 1), self.polish_max_gap))

    def polish_pays(self, mismatch: float, first_mismatch: float) -> bool:
        """Whether a round polishes: the copies' mismatch of the round before (``mismatch``) is at most
        ``polish_below`` times round 1's (``first_mismatch``); round 1 never polishes. Both are computed from
        released copies. ``polish_below = None``: every round polishes (round 1 with the initial copies' mean)."""
        if self.polish_below is None:
            return True
        return math.isfinite(first_mismatch) and mismatch <= self.polish_below * first_mismatch
