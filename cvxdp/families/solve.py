"""The front door: :func:`solve` validates the common arguments and runs the algorithm's family on the one
round loop (:mod:`cvxdp.run.loop`) over a backend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import check_budget, check_choice, check_int, fail
from ..model import DEFAULT_SOLVERS, Agent, checked_agents
from ..run import (
    Backend,
    Result,
    SerialBackend,
    checkpoint_path,
    get_backend,
    long_lived_frozen,
    root_seed_sequence,
    run_loop,
)
from . import Algorithm, LinearizedADMM, family_class

ACCOUNTANTS = ("basic", "rdp", "pld")


def solve(agents: Sequence[Agent], *, algorithm: Algorithm | None = None, privacy: Any = None,
          accountant: str = "pld", budget: tuple[float, float] | None = None,
          backend: str | Backend = "serial", seed: int | None = None, target_delta: float | None = None,
          solvers: tuple[str, ...] = DEFAULT_SOLVERS, progress: bool = False,
          callback: Callable[[int, dict], None] | None = None, checkpoint: str | Path | None = None,
          checkpoint_every: int = 1, evaluate: bool | None = None) -> Result:
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
        Called after every round with the history row (a dict). With evaluation on, the row also holds the
        round's non-private evaluation values (flat, as in the history), and always the key ``"evaluation"``:
        ``{"label": "non-private evaluation (not released)", "columns": [the row's keys computed on private data]}``
        (empty with ``evaluate=False``); drop those keys before showing or sending a row as released.
    checkpoint : path, optional
        Directory (or .pkl file) for checkpoints. If a checkpoint of this same run (same configuration and
        data) is there, the run resumes from it with the same random streams, so the result equals an
        uninterrupted run's. Written atomically every ``checkpoint_every`` rounds and at the end.
    checkpoint_every : int
        Rounds between checkpoints.
    evaluate : bool or None, default None
        Whether the nodes compute *non-private evaluation* values on their private data after every round
        (objective, constraint violation, actual noise norms, solver names/timings/fallbacks). They never
        travel in a release and are not accounted for: they are history columns listed in
        ``result.config["evaluation"]["columns"]`` (also ``result.evaluation``), labelled "non-private
        evaluation (not released)". None: True on the serial backend (a simulation), False on any other.

    Returns
    -------
    Result

    Notes
    -----
    While the run is set up and while the rounds run, the objects that exist (the agents, then the nodes too) are
    frozen out of Python's garbage collector (:func:`cvxdp.run.long_lived_frozen`, :func:`gc.freeze`; with many
    agents a full collection would walk every CVXPY tree each time) and returned to it when the run ends.
    Reference counting frees objects as usual; only the collection of reference cycles among them waits for the
    end of the run. A process that called :func:`gc.freeze` itself is left alone.
    """
    algorithm = LinearizedADMM() if algorithm is None else algorithm
    if not isinstance(algorithm, Algorithm):
        raise fail("algorithm", "solve", "a cvxdp algorithm (LinearizedADMM, ADMM, MADMM, DVP, RADMM, MRADMM, "
                   "ADMMSharing)", type(algorithm).__name__)
    algorithm.validate()
    check_choice(accountant, "accountant", "solve", ACCOUNTANTS)
    budget = check_budget(budget, "solve", optional=True)
    seed, root = root_seed_sequence(seed, "solve")
    checkpoint_every = check_int(checkpoint_every, "checkpoint_every", "solve", 1)
    if checkpoint is not None:
        checkpoint_path(checkpoint)  # a directory or a .pkl file, not some other existing file
    backend = get_backend(backend)
    evaluate = _check_evaluate(evaluate, backend)
    described = algorithm.describe()  # before the family binds run-time values (the authors' eta schedule)
    cls = family_class(algorithm)
    with long_lived_frozen():  # the agents' CVXPY trees are not scanned by the collector while the run is set up
        agents = checked_agents(agents, cls.agent_type or (Agent,), cls.agent_label)
        # the coordinator's side reads the agents' public declarations only (SPEC §7); the simulation's backend builds
        # each party's node from its agent
        family = cls(algorithm, [a.declaration() for a in agents], privacy=privacy, accountant=accountant,
                     budget=budget, solvers=tuple(solvers), target_delta=target_delta)
        base = {"algorithm": described, "privacy": privacy.describe() if privacy is not None else None,
                "accountant": accountant, "budget": list(budget) if budget else None,
                "backend": type(backend).__name__, "solvers": list(solvers), "agents": family.names}
        return run_loop(family, backend=backend, agents=agents, root=root, seed=seed, base_config=base,
                        evaluate=evaluate, progress=progress, callback=callback, checkpoint=checkpoint,
                        checkpoint_every=checkpoint_every)


def _check_evaluate(evaluate: Any, backend: Backend) -> bool:
    """``None``: evaluate on the serial backend (a simulation), not on any other (a deployment)."""
    if evaluate is None:
        return isinstance(backend, SerialBackend)
    if not isinstance(evaluate, bool):
        raise fail("evaluate", "solve", "None, True or False", evaluate)
    return evaluate
