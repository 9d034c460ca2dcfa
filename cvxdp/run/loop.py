"""The only round loop: budget guard, ledger, tolerance stop, progress, callback, checkpoint and Result.

Every algorithm family (:mod:`cvxdp.families`) plugs in through :class:`cvxdp.protocol.Family`; the
backend only places the nodes and moves messages. Per round: the family plans the round from public values
(no data touched), the loop stops before a round that would exceed the budget, the nodes ``step`` and
return their :class:`~cvxdp.protocol.Release` (checked: nothing else may leave a node), the ledger records
the round's charges, the family aggregates the releases into the released metrics, and — only when
``evaluate`` is on — the nodes ``evaluate`` on their private data; those values are kept apart and labelled
:data:`~cvxdp.protocol.EVALUATION_LABEL`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ._seeding import seed_config
from .backends import Backend
from .checkpoint import load_checkpoint, save_checkpoint
from .errors import CvxdpError
from .feasibility import solution_violation
from .outdir import OutputLock
from .protocol import EVALUATION_LABEL, Evaluation, Family, Release, ordered
from .results import Result


@dataclass
class LoopState:
    """The loop's own progress; with the family's server state, the nodes' states and the ledger it is a
    checkpoint."""

    t: int = 0
    rows: list[dict] = field(default_factory=list)
    agent_rows: list[dict] = field(default_factory=list)
    eval_rows: list[dict] = field(default_factory=list)
    eval_agent_rows: list[dict] = field(default_factory=list)
    stop_reason: str | None = None


def _check_releases(releases: Sequence[Any], names: Sequence[str], t: int) -> None:
    for name, rel in zip(names, releases):
        if not isinstance(rel, Release):
            raise CvxdpError(f"Agent {name!r} returned a {type(rel).__name__} from its step in round {t}; a node "
                             "may only release a cvxdp.protocol.Release.")


def _check_evaluations(evaluations: Sequence[Any], names: Sequence[str], t: int) -> None:
    for name, ev in zip(names, evaluations):
        if not isinstance(ev, Evaluation):
            raise CvxdpError(f"Agent {name!r} returned a {type(ev).__name__} from evaluate in round {t}; "
                             "expected a cvxdp.protocol.Evaluation.")


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
    done = loop.t
    evaluated = len(loop.eval_rows)
    if done == 0 or (evaluate and evaluated == done) or (not evaluate and evaluated == 0):
        return
    before = f"rounds {loop.eval_rows[0]['round']}-{loop.eval_rows[-1]['round']}" if evaluated else "no round"
    now = "evaluates" if evaluate else "does not evaluate"
    warnings.warn(f"The checkpoint's run evaluated {before} of its {done} on the agents' private data, and this "
                  f"resumed run {now} (evaluate={evaluate}): the evaluated columns of the history cover only part of "
                  "the rounds (result.config['evaluation']['rounds'] lists their ranges). Resume with the same evaluate to "
                  "keep them complete.", UserWarning, stacklevel=4)


def run_loop(family: Family, *, backend: Backend, root: np.random.SeedSequence, seed: int | None,
             base_config: dict[str, Any], evaluate: bool, progress: bool = False,
             callback: Callable[[int, dict], None] | None = None, checkpoint: str | Path | None = None,
             checkpoint_every: int = 1) -> Result:
    """Run ``family`` over ``backend`` and assemble the :class:`~cvxdp.Result` (see :func:`cvxdp.solve`)."""
    names = family.names
    config = {**base_config, **seed_config(seed), **family.config()}
    # the backend only places nodes: a run checkpointed on one backend resumes on another
    fp = family.fingerprint({k: v for k, v in config.items() if k != "backend"}, checkpoint) \
        if checkpoint is not None else None
    config["evaluation"] = {"evaluated": bool(evaluate), "label": EVALUATION_LABEL}
    lock = OutputLock(checkpoint, "checkpoint directory").acquire()
    try:
        backend.start(family.node_specs(root.spawn(len(names))))
        state = family.start(backend)
        ledger = family.new_ledger()
        loop = LoopState()
        saved = load_checkpoint(checkpoint, fp) if checkpoint is not None else None
        if saved is not None:
            state, loop = saved["server"], saved["loop"]
            backend.call("restore", [(s,) for s in saved["nodes"]])
            ledger = family.ledger_from_dict(saved["ledger"])
            _warn_evaluation_change(loop, evaluate)
        family.notes(ledger, backend)
        T = family.rounds
        bar = tqdm(total=T, initial=loop.t, disable=not progress, desc=f"cvxdp {family.algorithm.name}",
                   unit=family.unit, leave=False)
        while loop.t < T and loop.stop_reason is None:
            t = loop.t + 1
            start = time.perf_counter()
            plan = family.plan(t, state)
            if family.budget is not None and family.would_exceed(ledger, plan):
                loop.stop_reason = "budget"
                break
            family.before_step(t, plan, state, ledger)
            releases = backend.call("step", [(m,) for m in plan.messages], round=t)
            _check_releases(releases, names, t)
            family.record(ledger, t, plan)
            row, agent_rows = family.aggregate(t, plan, releases, state)
            row = {"round": t, **plan.released, **row}
            for i, extra in enumerate(plan.agent_released or [{} for _ in names]):
                agent_rows[i] = {"round": t, "agent": names[i], **extra, **agent_rows[i]}
            if family.privacy is not None:
                row.update(family.privacy_row(ledger, t))
            full = row
            if evaluate:
                evaluations = backend.call("evaluate", [(t,) for _ in names], round=t)
                _check_evaluations(evaluations, names, t)
                ev_row, ev_agents = family.evaluation_row(evaluations)
                loop.eval_rows.append({"round": t, **ev_row})
                loop.eval_agent_rows.extend({"round": t, "agent": n, **r} for n, r in zip(names, ev_agents))
                full = {**row, **ev_row}
            row["wall_time"] = time.perf_counter() - start
            loop.rows.append(row)
            loop.agent_rows.extend(agent_rows)
            loop.t = t
            if family.converged(t, state, row):
                loop.stop_reason = "tolerance"
            if checkpoint is not None and (t % checkpoint_every == 0 or loop.stop_reason or t == T):
                save_checkpoint(checkpoint, {"fingerprint": fp, "server": state, "loop": loop,
                                             "nodes": backend.call("state"), "ledger": ledger.to_dict(),
                                             "entropy": root.entropy})
            bar.update(1)
            bar.set_postfix(**family.postfix(state, full))
            if callback is not None:
                callback(t, {**full, "wall_time": row["wall_time"]})
        bar.close()
        local = dict(zip(names, backend.call("local")))
        solution = family.solution(state, local)
        extras = family.collect(state, backend)
    finally:
        backend.close()
        lock.release()
    config["evaluation"]["rounds"] = _ranges([int(r["round"]) for r in loop.eval_rows])
    evaluated_cols = sorted({k for r in loop.eval_rows for k in r} - {"round"})
    config["evaluation"]["columns"] = evaluated_cols
    config["evaluation"]["agent_columns"] = sorted({k for r in loop.eval_agent_rows for k in r} - {"round", "agent"})
    history = _frame(loop.rows, loop.eval_rows, ("round",), family.history_order)
    if not len(history.columns):
        history = pd.DataFrame(columns=[c for c in family.history_order])
    agent_history = _frame(loop.agent_rows, loop.eval_agent_rows, ("round", "agent"), family.agent_order)
    summary = family.summary(ledger)
    history = family.finish_history(history, summary)
    agents = family.agents
    result = Result(history=history, agent_history=agent_history, solution=solution, local=local, privacy=summary,
                    config=config, stop_reason=loop.stop_reason or "rounds", ledger=ledger, agents=list(agents),
                    solution_violation=solution_violation(agents, solution, local) if family.violation_check
                    else None, **extras)
    return family.finish(result, state)
