"""Step sizes the engine chooses (issue 12 item 1): per-agent eta, and run diagnostics for rho/eta.

* :func:`lipschitz_constants` — each agent's gradient Lipschitz constant ``L_p``. In a private run only a
  public, declared bound is used (``Agent(..., lipschitz=L)``): nothing computed from private data may steer
  a private run. A non-private run uses the declared bound when there is one, else estimates ``L_p`` from the
  data by power iteration on gradient differences (exact for quadratic objectives; the local curvature at the
  starting point otherwise).
* :func:`auto_etas` — ``eta_p = factor * L_p`` (LADMM's linearization majorizes ``f_p`` when
  ``eta_p >= L_p``; SPEC §2), floored so that an affine objective still gets a positive weight.
* :func:`check_explicit_eta` and :func:`diagnose` — a :class:`~cvxdp.errors.StepSizeWarning` naming the agent
  (an eta below its known ``L_p``) or the run (diverging / stagnating residuals), with the suggested setting.
  They only warn; they never change a run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .errors import DeclarationError, StepSizeWarning

#: eta_p = ETA_FACTOR * L_p (measured: see benchmarks/bench_power.py --acceptance and tests/core/test_step_sizes.py)
ETA_FACTOR = 1.0
#: smallest automatic eta (an affine objective has L_p = 0)
ETA_FLOOR = 1e-3


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
                        need: bool = True, prefer_declared: bool = True) -> list[tuple[float | None, str]]:
    """``(L_p, source)`` per agent; source is ``"declared"``, ``"estimated"`` or ``"unknown"``.

    ``private=True`` uses declared bounds only; with ``need=True`` a missing one raises a
    :class:`~cvxdp.errors.DeclarationError` naming the agent and what to do. ``prefer_declared=False``
    (non-private runs) estimates even when a bound is declared (a declared bound may be loose).
    """
    out: list[tuple[float | None, str]] = []
    for agent, u0 in zip(agents, starts):
        declared = declared_lipschitz(agent)
        if declared is not None and (private or prefer_declared):
            out.append((declared, "declared"))
        elif private:
            if need:
                raise DeclarationError(
                    f"Agent {agent.name!r}: a private run with LinearizedADMM(eta='auto') needs a public bound on "
                    "the Lipschitz constant of the objective's gradient: declare Agent(..., lipschitz=L) (a value "
                    "that holds for every neighbouring data set), or give eta explicitly (e.g. eta=10.0). It is "
                    "not estimated from the data, since that would steer a private run with unaccounted "
                    "information.")
            out.append((None, "unknown"))
        else:
            try:
                out.append((estimate_lipschitz(lambda u, a=agent: a.grad(u), u0), "estimated"))
            except DeclarationError as exc:  # a non-finite gradient: say when it happened
                raise DeclarationError(f"{exc} This happened while estimating the Lipschitz constant of its gradient "
                                       "for eta='auto', before round 1 (declare Agent(lipschitz=...) or give eta "
                                       "to skip the estimate).") from None
    return out


def auto_etas(constants: Sequence[tuple[float | None, str]], factor: float = ETA_FACTOR) -> list[float]:
    """``eta_p = max(factor * L_p, ETA_FLOOR)`` per agent."""
    etas = []
    for value, source in constants:
        if value is None or not math.isfinite(value):
            raise DeclarationError(f"Could not determine eta automatically ({source} Lipschitz constant {value}); "
                                   "give LinearizedADMM(eta=...) explicitly.")
        etas.append(max(factor * value, ETA_FLOOR))
    return etas


def check_explicit_eta(names: Sequence[str], eta: float, constants: Sequence[tuple[float | None, str]]) -> None:
    """Warn (naming the agent) when an explicit eta is below a known ``L_p``."""
    for name, (value, source) in zip(names, constants):
        if value is not None and math.isfinite(value) and eta < value * (1 - 1e-9):
            warnings.warn(StepSizeWarning(
                f"eta for agent {name!r} ({eta:g}) looks below its gradient Lipschitz constant ~{value:.4g} "
                f"({source}); the linearized step may oscillate or stall. Pass eta='auto' (the default) or "
                f"eta>={value:.4g}, or declare lipschitz= on the agent.", agent=name, suggestion={"eta": value}),
                stacklevel=6)  # <- EtaPlan.start <- family.start <- run_loop <- solve <- caller


class EtaPlan:
    """The eta of every agent in every round, resolved once at the start of a run (engine hook)."""

    def __init__(self, algorithm, names: Sequence[str], constants: list[tuple[float | None, str]] | None) -> None:
        self.algorithm, self.names, self.constants = algorithm, list(names), constants
        auto = getattr(algorithm, "auto_eta", None)
        self.fixed = auto_etas(constants, auto.factor) if auto is not None else None

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
            return cls(algorithm, names, backend.call("lipschitz", [(private,)] * len(agents)))
        from .schedules import Constant

        plan = cls(algorithm, names, None)
        if not private and isinstance(algorithm.eta_schedule, Constant):
            # an explicit eta is checked against the agent's declared bound, or where none is declared against the
            # curvature measured at the start (non-private runs only: a private run may not look at its data;
            # its residuals are still diagnosed at the end). A declared bound skips the estimate's 51 gradient
            # evaluations (seconds per agent on federated data).
            plan.constants = backend.call("lipschitz", [(False, True)] * len(agents))
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
        return {n: {"eta": e, "lipschitz": c[0], "source": c[1]}
                for n, e, c in zip(self.names, self.fixed, self.constants)}


def next_rho(schedule, t: int, state, gidx: Sequence[np.ndarray]) -> float:
    """rho of round ``t`` (engine hook). :class:`~cvxdp.schedules.AdaptiveRho` balances *relative* residuals —
    the primal one over ``max(||E z||, ||B w||)`` and the dual one over ``||lambda||`` (Boyd et al. §3.3.1's
    relative tolerances; OSQP's normalization) — all computed by the aggregator from released values; any
    other schedule gets the raw residuals."""
    from .schedules import AdaptiveRho

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
             etas: Sequence[float] | None, constants: Sequence[tuple[float | None, str]] | None,
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
    L = constants[p][0] if constants is not None and worst is not None else None
    eta_small = L is None or not math.isfinite(L) or (etas is not None and etas[p] < L)
    if algorithm == "ladmm" and worst is not None and etas is not None and eta_small:
        known = f" (its gradient Lipschitz constant is ~{L:.4g})" if L is not None and math.isfinite(L) else ""
        hint = (f"eta for agent {worst!r} is {etas[p]:.4g}{known}; pass eta='auto' (the default), a larger eta "
                "(e.g. 2x), or declare lipschitz= on the agent")
        suggestion = {"eta": 2 * etas[p] if not known else max(2 * etas[p], L)}
    else:
        hint = "pass rho='auto' (the default, adaptive), or a larger or smaller rho (try 10x either way)"
        suggestion = {"rho": "auto"}
    msg = (f"The run {kind}: primal residual {final:.3g} after {len(res)} rounds (largest at {who}). {hint}.")
    w = StepSizeWarning(msg, agent=worst, suggestion=suggestion)
    warnings.warn(w, stacklevel=stacklevel)
    out.append(w)
    return out


__all__ = ["ETA_FACTOR", "EtaPlan", "ETA_FLOOR", "auto_etas", "check_explicit_eta", "declared_lipschitz", "diagnose",
           "estimate_lipschitz", "lipschitz_constants"]
