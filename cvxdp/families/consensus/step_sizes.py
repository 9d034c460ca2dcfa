"""Step sizes the engine chooses (issue 12 item 1): per-agent eta, and run diagnostics for rho/eta.

* Each agent's gradient Lipschitz constant ``L_p`` comes from its node (:mod:`cvxdp.model.curvature`): the declared
  public bound in a private run, the smaller of it and an estimate from the data in a non-private run (a declared
  bound holds for every neighbouring data set and is often far above this data's curvature: the logistic
  template's ``C^2/2`` is 170-800x the curvature of digits' and FEMNIST's agents at the start).
* :func:`auto_rho_start` — where LinearizedADMM's ``rho="auto"`` starts: its rule only raises rho, so it starts
  at the agents' curvature scale (the largest ``L_p``) when that is below 1.
* :func:`auto_etas` — ``eta_p = factor * L_p``, floored so that an affine objective still gets a positive weight.
  The linearization majorizes ``f_p`` when ``eta_p >= L_p`` (SPEC §2), so a general objective gets
  ``factor = 1``. When ``f_p`` is quadratic (its Hessian ``H`` is constant; :func:`has_constant_hessian` reads
  the CVXPY expression's structure, not the data) the majorized ADMM with indefinite proximal terms of Li, Sun
  & Toh (SIAM J. Optim. 2016) converges when ``eta_p I - H/2`` is positive definite, i.e. ``eta_p > L_p / 2``:
  such agents get ``factor = ETA_FACTOR_QUADRATIC`` (0.55, a 10 % margin over ``L_p / 2`` for an estimated
  ``L_p``) in a non-private run. A private run starts from ``factor = 1``: the smaller eta amplifies each
  update's noise (see :func:`eta_factor`); :mod:`cvxdp.families.consensus.step_sizes` then grows it while the agent's released
  copies move only with the noise. An explicit eta is checked against the same condition.
* :func:`check_explicit_eta` and :func:`diagnose` — a :class:`~cvxdp.errors.StepSizeWarning` naming the agent
  (an eta below its known ``L_p``) or the run (diverging / stagnating residuals), with the suggested setting.
  They only warn; they never change a run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...errors import DeclarationError, StepSizeWarning
from ...model import Curvature
from ...privacy import Noise
from .schedules import AdaptiveRho

if TYPE_CHECKING:
    from .params import ConsensusAlgorithm

#: eta_p = ETA_FACTOR * L_p for a general objective (the majorization condition eta_p >= L_p)
ETA_FACTOR = 1.0
#: eta_p = ETA_FACTOR_QUADRATIC * L_p for a quadratic objective (Li, Sun & Toh 2016: eta_p > L_p / 2 suffices;
#: measured: benchmarks/bench_power.py --acceptance and tests/families/consensus/test_step_sizes.py)
ETA_FACTOR_QUADRATIC = 0.55
#: smallest automatic eta, relative to the agents' curvature scale ``min(1, max_p L_p)`` (an affine objective has
#: ``L_p = 0`` and still needs a positive weight; 1e-3 absolute when every agent is affine)
ETA_FLOOR = 1e-3


def eta_factor(curvature: Curvature, factor: float | None = None, *, private: bool = False) -> float:
    """The multiple of ``L_p`` that eta="auto" uses: ``factor`` when given; else :data:`ETA_FACTOR_QUADRATIC` for
    a quadratic objective in a non-private run, and :data:`ETA_FACTOR` otherwise. A private run starts from
    ``eta_p = L_p`` (and grows it with the noise, :mod:`cvxdp.families.consensus.step_sizes`): each update's noise is divided by ``eta_p`` (and OutPert's sensitivity by ``min(c)``), so
    the smaller eta trades privacy-noise damping for speed (case14 balance, ObjG eps = 1, 100 rounds: objective
    10.5 at ``L_p``, 23.7 at ``0.55 L_p``)."""
    if factor is not None:
        return float(factor)
    return ETA_FACTOR_QUADRATIC if curvature.quadratic and not private else ETA_FACTOR


def curvature_scale(constants: Sequence[Curvature]) -> float | None:
    """The agents' curvature scale: the largest positive ``L_p`` (None when every agent is affine or unknown)."""
    values = [float(c.value) for c in constants if c.value is not None and c.value > 0]
    return max(values) if values else None


def auto_etas(constants: Sequence[Curvature], factor: float | None = None, *, private: bool = False) -> list[float]:
    """``eta_p = max(eta_factor * L_p, ETA_FLOOR * min(1, max_q L_q))`` per agent (see :func:`eta_factor`): the
    floor gives an affine objective a positive weight at the federation's scale without lifting an agent whose
    curvature is small (FEMNIST's writers measure 6e-4 to 1e-3: an absolute floor of 1e-3 cost 251 rounds to 1e-3
    of the optimum instead of 210)."""
    for c in constants:
        if c.value is None or not math.isfinite(c.value):
            raise DeclarationError(f"Could not determine eta automatically ({c.source} Lipschitz constant {c.value}); "
                                   "give LinearizedADMM(eta=...) explicitly.")
    scale = curvature_scale(constants)
    floor = ETA_FLOOR * (min(1.0, scale) if scale else 1.0)
    return [max(eta_factor(c, factor, private=private) * c.value, floor) for c in constants]


def check_explicit_eta(names: Sequence[str], eta: float, constants: Sequence[Curvature]) -> None:
    """Warn (naming the agent) when an explicit eta is at or below what the convergence theory needs
    (:attr:`Curvature.needed`: ``L_p`` for a general objective, more than ``L_p / 2`` for a quadratic one)."""
    for name, c in zip(names, constants):
        if c.covers(eta) in (None, True):
            continue
        suggest = eta_factor(c) * c.value
        if c.quadratic:
            why = (f"more than half its gradient Lipschitz constant ~{c.value:.4g} ({c.source}; its objective is "
                   "quadratic)")
        else:
            why = f"its gradient Lipschitz constant ~{c.value:.4g} ({c.source})"
        warnings.warn(StepSizeWarning(
            f"eta for agent {name!r} ({eta:g}) is below what the linearized step needs, {why}; it may oscillate "
            f"or stall. Pass eta='auto' (the default) or eta>={suggest:.4g}, or declare lipschitz= on the agent.",
            agent=name, suggestion={"eta": suggest}),
            stacklevel=6)  # <- EtaPlan.start <- family.start <- run_loop <- solve <- caller


class EtaPlan:
    """The eta of every agent in every round, resolved once at the start of a run (engine hook)."""

    def __init__(self, algorithm, names: Sequence[str], constants: list[Curvature] | None, *,
                 private: bool = False) -> None:
        self.algorithm, self.names, self.constants = algorithm, list(names), constants
        auto = algorithm.auto_eta
        self.fixed = auto_etas(constants, auto.factor, private=private) if auto is not None else None

    @classmethod
    def start(cls, algorithm, names: Sequence[str], curvatures: Sequence[Curvature | None], *,
              private: bool) -> EtaPlan:
        """Resolve eta per agent (LinearizedADMM) and warn about an explicit eta below a known ``L_p``.

        ``curvatures`` come from the nodes' declarations (:meth:`~cvxdp.families.consensus.params.ConsensusAlgorithm.needs_curvature` says when they measure one:
        declared, or estimated where the data live in a non-private run; a private run with ``eta="auto"`` and an
        undeclared bound is refused by the node, naming the agent).
        """
        names = list(names)
        if algorithm.exact:  # an exact prox step has no eta
            return cls(algorithm, names, None)
        if algorithm.auto_eta is not None:
            return cls(algorithm, names, list(curvatures), private=private)
        plan = cls(algorithm, names, None)
        if algorithm.needs_curvature(private):
            # an explicit eta is checked against the same L_p as eta="auto" would use: the smaller of the declared
            # bound and the curvature measured at the start (non-private runs only: a private run may not look at
            # its data; its residuals are still diagnosed at the end).
            plan.constants = list(curvatures)
            check_explicit_eta(names, float(algorithm.eta_schedule.value), plan.constants)
        return plan

    def at(self, t: int) -> list[float]:
        """eta of each agent in round ``t``."""
        if self.fixed is not None:
            return list(self.fixed)
        return [self.algorithm.eta_at(t)] * len(self.names)

    def describe(self) -> dict | None:
        """What was chosen, for ``result.config`` (None unless eta was automatic)."""
        if self.fixed is None:
            return None
        return {n: {"eta": e, "lipschitz": c.value, "source": c.source, "quadratic": bool(c.quadratic)}
                for n, e, c in zip(self.names, self.fixed, self.constants)}


def auto_rho_start(schedule, plan: EtaPlan):
    """LinearizedADMM's ``rho="auto"`` with ``eta="auto"``: the :class:`~cvxdp.schedules.AdaptiveRho` of the run,
    started at ``min(start, max_p L_p)``, the agents' curvature scale (``L_p = 0``, an affine objective, says
    nothing of it and does not count). The rule only raises rho, so a start above that scale could never come
    down: with ``rho = 1`` and ``L_p ~ 0.003`` the linearized step ``1 / (eta_p + rho)`` is 300x shorter than the
    curvature allows. Reads the eta plan's constants only (declared public bounds in a private run); any other
    schedule, and a scale at or above the start, leave the schedule unchanged."""
    from dataclasses import replace

    if not isinstance(schedule, AdaptiveRho) or plan.fixed is None:
        return schedule
    start = curvature_scale(plan.constants)
    if not start or start >= schedule.start:
        return schedule
    return replace(schedule, start=start, lo=min(schedule.lo, start))


def next_rho(schedule, t: int, state, gidx: Sequence[np.ndarray]) -> float:
    """rho of round ``t`` (engine hook). :class:`~cvxdp.schedules.AdaptiveRho` balances *relative* residuals —
    the primal one over ``max(||E z||, ||B w||)`` and the dual one over ``||lambda||`` (Boyd et al. §3.3.1's
    relative tolerances; OSQP's normalization) — all computed by the aggregator from released values; any
    other schedule gets the raw residuals."""
    if not isinstance(schedule, AdaptiveRho) or state.w_prev is None or not schedule.relative:
        return schedule(t, state.rho_prev, state.primal, state.dual)
    ez = np.concatenate(state.ez) if state.ez else np.zeros(0)
    bw = np.concatenate([state.w_prev[g] for g in gidx]) if gidx else np.zeros(0)
    lam = np.concatenate(state.lam) if state.lam else np.zeros(0)
    scale_p = max(float(np.linalg.norm(ez)), float(np.linalg.norm(bw)), 1e-12)
    scale_d = max(float(np.linalg.norm(lam)), 1e-12)
    return schedule(t, state.rho_prev, state.primal / scale_p, state.dual / scale_d)


def _trend(values: np.ndarray) -> tuple[float, float]:
    """(min of the earlier half, min of the later half) of a window."""
    k = len(values) // 2
    return float(np.min(values[:k])), float(np.min(values[k:]))


def diagnose(history: pd.DataFrame, agent_history: pd.DataFrame, *, stop_reason: str, algorithm: ConsensusAlgorithm,
             etas: Sequence[float] | None, constants: Sequence[Curvature] | None,
             tol: float = 1e-6, min_rounds: int = 40, private: bool = False,
             stacklevel: int = 3) -> list[StepSizeWarning]:
    """Divergence or stagnation of a finished run, read from released values (residuals) only.

    * divergence: a non-finite residual, or the last primal residual 1e4x above its minimum;
    * stagnation: the run used all its rounds (>= ``min_rounds``) and the primal residual, still above ``tol``
      and above 1e-3 of its first value, did not fall by 10 % from the third to the last quarter of the rounds;
    * not settled (:func:`unsettled`): the run used all its rounds and the copies agree while the consensus point
      still moves -- a small primal residual with a dual residual more than ``UNSETTLED_RATIO`` times it and above
      ``UNSETTLED_SHARE`` of its largest value. A large penalty pins the copies together while the objective creeps
      towards its optimum (LinearizedADMM with rho = 100 on a 3-region dispatch: consensus residual 1.2e-4 and
      1.6 % above the central cost after 300 rounds).

    The warning names the agent with the largest final residual and suggests a setting. Returns the
    warnings (already issued).
    """
    out: list[StepSizeWarning] = []
    if history is None or len(history) == 0 or "primal_residual" not in history:
        return out
    if not private and stop_reason == "rounds" and len(history) >= min_rounds:
        found = unsettled(history, algorithm=algorithm, stacklevel=stacklevel + 1)
        if found is not None:
            out.append(found)
    res = history["primal_residual"].to_numpy(dtype=float)
    final = res[-1]
    worst = None
    if agent_history is not None and len(agent_history) and "residual" in agent_history:
        last = agent_history[agent_history["round"] == agent_history["round"].max()]
        worst = str(last.loc[last["residual"].idxmax(), "agent"])
    who = f"agent {worst!r}" if worst is not None else "the run"
    diverged = not np.all(np.isfinite(res)) or (len(res) > 5 and final > 1e4 * max(float(np.nanmin(res)), 1e-12))
    stagnated = False
    # a private run's residual levels off at its noise floor by design: only divergence is reported there
    if not private and stop_reason == "rounds" and len(res) >= min_rounds and final > max(tol, 1e-3 * float(res[0])):
        earlier, later = _trend(res[len(res) // 2:])
        stagnated = later > 0.9 * earlier
    if not (diverged or stagnated):
        return out
    kind = "diverges" if diverged else "stagnates"
    names = list(dict.fromkeys(agent_history["agent"])) if worst is not None else []
    p = names.index(worst) if worst is not None else 0
    curvature = Curvature(*constants[p]) if constants is not None and worst is not None else None
    L = curvature.value if curvature is not None else None
    covered = curvature.covers(etas[p]) if curvature is not None and etas is not None else None
    small_eta = etas[p] if worst is not None and etas is not None and not covered else None
    needed = eta_factor(curvature) * L if L is not None and math.isfinite(L) else None
    hint, suggestion = algorithm.stalled_advice(worst, small_eta, L, needed)
    msg = (f"The run {kind}: primal residual {final:.3g} after {len(res)} rounds (largest at {who}). {hint}.")
    w = StepSizeWarning(msg, agent=worst, suggestion=suggestion)
    warnings.warn(w, stacklevel=stacklevel)
    out.append(w)
    return out


#: the dual residual over the primal residual above which a finished run has not settled (Boyd et al.'s residual
#: balancing keeps the two within a factor 10 of each other)
UNSETTLED_RATIO = 10.0
#: ... when the dual residual is also still above this share of its largest value
UNSETTLED_SHARE = 1e-2


def unsettled(history: pd.DataFrame, *, algorithm: ConsensusAlgorithm, stacklevel: int = 3) -> StepSizeWarning | None:
    """Warn when a run that used all its rounds ended with agreeing copies and a moving consensus point.

    Read from released values only: the primal residual ``||B w - E z||`` (how far the released copies are from
    the consensus point) and the dual residual ``||rho B (w - w_prev)||`` (how far that point moved in the last
    round). Copies that agree while the point keeps moving mean a penalty that holds them together faster than the
    objective is minimised: the objective, which only the parties can evaluate, may still be well above its
    optimum although the consensus residual looks converged. Returns the warning (issued) or None.
    """
    if "dual_residual" not in history or len(history) < 2:
        return None
    dual = history["dual_residual"].to_numpy(dtype=float)
    finite = dual[np.isfinite(dual)]
    primal, final = float(history["primal_residual"].iloc[-1]), float(dual[-1])
    if finite.size == 0 or not np.isfinite(final) or not np.isfinite(primal):
        return None
    largest = float(np.max(finite))
    if final <= UNSETTLED_RATIO * primal or final <= UNSETTLED_SHARE * largest:
        return None
    rounds = len(history)
    rho = float(history["rho"].iloc[-1]) if "rho" in history else math.nan
    hint, suggestion = algorithm.unsettled_advice(rounds)
    w = StepSizeWarning(
        f"The run has not settled: after {rounds} rounds the copies agree (primal residual {primal:.3g}) but the "
        f"consensus point still moves (dual residual {final:.3g}, {final / max(primal, 1e-300):.3g}x the primal "
        f"residual and {final / largest:.2g} of its largest value; rho = {rho:.3g}). The objective may still be well "
        f"above its optimum. Try {hint}.", agent=None, suggestion=suggestion)
    warnings.warn(w, stacklevel=stacklevel)
    return w


#: eta is multiplied by this when the test fires (the learning-rate halving of Chee & Toulis)
GROWTH = 2.0
#: rounds of moves the statistic needs after each change
BURN_IN = 5
#: eta_p never exceeds CAP times its starting value
CAP = 1e4
#: successive moves count as aligned (a drift) when their summed inner products exceed this share of their energy
ALIGNED = 0.2


def release_noise_std(scale: float, noise: str, placement: str, weight: float) -> float:
    """Standard deviation, per coordinate, of the noise one local update leaves in a released shared copy.

    ``scale`` is the round's noise plan scale (Gaussian sigma, Laplace b); ``weight`` the projection weight of a
    shared coordinate, ``eta + rho``. Objective perturbation moves the iterate by ``xi / weight``; output
    perturbation adds its noise to the iterate directly. It is an upper estimate: the projection onto ``W_p`` is
    non-expansive, and the average over J > 1 local updates carries less.
    """
    std = Noise.from_name(noise, "release_noise_std").std(scale)
    return std if placement == "output" else std / weight


def noise_dominated(corr: float, energy: float, count: int, net: float, noise_var: float,
                    remaining: int) -> bool:
    """Whether an agent's last ``count`` moves are the noise's doing (the three conditions of the module docstring).

    Parameters
    ----------
    corr : float
        Sum of inner products of successive moves of the released copy (compared with ``ALIGNED * energy``).
    energy : float
        Sum of the squared norms of those moves.
    count : int
        Number of moves summed.
    net : float
        Norm of the copy's displacement over the window (``count + 1`` moves).
    noise_var : float
        Expected squared norm of one noise draw in the copy (``n_shared * std**2``).
    remaining : int
        Rounds left in the run.
    """
    if count < BURN_IN or corr >= ALIGNED * energy or noise_var <= 0.0:
        return False
    if energy / count > 2.0 * noise_var:  # a move is the difference of two draws: 2 x the noise energy
        return False
    # both ends of the window carry a noise draw: 2 x noise_var of the net displacement is the noise's
    drift = math.sqrt(max(net * net - 2.0 * noise_var, 0.0)) / (count + 1)
    # what the drift would still cover vs what the noise adds up to over the remaining rounds (a random walk)
    return drift * remaining < math.sqrt(noise_var * max(remaining, 1))


@dataclass
class NoiseEta:
    """Per-agent multipliers of the automatic eta and the statistics behind them (checkpointed with the
    consensus state)."""

    scale: np.ndarray
    corr: np.ndarray
    energy: np.ndarray
    count: np.ndarray
    moves: list = field(default_factory=list)
    anchors: list = field(default_factory=list)

    @classmethod
    def start(cls, n_agents: int) -> NoiseEta:
        zeros = np.zeros(n_agents)
        return cls(scale=np.ones(n_agents), corr=zeros.copy(), energy=zeros.copy(),
                   count=np.zeros(n_agents, dtype=int), moves=[None] * n_agents, anchors=[None] * n_agents)

    def observe(self, before: Sequence[np.ndarray], after: Sequence[np.ndarray], noise_std: Sequence[float], *,
                remaining: int, growth: float = GROWTH) -> None:
        """Update the statistics with one round's released copies (``before`` -> ``after``) and grow the eta
        of every agent whose moves are noise-dominated."""
        for p, (old, new, std) in enumerate(zip(before, after, noise_std)):
            new = np.asarray(new, dtype=float)
            move = new - np.asarray(old, dtype=float)
            if self.anchors[p] is None:
                self.anchors[p] = np.array(old, dtype=float)
            if self.moves[p] is not None:
                self.corr[p] += float(move @ self.moves[p])
                self.energy[p] += float(move @ move)
                self.count[p] += 1
                net = float(np.linalg.norm(new - self.anchors[p]))
                if self.scale[p] * growth <= CAP and noise_dominated(
                        self.corr[p], self.energy[p], int(self.count[p]), net, move.size * std * std, remaining):
                    self.scale[p] *= growth
                    self.corr[p], self.energy[p], self.count[p] = 0.0, 0.0, 0
                    self.anchors[p] = new.copy()
            self.moves[p] = move


__all__ = ['ALIGNED', 'auto_etas', 'auto_rho_start', 'BURN_IN', 'CAP', 'check_explicit_eta', 'diagnose', 'ETA_FACTOR', 'eta_factor', 'ETA_FACTOR_QUADRATIC', 'ETA_FLOOR', 'EtaPlan', 'GROWTH', 'next_rho', 'noise_dominated', 'NoiseEta', 'release_noise_std', 'unsettled', 'UNSETTLED_RATIO', 'UNSETTLED_SHARE']
