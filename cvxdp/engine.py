"""The front door: :func:`solve` runs the round loop of SPEC §2 over a backend and accounts for privacy."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ._seeding import root_seed_sequence, seed_config
from ._validation import check_choice, check_float, check_int, fail
from .agent import Agent, check_agents
from .algorithms.base import Algorithm, dual_update, global_update
from .algorithms.ladmm import LinearizedADMM
from .backends import Backend, get_backend
from .checkpoint import checkpoint_path, fingerprint, load_checkpoint, save_checkpoint
from .errors import InvalidParameterError
from .feasibility import solution_violation
from .local_solver import DEFAULT_SOLVERS
from .outdir import OutputLock
from .results import Result
from .step_sizes import EtaPlan, diagnose, next_rho

ACCOUNTANTS = ("basic", "rdp", "pld")
HISTORY_COLUMNS = ["round", "objective", "consensus_residual", "primal_residual", "dual_residual", "max_violation",
                   "noise_magnitude", "rho", "eta", "solver_time", "fallbacks", "wall_time"]


def with_final_pld(history: pd.DataFrame, privacy: dict | None) -> pd.DataFrame:
    """Add the ``eps_pld`` column: the worst agent's PLD total in the last row (PLD is computed once, at the
    end, as it costs tens of ms per round); NaN in earlier rows (eps_basic / eps_rdp track every round)."""
    pld = ((privacy or {}).get("worst") or {}).get("pld")
    history = history.copy()
    history["eps_pld"] = np.nan
    if len(history) and pld is not None:
        history.loc[history.index[-1], "eps_pld"] = float(pld)
    return history


def _check_privacy(privacy: Any, algorithm: Algorithm) -> None:
    from .privacy import ObjectivePerturbation, OutputPerturbation

    if privacy is None:
        return
    if not isinstance(privacy, (ObjectivePerturbation, OutputPerturbation)):
        raise fail("privacy", "solve", "None, cvxdp.ObjectivePerturbation or cvxdp.OutputPerturbation",
                   type(privacy).__name__)
    privacy.validate()
    if not algorithm.private_ok:
        raise InvalidParameterError(f"{type(algorithm).__name__} is the non-private baseline; use "
                                    "cvxdp.LinearizedADMM for a private run, or privacy=None.")


def _check_budget(budget: Any) -> tuple[float, float] | None:
    if budget is None:
        return None
    if not isinstance(budget, (tuple, list)) or len(budget) != 2:
        raise fail("budget", "solve", "None or a pair (epsilon, delta)", budget)
    eps = check_float(budget[0], "budget epsilon", "solve", 0.0, math.inf)
    delta = check_float(budget[1], "budget delta", "solve", 0.0, 1.0, closed="left")
    return eps, delta


def _default_target_delta(privacy: Any, budget: tuple[float, float] | None, steps: int) -> float:
    if budget is not None and budget[1] > 0:
        return budget[1]
    delta = getattr(privacy, "delta", None)
    if delta:
        return float(min(delta if getattr(privacy, "scope", "step") == "total" else delta * steps, 0.5))
    return 1e-6


def solve(agents: Sequence[Agent], *, algorithm: Algorithm | None = None, privacy: Any = None,
          accountant: str = "pld", budget: tuple[float, float] | None = None,
          backend: str | Backend = "serial", seed: int | None = None, target_delta: float | None = None,
          solvers: tuple[str, ...] = DEFAULT_SOLVERS, progress: bool = False,
          callback: Callable[[int, dict], None] | None = None, checkpoint: str | Path | None = None,
          checkpoint_every: int = 1) -> Result:
    """Run a distributed (optionally differentially private) ADMM over ``agents``.

    Parameters
    ----------
    agents : list of Agent
        The declared agents (unique names, consistent shared keys).
    algorithm : LinearizedADMM or ADMM, default LinearizedADMM()
        The algorithm and its parameters (rounds, rho, eta, local updates, tolerances).
    privacy : ObjectivePerturbation, OutputPerturbation or None
        The mechanism applied to every local update; None runs without noise.
    accountant : {"pld", "rdp", "basic"}
        Accountant used for the budget guard, total-budget calibration and the per-round privacy column.
        The final ledger always reports all three.
    budget : (epsilon, delta), optional
        Per-agent total; the run stops before a round that would exceed it (``stop_reason == "budget"``).
    backend : "serial" or a Backend
        Where the agents run. Same seed, same numbers.
    seed : int or None, default None
        Root of the agents' SeedSequence (one generator per agent). None (the default): fresh, secret
        entropy from the operating system, so the noise cannot be replayed; ``result.config`` then records
        ``"seed": None, "seeded": False`` (the entropy is kept only in the private checkpoint, for resume).
        An int reproduces the run exactly: for research and tests, not for release (anyone who knows the
        seed can replay the noise).
    target_delta : float, optional
        Delta at which RDP/PLD totals are reported; default: the budget's delta, else T*J*delta_step
        for Gaussian noise, else 1e-6.
    solvers : tuple of str
        Fallback chain of the local conic solves.
    progress : bool
        Show a progress bar.
    callback : callable(round, row), optional
        Called after every round with the history row.
    checkpoint : path, optional
        Directory (or .pkl file) for checkpoints. If a checkpoint of this same run (same configuration and
        data) is there, the run resumes from it with the same random streams, so the result equals an
        uninterrupted run's. Written atomically every ``checkpoint_every`` rounds and at the end.
    checkpoint_every : int
        Rounds between checkpoints.

    Returns
    -------
    Result
    """
    algorithm = LinearizedADMM() if algorithm is None else algorithm
    if not isinstance(algorithm, Algorithm):
        raise fail("algorithm", "solve", "a cvxdp.LinearizedADMM or cvxdp.ADMM", type(algorithm).__name__)
    algorithm.validate()
    check_choice(accountant, "accountant", "solve", ACCOUNTANTS)
    budget = _check_budget(budget)
    seed, root = root_seed_sequence(seed, "solve")
    checkpoint_every = check_int(checkpoint_every, "checkpoint_every", "solve", 1)
    if checkpoint is not None:
        checkpoint_path(checkpoint)  # a directory or a .pkl file, not some other existing file
    backend = get_backend(backend)
    if algorithm.custom_loop:  # decentralized / sharing algorithms bring their own round structure
        with OutputLock(checkpoint, "checkpoint directory"):
            return algorithm.run(agents, privacy=privacy, accountant=accountant, budget=budget, backend=backend,
                                 seed=seed, target_delta=target_delta, solvers=tuple(solvers), progress=progress,
                                 callback=callback, checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    _check_privacy(privacy, algorithm)
    sizes = check_agents(agents, private=False)
    if privacy is not None:
        from .privacy.checks import check_public_initial

        check_public_initial(agents)
        for agent in agents:  # fails fast, naming the agent, when its sensitivity is missing
            privacy.noise_plan(agent, min_weight=1.0, separable=True, steps=1, accountant=accountant)

    from .privacy import PrivacyLedger

    keys = sorted(sizes)
    offsets = dict(zip(keys, np.cumsum([0] + [sizes[k] for k in keys])[:-1].tolist()))
    n_global = int(sum(sizes.values()))
    gidx = [np.concatenate([offsets[k] + np.arange(len(a.layout.shared[k])) for k in sorted(a.layout.shared)])
            for a in agents]
    names = [a.name for a in agents]
    J = algorithm.local_updates
    T = algorithm.rounds
    steps = T * J
    target_delta = _default_target_delta(privacy, budget, steps) if target_delta is None else \
        check_float(target_delta, "target_delta", "solve", 0.0, 1.0)
    ledger = PrivacyLedger(names, target_delta=target_delta)
    config = {"algorithm": algorithm.describe(), "privacy": privacy.describe() if privacy is not None else None,
              "accountant": accountant, "budget": list(budget) if budget else None, **seed_config(seed),
              "backend": type(backend).__name__, "solvers": list(solvers), "target_delta": target_delta,
              "agents": names, "shared_sizes": sizes}

    if hasattr(algorithm, "bind_epsilon"):  # the authors' eta schedule reads epsilon from the mechanism
        algorithm.bind_epsilon(getattr(privacy, "epsilon", None))
    fp = fingerprint(config, agents, context=checkpoint) if checkpoint is not None else None
    lock = OutputLock(checkpoint, "checkpoint directory").acquire()
    try:
        from .backends import NodeSpec
        from .worker import AgentWorker

        backend.start([NodeSpec(a.name, AgentWorker, (a, algorithm, s, tuple(solvers)))
                       for a, s in zip(agents, root.spawn(len(agents)))])
        infos = backend.call("info")
        state = _ServerState(ez=backend.call("shared"), lam=[np.zeros(len(g)) for g in gidx])
        saved = load_checkpoint(checkpoint, fp) if checkpoint is not None else None
        if saved is not None:
            state = saved["server"]
            backend.call("restore", [(s,) for s in saved["workers"]])
            ledger = PrivacyLedger.from_dict(saved["ledger"])
        # issue 12 (cvxdp/step_sizes.py): eta per agent when eta="auto"; explicit eta checked against L_p
        eta_plan = EtaPlan.start(algorithm, agents, backend, private=privacy is not None)
        if eta_plan.describe() is not None:
            config["eta_per_agent"] = eta_plan.describe()
        if privacy is not None and privacy.sensitivity == "paper":
            from .privacy.notes import PAPER_PRESET

            ledger.note(PAPER_PRESET)
        bar = tqdm(total=T, initial=state.t, disable=not progress, desc="cvxdp", unit="round", leave=False)
        while state.t < T and state.stop_reason is None:
            t = state.t + 1
            start = time.perf_counter()
            rho = next_rho(algorithm.rho_schedule, t, state, gidx)  # issue 12: relative residuals for rho="auto"
            etas = eta_plan.at(t)  # issue 12: one eta per agent
            eta = max(etas)
            w = global_update(state.ez, state.lam, gidx, n_global, rho)
            plans = [None] * len(agents)
            if privacy is not None:
                for p, (agent, info) in enumerate(zip(agents, infos)):
                    min_c = etas[p] if info.size > info.shared_size else etas[p] + rho
                    plans[p] = privacy.noise_plan(agent, min_weight=min_c, separable=info.is_box, steps=steps,
                                                  accountant=accountant)
                if budget is not None and any(ledger.would_exceed(n, plan, count=J, budget=budget, accountant=accountant)
                                              for n, plan in zip(names, plans)):
                    state.stop_reason = "budget"
                    break
            messages = [_message(t, w[g], rho, e, plan, privacy) for g, plan, e in zip(gidx, plans, etas)]
            reports = backend.call("step", [(m,) for m in messages], round=t)
            res_sq, consensus, noise_norms = 0.0, 0.0, []
            for p, rep in enumerate(reports):
                bw = w[gidx[p]]
                r = bw - rep.ez
                consensus += float(np.linalg.norm(r))
                res_sq += float(r @ r)
                state.lam[p] = dual_update(state.lam[p], rho, bw, rep.ez)
                if plans[p] is not None:
                    ledger.record(names[p], plans[p], count=J)
                noise_norms.extend(rep.noise_norms)
                state.agent_rows.append({
                    "round": t, "agent": rep.name, "objective": rep.objective, "violation": rep.violation,
                    "residual": float(np.linalg.norm(r)),
                    "noise_magnitude": float(np.mean(rep.noise_norms)) if rep.noise_norms else 0.0,
                    "solver_time": rep.solver_time, "compute_time": rep.compute_time,
                    "solver": "+".join(rep.solvers), "fallbacks": ";".join(rep.fallbacks)})
            state.ez = [rep.ez for rep in reports]
            state.primal = math.sqrt(res_sq)
            state.dual = rho * float(np.linalg.norm(np.concatenate([(w - state.w_prev)[g] for g in gidx]))) \
                if state.w_prev is not None else math.inf
            state.w_prev, state.rho_prev, state.t = w, rho, t
            row = {"round": t, "objective": sum(r.objective for r in reports), "consensus_residual": consensus,
                   "primal_residual": state.primal, "dual_residual": state.dual,
                   "max_violation": max(r.violation for r in reports),
                   "noise_magnitude": float(np.mean(noise_norms)) if noise_norms else 0.0, "rho": rho, "eta": eta,
                   "solver_time": sum(r.solver_time for r in reports),
                   "fallbacks": sum(len(r.fallbacks) for r in reports)}
            if privacy is not None:  # privacy spent so far, worst agent; PLD only at the end (it costs ~10 ms)
                for acc in ("basic", "rdp"):
                    row[f"eps_{acc}"] = max(ledger.spent(n, acc)[0] for n in names)
            row["wall_time"] = time.perf_counter() - start
            state.rows.append(row)
            if (algorithm.tol_primal is not None and algorithm.tol_dual is not None
                    and state.primal <= algorithm.tol_primal and state.dual <= algorithm.tol_dual):
                state.stop_reason = "tolerance"
            if checkpoint is not None and (t % checkpoint_every == 0 or state.stop_reason or t == T):
                save_checkpoint(checkpoint, {"fingerprint": fp, "server": state, "workers": backend.call("state"),
                                             "ledger": ledger.to_dict(), "entropy": root.entropy})
            bar.update(1)
            bar.set_postfix(residual=f"{state.primal:.2e}", objective=f"{row['objective']:.4g}")
            if callback is not None:
                callback(t, row)
        bar.close()
        rho_final = state.rho_prev if state.rho_prev is not None else algorithm.rho_schedule(1)
        w_final = global_update(state.ez, state.lam, gidx, n_global, rho_final)
        local = dict(zip(names, backend.call("local")))
    finally:
        backend.close()
        lock.release()
    solution = {k: w_final[offsets[k]:offsets[k] + sizes[k]] for k in keys}
    history = pd.DataFrame(state.rows) if state.rows else pd.DataFrame(columns=HISTORY_COLUMNS)
    privacy_summary = ledger.summary()
    history = with_final_pld(history, privacy_summary)
    agent_history = pd.DataFrame(state.agent_rows)
    # issue 12 (cvxdp/step_sizes.py): warn, naming the agent, when the run diverged or stagnated
    diagnose(history, agent_history, stop_reason=state.stop_reason or "rounds", algorithm=algorithm.name,
             etas=eta_plan.at(T), constants=eta_plan.constants)
    return Result(history=history, agent_history=agent_history, solution=solution, local=local,
                  privacy=privacy_summary, config=config, stop_reason=state.stop_reason or "rounds", ledger=ledger,
                  agents=list(agents), solution_violation=solution_violation(agents, solution, local))


@dataclass
class _ServerState:
    """The aggregator's side of a run; with the workers' states and the ledger it is a checkpoint."""

    ez: list[np.ndarray]
    lam: list[np.ndarray]
    t: int = 0
    rho_prev: float | None = None
    primal: float = 0.0
    dual: float = 0.0
    w_prev: np.ndarray | None = None
    rows: list[dict] = field(default_factory=list)
    agent_rows: list[dict] = field(default_factory=list)
    stop_reason: str | None = None


def _message(t: int, bw: np.ndarray, rho: float, eta: float, plan: Any, privacy: Any):
    from .worker import RoundMessage

    return RoundMessage(round=t, bw=bw, rho=rho, eta=eta, plan=plan,
                        placement=privacy.placement if privacy is not None else None)
