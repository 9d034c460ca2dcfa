"""Step sizes the engine chooses (issue 12 item 1): per-agent eta, and run diagnostics for rho/eta.

* :func:`lipschitz_constants` — each agent's gradient Lipschitz constant ``L_p``. In a private run only a
  public, declared bound is used (``Agent(..., lipschitz=L)``): nothing computed from private data may steer
  a private run. A non-private run estimates ``L_p`` from the data by power iteration on gradient differences
  (exact for quadratic objectives; the local curvature at the starting point otherwise) and takes the smaller
  of the estimate and the declared bound: a declared bound holds for every neighbouring data set and is often
  far above this data's curvature (the logistic template's ``C^2/2`` is 170-800x the curvature of digits' and
  FEMNIST's agents at the start), which made the linearized step 100x too short.
* :func:`auto_rho_start` — where LinearizedADMM's ``rho="auto"`` starts: its rule only raises rho, so it starts
  at the agents' curvature scale (the largest ``L_p``) when that is below 1.
* :func:`auto_etas` — ``eta_p = factor * L_p``, floored so that an affine objective still gets a positive weight.
  The linearization majorizes ``f_p`` when ``eta_p >= L_p`` (SPEC §2), so a general objective gets
  ``factor = 1``. When ``f_p`` is quadratic (its Hessian ``H`` is constant; :func:`has_constant_hessian` reads
  the CVXPY expression's structure, not the data) the majorized ADMM with indefinite proximal terms of Li, Sun
  & Toh (SIAM J. Optim. 2016) converges when ``eta_p I - H/2`` is positive definite, i.e. ``eta_p > L_p / 2``:
  such agents get ``factor = ETA_FACTOR_QUADRATIC`` (0.55, a 10 % margin over ``L_p / 2`` for an estimated
  ``L_p``) in a non-private run. A private run starts from ``factor = 1``: the smaller eta amplifies each
  update's noise (see :func:`eta_factor`); :mod:`cvxdp.families.consensus.noise_eta` then grows it while the agent's released
  copies move only with the noise. An explicit eta is checked against the same condition.
* :func:`check_explicit_eta` and :func:`diagnose` — a :class:`~cvxdp.errors.StepSizeWarning` naming the agent
  (an eta below its known ``L_p``) or the run (diverging / stagnating residuals), with the suggested setting.
  They only warn; they never change a run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...errors import DeclarationError, StepSizeWarning

#: eta_p = ETA_FACTOR * L_p for a general objective (the majorization condition eta_p >= L_p)
ETA_FACTOR = 1.0
#: eta_p = ETA_FACTOR_QUADRATIC * L_p for a quadratic objective (Li, Sun & Toh 2016: eta_p > L_p / 2 suffices;
#: measured: benchmarks/bench_power.py --acceptance and tests/core/test_step_sizes.py)
ETA_FACTOR_QUADRATIC = 0.55
#: smallest automatic eta, relative to the agents' curvature scale ``min(1, max_p L_p)`` (an affine objective has
#: ``L_p = 0`` and still needs a positive weight; 1e-3 absolute when every agent is affine)
ETA_FLOOR = 1e-3


class Curvature(NamedTuple):
    """An agent's curvature bound for eta: ``value`` (``L_p``, None if unknown), where it came from
    (``"declared"``, ``"estimated"`` or ``"unknown"``) and whether the objective is quadratic."""

    value: float | None
    source: str
    quadratic: bool = False

    @property
    def needed(self) -> float | None:
        """The smallest eta the convergence theory covers: ``L_p / 2`` (exclusive) for a quadratic objective,
        ``L_p`` otherwise."""
        if self.value is None or not math.isfinite(self.value):
            return None
        return self.value / 2 if self.quadratic else self.value

    def covers(self, eta: float) -> bool | None:
        """Whether ``eta`` meets :attr:`needed` (strictly above ``L_p / 2`` for a quadratic objective, at least
        ``L_p`` otherwise); None when ``L_p`` is unknown."""
        needed = self.needed
        if needed is None:
            return None
        return eta > needed * (1 + 1e-9) if self.quadratic else eta >= needed * (1 - 1e-9)


#: CVXPY atoms of degree two with a constant Hessian when their arguments are affine (and the second argument of
#: quad_over_lin / quad_form is constant); power only with p = 2
_QUADRATIC_ATOMS = ("quad_over_lin", "QuadForm")
_POWER_ATOMS = ("Power", "PowerApprox")


def has_constant_hessian(expr) -> bool:
    """Whether a CVXPY expression is a polynomial of degree at most two in its variables (its Hessian does not
    depend on the point): affine atoms over such expressions, and ``sum_squares``/``square``/``power(., 2)``/
    ``quad_form``/``quad_over_lin`` with a constant denominator over affine arguments.

    Structural: it reads the expression tree, not the parameters' values. CVXPY's own ``is_quadratic()`` also
    accepts piecewise atoms such as ``huber``, whose curvature vanishes where they are linear, so it is not used.
    """
    from cvxpy.atoms.affine.affine_atom import AffAtom
    from cvxpy.expressions.leaf import Leaf

    def degree2(e) -> bool:
        if isinstance(e, Leaf) or e.is_constant():
            return True
        if isinstance(e, AffAtom):  # a sum, a scaling, an index, ... of degree-2 terms
            return all(degree2(a) for a in e.args)
        name = type(e).__name__
        if name in _POWER_ATOMS:
            p = getattr(e, "p", None)
            p = getattr(p, "value", p)
            return p is not None and float(p) in (1.0, 2.0) and e.args[0].is_affine()
        return name in _QUADRATIC_ATOMS and e.args[0].is_affine() and all(a.is_constant() for a in e.args[1:])

    try:
        return bool(expr.is_convex()) and degree2(expr)
    except Exception:  # an expression CVXPY cannot classify: treat it as general (the safe side)
        return False


def estimate_lipschitz(grad: Callable[[np.ndarray], np.ndarray], u0: np.ndarray, *, iterations: int = 50,
                       rtol: float = 1e-6) -> float:
    """Largest curvature of ``grad`` at ``u0`` by power iteration on gradient differences.

    ``d -> (grad(u0 + h d) - grad(u0)) / h`` is the Hessian-vector product for a quadratic objective (exact for
    any ``h``) and its finite-difference approximation otherwise. The start direction is fixed (deterministic).
    Returns a non-negative float (``inf`` when the differences are not finite).
    """
    u0 = np.asarray(u0, dtype=float)
    n = u0.size
    if n == 0:
        return 0.0
    g0 = np.asarray(grad(u0), dtype=float)
    h = 1e-4 * (1.0 + float(np.linalg.norm(u0)) / math.sqrt(n))
    d = 1.0 + 0.5 * np.cos(np.arange(n) * 1.7)  # fixed, non-degenerate start direction
    d /= np.linalg.norm(d)
    est = 0.0
    for _ in range(iterations):
        hd = (np.asarray(grad(u0 + h * d), dtype=float) - g0) / h
        if not np.all(np.isfinite(hd)):
            return math.inf
        norm = float(np.linalg.norm(hd))
        if norm == 0.0:
            return 0.0
        converged = abs(norm - est) <= rtol * norm
        est, d = norm, hd / norm
        if converged:
            break
    return est


def declared_lipschitz(agent) -> float | None:
    """The agent's declared public bound (``Agent(lipschitz=...)``), or None."""
    value = getattr(agent, "lipschitz", None)
    return None if value is None else float(value)


def lipschitz_constants(agents: Sequence, starts: Sequence[np.ndarray], *, private: bool,
                        need: bool = True) -> list[Curvature]:
    """A :class:`Curvature` per agent: ``L_p``, its source (``"declared"``, ``"estimated"`` or ``"unknown"``) and
    whether the objective is quadratic (:func:`has_constant_hessian`, structural).

    ``private=True`` uses declared bounds only; with ``need=True`` a missing one raises a
    :class:`~cvxdp.errors.DeclarationError` naming the agent and what to do. A non-private run estimates ``L_p``
    at ``starts`` (:func:`estimate_lipschitz`) and takes the smaller of the estimate and a declared bound (the
    source says which one was used): the declared bound is a worst case over neighbouring data sets, the
    estimate this data's curvature.
    """
    out: list[Curvature] = []
    for agent, u0 in zip(agents, starts):
        declared = declared_lipschitz(agent)
        quadratic = has_constant_hessian(agent.objective)
        if private:
            if declared is not None:
                out.append(Curvature(declared, "declared", quadratic))
                continue
            if need:
                raise DeclarationError(
                    f"Agent {agent.name!r}: a private run with LinearizedADMM(eta='auto') needs a public bound on "
                    "the Lipschitz constant of the objective's gradient: declare Agent(..., lipschitz=L) (a value "
                    "that holds for every neighbouring data set), or give eta explicitly (e.g. eta=10.0). It is "
                    "not estimated from the data, since that would steer a private run with unaccounted "
                    "information.")
            out.append(Curvature(None, "unknown", quadratic))
            continue
        try:
            estimate = estimate_lipschitz(lambda u, a=agent: a.grad(u), u0)
        except DeclarationError as exc:  # a non-finite gradient: say when it happened
            raise DeclarationError(f"{exc} This happened while estimating the Lipschitz constant of its gradient "
                                   "for eta, before round 1 (give eta explicitly and declare Agent(lipschitz=...) "
                                   "to skip the estimate).") from None
        if declared is not None and declared <= estimate:
            out.append(Curvature(declared, "declared", quadratic))
        else:
            out.append(Curvature(estimate, "estimated", quadratic))
    return out


def eta_factor(curvature: Curvature, factor: float | None = None, *, private: bool = False) -> float:
    """The multiple of ``L_p`` that eta="auto" uses: ``factor`` when given; else :data:`ETA_FACTOR_QUADRATIC` for
    a quadratic objective in a non-private run, and :data:`ETA_FACTOR` otherwise. A private run starts from
    ``eta_p = L_p`` (and grows it with the noise, :mod:`cvxdp.families.consensus.noise_eta`): each update's noise is divided by ``eta_p`` (and OutPert's sensitivity by ``min(c)``), so
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
        auto = getattr(algorithm, "auto_eta", None)
        self.fixed = auto_etas(constants, auto.factor, private=private) if auto is not None else None

    @classmethod
    def start(cls, algorithm, agents: Sequence, backend, *, private: bool) -> EtaPlan:
        """Resolve eta per agent (LinearizedADMM) and warn about an explicit eta below a known ``L_p``.

        The constants come from each worker (``AgentWorker.lipschitz``: declared, or estimated where the data
        live in a non-private run); a private run with ``eta="auto"`` and an undeclared bound is refused here.
        """
        names = [a.name for a in agents]
        if algorithm.name != "ladmm":
            return cls(algorithm, names, None)
        auto = algorithm.auto_eta is not None
        if private and auto:  # fail fast, naming the agent (declared bounds only)
            lipschitz_constants(agents, [np.zeros(0)] * len(agents), private=True)
        if auto:
            return cls(algorithm, names, [Curvature(*c) for c in backend.call("lipschitz", [(private,)] * len(agents))],
                       private=private)
        from ...schedules import Constant

        plan = cls(algorithm, names, None)
        if not private and isinstance(algorithm.eta_schedule, Constant):
            # an explicit eta is checked against the same L_p as eta="auto" would use: the smaller of the declared
            # bound and the curvature measured at the start (non-private runs only: a private run may not look at
            # its data; its residuals are still diagnosed at the end).
            plan.constants = [Curvature(*c) for c in backend.call("lipschitz", [(False,)] * len(agents))]
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

    from ...schedules import AdaptiveRho

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
    from ...schedules import AdaptiveRho

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


def diagnose(history: pd.DataFrame, agent_history: pd.DataFrame, *, stop_reason: str, algorithm: str,
             etas: Sequence[float] | None, constants: Sequence[Curvature] | None,
             tol: float = 1e-6, min_rounds: int = 40, private: bool = False,
             stacklevel: int = 3) -> list[StepSizeWarning]:
    """Divergence or stagnation of a finished run, read from released values (residuals) only.

    * divergence: a non-finite residual, or the last primal residual 1e4x above its minimum;
    * stagnation: the run used all its rounds (>= ``min_rounds``) and the primal residual, still above ``tol``
      and above 1e-3 of its first value, did not fall by 10 % from the third to the last quarter of the rounds.

    The warning names the agent with the largest final residual and suggests a setting. Returns the
    warnings (already issued).
    """
    out: list[StepSizeWarning] = []
    if history is None or len(history) == 0 or "primal_residual" not in history:
        return out
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
    eta_small = not covered
    if algorithm == "ladmm" and worst is not None and etas is not None and eta_small:
        known = f" (its gradient Lipschitz constant is ~{L:.4g})" if L is not None and math.isfinite(L) else ""
        hint = (f"eta for agent {worst!r} is {etas[p]:.4g}{known}; pass eta='auto' (the default), a larger eta "
                "(e.g. 2x), or declare lipschitz= on the agent")
        suggestion = {"eta": 2 * etas[p] if not known else max(2 * etas[p], eta_factor(curvature) * L)}
    else:
        hint = "pass rho='auto' (the default, adaptive), or a larger or smaller rho (try 10x either way)"
        suggestion = {"rho": "auto"}
    msg = (f"The run {kind}: primal residual {final:.3g} after {len(res)} rounds (largest at {who}). {hint}.")
    w = StepSizeWarning(msg, agent=worst, suggestion=suggestion)
    warnings.warn(w, stacklevel=stacklevel)
    out.append(w)
    return out


__all__ = ["Curvature", "ETA_FACTOR", "ETA_FACTOR_QUADRATIC", "EtaPlan", "ETA_FLOOR", "auto_etas", "check_explicit_eta",
           "declared_lipschitz", "diagnose", "estimate_lipschitz", "eta_factor", "has_constant_hessian",
           "lipschitz_constants"]
