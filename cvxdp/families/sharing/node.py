"""The party side of the sharing family (SPEC §5): party m of DP ADMM sharing over vertical features (Hu et al.).

Party m (:class:`SharingNode`) holds its feature block ``D_m`` and its model ``x_m``; per epoch it pulls the
centre's broadcast (``sum_k q_k - z`` and ``y``), runs the x-update (6) and releases
``q_m = D_m x_m + N(0, sigma^2 I)``, nothing else. Its model ``x_m`` never leaves it (a simulation hands it to
its operator as ``result.local``, private).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidParameterError
from ...model import Evaluation, Node, PartyUpdate, Release, compiled_metrics
from ...privacy import check_plan_matches
from .params import party_plan


@dataclass(frozen=True)
class SharingMessage:
    """Centre -> party in epoch t (Algorithm 1, line 12): ``sum_k q_k - z`` and ``y`` (the same for all), and the
    centre's copy of the party's noise plan (a cross-check: the party draws its own)."""

    round: int
    residual: np.ndarray
    y: np.ndarray
    plan: Any = None  # cvxdp.privacy.NoisePlan


class SharingNode(Node):
    """Party m's runtime: private data, model, cached own message, generator. Only :meth:`step` releases.

    Parameters
    ----------
    party : cvxdp.VerticalParty
    seed : numpy.random.SeedSequence
        The party's own entropy (its generator is never reseeded).
    algorithm : cvxdp.ADMMSharing
        Its ``rho``, ``lam`` and ``epochs``.
    solvers : tuple of str
    mechanism : cvxdp.SharingGaussian or None
        The party's own mechanism (in a federation: its own policy): the party calibrates its noise plan itself
        (:func:`~cvxdp.families.sharing.params.party_plan`, from its own shapes and bound and the run's public
        ``b1`` and number of parties); a message's plan is only compared with it. None: non-private.
    accountant : {"pld", "rdp", "basic"}
        How ``calibrate="total"`` spreads the total over the epochs.
    b1 : float or None
        Assumption 1.1's common bound of the run (public; the largest declared bound). A private run needs it to be at
        least the party's own bound.
    parties : int
        The run's number of parties M (public; Lemma 1's sensitivity reads it).
    """

    def __init__(self, party: Any, seed: np.random.SeedSequence, algorithm: Any, solvers: tuple[str, ...],
                 mechanism: Any = None, accountant: str = "pld", b1: float | None = None, parties: int = 1) -> None:
        self.name = party.name
        rho, lam = float(algorithm.rho), float(algorithm.lam)
        # the party's own checks of its data (the centre sees its declaration only)
        if lam == 0 and party.bound is None and np.linalg.matrix_rank(party.data) < party.n_features:
            raise InvalidParameterError(f"Party {party.name!r}: with lam = 0 the x-update needs bound=... (its "
                                        "features are rank deficient).")
        self.plan = None
        if mechanism is not None:
            party.check_private(mechanism.sensitivity)
            if b1 is None or b1 < float(party.bound):
                raise InvalidParameterError(f"Party {party.name!r}: the run's common bound b1 = {b1!r} is below its "
                                            f"own bound {float(party.bound)!r} (Assumption 1.1).")
            self.plan, _ = party_plan(mechanism, party, rho=rho, lam=lam, b1=float(b1), parties=int(parties),
                                      epochs=int(algorithm.epochs), accountant=accountant)
        self.party = party
        self.D = party.data
        self.rho = rho
        self.update = PartyUpdate(party, rho, lam, solvers)
        self.rng = np.random.default_rng(seed)
        self.x = np.zeros(party.n_features)
        self.q = np.zeros(party.n_samples)  # the locally cached D_m x~_m (what this party last sent)
        self.last: dict[str, Any] = {"noise_norm": 0.0, "solver_time": 0.0, "solver": "", "fallbacks": []}

    def charge(self, msg: SharingMessage) -> tuple[Any, tuple[float, float], int] | None:
        """One call of this party's own noise plan per epoch (Gaussian noise on ``D_m x_m``), after comparing the
        message's plan with it (:func:`cvxdp.privacy.check_plan_matches`)."""
        plan = self.plan
        check_plan_matches(plan, msg.plan, agent=self.name, round=msg.round)
        return None if plan is None else (plan.dp_event(), (plan.epsilon, plan.delta), 1)

    def declare(self) -> dict:
        """Public: the party's name and shapes (samples, features)."""
        return {"name": self.name, "samples": self.party.n_samples, "features": self.party.n_features}

    def step(self, msg: SharingMessage) -> Release:
        """Algorithm 1, lines 3-6: pull ``sum_k q_k - z`` and ``y``; release the one array this party pushes."""
        s = msg.residual - self.q  # sum_{k != m} q_k - z  (subtract the locally cached own contribution)
        g = self.D.T @ (msg.y + self.rho * s)
        start = time.perf_counter()
        self.x, solver, fallbacks = self.update.solve(g, msg.round)
        seconds = time.perf_counter() - start
        prediction = self.D @ self.x
        if self.plan is not None:
            q = self.plan.perturb(self.rng, prediction)
            noise_norm = float(np.linalg.norm(q - prediction))
        else:
            q, noise_norm = prediction, 0.0
        self.q = q
        self.last = {"noise_norm": noise_norm, "solver_time": seconds, "solver": solver, "fallbacks": fallbacks}
        return Release(self.party.name, msg.round, {"q": q.copy()})

    def evaluate(self, round: int) -> Evaluation:
        """Non-private evaluation on this party's data and model (never part of a release)."""
        party, x = self.party, self.x
        violation = compiled_metrics(party).violation(x) if not party.closed_form else \
            max(float(np.linalg.norm(x)) - (party.bound or math.inf), 0.0)
        arrays = {"prediction": self.D @ x}
        if party.test_features is not None:
            arrays["test_prediction"] = party.test_features @ x
        return Evaluation(party.name, round,
                          values={"regularizer": party.regularizer_value(x), "violation": violation,
                                  "x_norm": float(np.linalg.norm(x)), "noise_norm": self.last["noise_norm"],
                                  "solver_time": self.last["solver_time"]},
                          lists={"fallbacks": tuple(self.last["fallbacks"])},
                          labels={"solver": self.last["solver"]}, arrays=arrays)

    def local(self) -> np.ndarray:
        return self.x.copy()

    def state(self) -> dict[str, Any]:
        return {"x": self.x.copy(), "q": self.q.copy(), "rng": self.rng.bit_generator.state,
                "last": dict(self.last)}

    def restore(self, state: dict[str, Any]) -> None:
        self.x, self.q = state["x"].copy(), state["q"].copy()
        self.rng.bit_generator.state = state["rng"]
        self.last = dict(state["last"])
