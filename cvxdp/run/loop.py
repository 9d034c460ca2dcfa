"""The only round loop: budget guard, ledger, tolerance stop, progress, callback, checkpoint and Result.

Every algorithm family plugs in through :class:`cvxdp.run.family.Family`; the backend only places the nodes
(:class:`cvxdp.model.node.Node`) and moves messages. Per round: the family plans the round from public values
(no data touched) with each node's privacy :class:`~cvxdp.run.family.Charge`; the loop stops before a round
that would take an agent past the budget; the nodes ``step`` and return their
:class:`~cvxdp.model.node.Release` (checked: nothing else may leave a node); the ledger records the charges;
the family aggregates the releases into the released metrics; and, only when ``evaluate`` is on, the nodes
``evaluate`` on their private data. Those values are kept apart and labelled
:data:`~cvxdp.model.node.EVALUATION_LABEL`.

The ledger, its per-round privacy columns (worst agent's basic and RDP totals; PLD once, at the end) and its
summary are the same for every family.
"""

from __future__ import annotations

import contextlib
import gc
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..errors import CvxdpError, PartyRefusedError, check_int
from ..model import EVALUATION_LABEL, Evaluation, Node, Release, solution_violation
from ..privacy import BudgetGuard, PrivacyLedger
from .family import Family, RoundPlan, ordered
from .results import Result
from .storage import OutputLock, fingerprint, load_checkpoint, save_checkpoint

if TYPE_CHECKING:  # annotations only
    from .backends import Backend


@dataclass
class LoopState:
    """The loop's own progress; with the family's state, the nodes' states and the ledger it is a checkpoint."""

    t: int = 0
    rows: list[dict] = field(default_factory=list)
    agent_rows: list[dict] = field(default_factory=list)
    eval_rows: list[dict] = field(default_factory=list)
    eval_agent_rows: list[dict] = field(default_factory=list)
    stop_reason: str | None = None
    refused_by: str | None = None  # the party whose own budget ended the run (a federation)


def _check(values: Sequence[Any], kind: type, names: Sequence[str], t: int, what: str) -> None:
    for name, value in zip(names, values):
        if not isinstance(value, kind):
            raise CvxdpError(f"Agent {name!r} returned a {type(value).__name__} from its {what} in round {t}; a node "
                             f"may only return a cvxdp.model.{kind.__name__} there.")


def _frame(rows: list[dict], evals: list[dict], keys: tuple[str, ...], order: Sequence[str]) -> pd.DataFrame:
    """Released rows joined with the evaluation rows of the same keys (absent: missing values)."""
    by_key = {tuple(e[k] for k in keys): e for e in evals}
    merged = [{**r, **by_key.get(tuple(r[k] for k in keys), {})} for r in rows]
    frame = pd.DataFrame(merged)
    return ordered(frame, order) if len(frame.columns) else frame


def _ranges(rounds: Sequence[int]) -> list[list[int]]:
    """``[1, 2, 3, 7, 8] -> [[1, 3], [7, 8]]``: the evaluated rounds, compactly."""
    out: list[list[int]] = []
    for r in rounds:
        if out and r == out[-1][1] + 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return out


def _warn_evaluation_change(loop: LoopState, evaluate: bool) -> None:
    """A resumed run with another ``evaluate`` than the checkpointed rounds: the problem is the same (the flag only
    decides what is recorded), so it resumes, but the evaluated columns then cover only some rounds; say which."""
    done, evaluated = loop.t, len(loop.eval_rows)
    if done == 0 or (evaluate and evaluated == done) or (not evaluate and evaluated == 0):
        return
    before = f"rounds {loop.eval_rows[0]['round']}-{loop.eval_rows[-1]['round']}" if evaluated else "no round"
    now = "evaluates" if evaluate else "does not evaluate"
    warnings.warn(f"The checkpoint's run evaluated {before} of its {done} on the agents' private data, and this "
                  f"resumed run {now} (evaluate={evaluate}): the evaluated columns of the history cover only part of "
                  "the rounds (result.config['evaluation']['rounds'] lists their ranges). Resume with the same evaluate to "
                  "keep them complete.", UserWarning, stacklevel=4)


def _exceeds(family: Family, guard: BudgetGuard, ledger: PrivacyLedger, plan: RoundPlan, t: int) -> bool:
    """Whether recording the plan's charges would take some agent past the budget (the guard's accountant; one
    search per distinct charge, then a comparison with the last round's charges)."""
    charges = [(name, c.event, c.count, c.claim) for name, c in zip(family.names, plan.charges)
               if c is not None and c.claim[0] > 0]
    return guard.exceeds(ledger, charges, round=t, rounds=family.rounds)


def _privacy_row(family: Family, ledger: PrivacyLedger, t: int) -> dict[str, float]:
    """Privacy spent so far by the worst agent (basic and RDP; PLD costs too much per round: once, at the end)."""
    row = {f"eps_{acc}": ledger.worst_epsilon(acc) for acc in ("basic", "rdp")}
    return {**row, **family.privacy_columns(ledger, t)}


def _with_final_pld(history: pd.DataFrame, summary: dict) -> pd.DataFrame:
    """The ``eps_pld`` column: the worst agent's PLD total in the last row, NaN in earlier rows."""
    pld = (summary.get("worst") or {}).get("pld")
    history = history.copy()
    history["eps_pld"] = np.nan
    if len(history) and pld is not None:
        history.loc[history.index[-1], "eps_pld"] = float(pld)
    return history


def _postfix(family: Family, row: dict) -> dict[str, str]:
    """The progress bar: a released residual, and the objective labelled as private evaluation when there is one."""
    label, column = family.progress
    out = {label: f"{row[column]:.2e}"} if column in row and row[column] is not None else {}
    if "objective" in row:
        out["objective (private eval)"] = f"{row['objective']:.4g}"
    return out


def callback_label(columns: Sequence[str]) -> dict[str, Any]:
    """The label of a ``callback`` row: ``{"evaluation": {"label": EVALUATION_LABEL, "columns": [...]}}``, the row's
    keys computed on the agents' private data (empty with ``evaluate=False``). The values stay flat in the row as
    before (backwards compatible); every other key is released or public accounting."""
    return {"evaluation": {"label": EVALUATION_LABEL, "columns": list(columns)}}


def run_loop(family: Family, *, backend: Backend, agents: Sequence[Any] | None, root: np.random.SeedSequence,
             seed: int | None, base_config: dict[str, Any], evaluate: bool, progress: bool = False,
             callback: Callable[[int, dict], None] | None = None, checkpoint: str | Path | None = None,
             checkpoint_every: int = 1) -> Result:
    """Run ``family`` over ``backend`` and assemble the :class:`~cvxdp.Result` (see :func:`cvxdp.solve`).

    ``agents``: a simulation's agents (one operator holds every party's data: the nodes are built from them and the
    result keeps their local solutions, labelled private). None: a federation, where each party builds its own node
    and the coordinator holds the parties' public declarations (``family.agents``) and releases only.
    """
    names = family.names
    family.simulation = agents is not None
    config = {**base_config, **seed_config(seed), **family.config()}
    # the backend only places nodes: a run checkpointed on one backend resumes on another
    fp = None
    if checkpoint is not None:  # a federation's coordinator knows the parties by their public declarations
        declared = {f"agent {d.name!r} declaration": d.to_dict() for d in family.agents} if agents is None else {}
        fp = fingerprint({k: v for k, v in config.items() if k != "backend"}, agents or (),
                         data={**declared, **family.fingerprint_data()}, context=checkpoint)
    config["evaluation"] = {"evaluated": bool(evaluate), "label": EVALUATION_LABEL}
    lock = OutputLock(checkpoint, "checkpoint directory").acquire()
    frozen = contextlib.ExitStack()
    try:
        frozen.enter_context(one_blas_thread())  # the in-process nodes and the aggregation (see its docstring)
        # a checkpoint of another run is refused before any node is started
        saved = load_checkpoint(checkpoint, fp) if checkpoint is not None else None
        backend.start(family.nodes(), agents, root.spawn(len(names)) if agents is not None else None)
        frozen.enter_context(long_lived_frozen())  # the nodes too, now that they exist
        state = family.start(backend.call(Node.declare))
        ledger = PrivacyLedger(names, target_delta=family.target_delta)
        loop = LoopState()
        if saved is not None:
            state, loop = saved["server"], saved["loop"]
            backend.call(Node.restore, [(s,) for s in saved["nodes"]])
            ledger = PrivacyLedger.from_dict(saved["ledger"])
            _warn_evaluation_change(loop, evaluate)
        for note, voids, warn in family.notes:
            ledger.note(note, voids=voids, warn=warn)
        private = family.privacy is not None
        guard = BudgetGuard(family.budget, family.guard_accountant) if private and family.budget is not None \
            else None
        where = f" ({backend.placement})" if backend.placement else ""  # e.g. a Ray backend running serially
        bar = tqdm(total=family.rounds, initial=loop.t, disable=not progress,
                   desc=f"cvxdp {family.algorithm.name}{where}", unit=family.unit, leave=False)
        while loop.t < family.rounds and loop.stop_reason is None:
            t = loop.t + 1
            start = time.perf_counter()
            plan = family.plan(t, state)
            if guard is not None and _exceeds(family, guard, ledger, plan, t):
                loop.stop_reason = "budget"
                break
            for note in plan.notes:
                ledger.note(note)
            try:
                releases = backend.call(Node.step, [(m,) for m in plan.messages], round=t)
            except PartyRefusedError as exc:  # a party's own ledger is the last word on its budget
                if exc.reason != "budget":
                    raise
                loop.stop_reason, loop.refused_by = "budget", exc.party
                break
            _check(releases, Release, names, t, "step")
            for name, charge in zip(names, plan.charges):
                if charge is not None:
                    ledger.record(name, charge.event, charge.count, claim=charge.claim)
            row, agent_rows = family.aggregate(t, plan, releases, state)
            row = {"round": t, **plan.released, **row}
            for i, extra in enumerate(plan.agent_released or [{} for _ in names]):
                agent_rows[i] = {"round": t, "agent": names[i], **extra, **agent_rows[i]}
            if private:
                row.update(_privacy_row(family, ledger, t))
            full, evaluated = row, []
            if evaluate:
                evaluations = backend.call(Node.evaluate, [(t,) for _ in names], round=t)
                _check(evaluations, Evaluation, names, t, "evaluate")
                ev_row, ev_agents = family.evaluate(evaluations)
                loop.eval_rows.append({"round": t, **ev_row})
                loop.eval_agent_rows.extend({"round": t, "agent": n, **r} for n, r in zip(names, ev_agents))
                full, evaluated = {**row, **ev_row}, sorted(ev_row)
            row["wall_time"] = time.perf_counter() - start
            loop.rows.append(row)
            loop.agent_rows.extend(agent_rows)
            loop.t = t
            if family.converged(t, state, row):
                loop.stop_reason = "tolerance"
            if checkpoint is not None and (t % checkpoint_every == 0 or loop.stop_reason or t == family.rounds):
                save_checkpoint(checkpoint, {"fingerprint": fp, "server": state, "loop": loop,
                                             "nodes": backend.call(Node.state), "ledger": ledger.to_dict(),
                                             "entropy": root.entropy if agents is not None else None})
            bar.update(1)
            bar.set_postfix(**_postfix(family, full))
            if callback is not None:
                callback(t, {**full, "wall_time": row["wall_time"], **callback_label(evaluated)})
        bar.close()
        local = dict(zip(names, backend.call(Node.local))) if agents is not None else {}  # private: simulation only
        solution = family.solution(state)
        if loop.refused_by is not None:
            config["stopped_by"] = {"party": loop.refused_by, "round": loop.t + 1, "reason": "the party's own budget"}
        config["evaluation"]["rounds"] = _ranges([int(r["round"]) for r in loop.eval_rows])
        config["evaluation"]["columns"] = sorted({k for r in loop.eval_rows for k in r} - {"round"})
        config["evaluation"]["agent_columns"] = sorted({k for r in loop.eval_agent_rows for k in r}
                                                       - {"round", "agent"})
        history = _frame(loop.rows, loop.eval_rows, ("round",), family.history_order)
        if not len(history.columns):
            history = pd.DataFrame(columns=list(family.history_order))
        agent_history = _frame(loop.agent_rows, loop.eval_agent_rows, ("round", "agent"), family.agent_order)
        summary = ledger.summary()
        history = ordered(_with_final_pld(history, summary), family.history_order)
        violation = solution_violation(agents, solution, local, private=family.privacy is not None,
                                       stop_reason=loop.stop_reason) \
            if agents is not None and family.violation_check else None  # each agent's feasible set is private: a federation's parties check it themselves
        result = Result(history=history, agent_history=agent_history, solution=solution, local=local,
                        privacy=summary, config=config, stop_reason=loop.stop_reason or "rounds", ledger=ledger,
                        agents=list(agents or ()), solution_violation=violation)
        family.finish(result, state, backend)
    finally:
        frozen.close()
        backend.close()
        lock.release()
    return result


_frozen_by_a_run = False  # whether the objects frozen now were frozen by long_lived_frozen (not by the caller)


@contextlib.contextmanager
def long_lived_frozen() -> Iterator[None]:
    """Exempt the objects that exist now (the agents' CVXPY trees, the compiled subproblems, the nodes, and the
    caller's own) from the garbage collector's scans until the block ends (:func:`gc.freeze`, then
    ``gc.unfreeze()``).

    A run creates few long-lived objects, but each full collection walks every tracked one: with 10,000 agents
    that is millions of objects and about a second, as much as a round (``benchmarks/bench_many_agents.py``).
    Nothing is lost: reference counting frees objects as usual, and a cycle among frozen objects is collected after
    the block, when ``gc.unfreeze()`` returns them to the oldest generation. Inside a block of its own (``solve``
    around its checks, the loop once the nodes exist) it freezes the newer objects too and leaves the thaw to the
    outer block. A caller who froze objects itself (``gc.get_freeze_count() > 0`` before any block, e.g. a pre-fork
    server) is left as it is: nothing is frozen or unfrozen. The state is the process's, like the collector's: of two
    runs in two threads, the first to end thaws both, and the other's remaining rounds are scanned as without a
    freeze.
    """
    global _frozen_by_a_run
    if _frozen_by_a_run:  # inside a block: freeze what is new, the outer block thaws
        gc.freeze()
        yield
        return
    if gc.get_freeze_count():  # the caller's own freeze (counting walks the frozen objects: only asked here)
        yield
        return
    gc.freeze()
    _frozen_by_a_run = True
    try:
        yield
    finally:
        _frozen_by_a_run = False
        gc.unfreeze()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit the BLAS libraries loaded in this process to one thread until the block ends, then restore their
    counts (threadpoolctl): what runs here (the serial backend's nodes, the family's aggregation) computes as
    every Ray actor does (``OMP_NUM_THREADS=1``).

    A run's products are small (an agent's rows times a parameter block, dot products of its shared vectors): a
    second BLAS thread buys little and, on a machine shared with other processes, its spinning workers cost far
    more. Measured on the FEMNIST-sized round of ``benchmarks/bench_fl.py`` (10 agents of 153 x 784, 62 classes)
    on 2 cores at a load average of 4.7: 59-126 ms of CPU per round with OpenBLAS's default 2 threads against
    15-16 ms with one (float32: 62-238 against 12-13 ms); most of the loss was the aggregation's dot products.
    The caller's own limits come back when the run ends (also when it fails).
    """
    from threadpoolctl import threadpool_limits  # with scikit-learn; loaded when a run starts

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def root_seed_sequence(seed: int | None, owner: str = "solve") -> tuple[int | None, np.random.SeedSequence]:
    """Validate ``seed`` and return it with the run's root SeedSequence.

    Parameters
    ----------
    seed : int >= 0 or None
        None: fresh entropy from the operating system (``SeedSequence()``), secret and not recorded in
        the result. An int: a reproducible (research) run.
    owner : str
        Named in the error message.

    Returns
    -------
    seed : int or None
        The validated seed.
    root : numpy.random.SeedSequence
        Spawn one child per agent from it.
    """
    if seed is None:
        return None, np.random.SeedSequence()
    seed = check_int(seed, "seed", owner, 0)
    return seed, np.random.SeedSequence(seed)


def seed_config(seed: int | None) -> dict:
    """The public record of the seed: ``{"seed": seed or None, "seeded": bool}``."""
    return {"seed": seed, "seeded": seed is not None}


__all__ = ['LoopState', 'long_lived_frozen', 'one_blas_thread', 'run_loop']
