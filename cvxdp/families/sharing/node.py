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


@dataclass(frozen=True)
class SharingMessage:
    """Centre -> party in epoch t (Algorithm 1, line 12): ``sum_k q_k - z`` and ``y`` (the same for all)."""

    round: int
    residual: np.ndarray
    y: np.ndarray


class SharingNode(Node):
    """Party m's runtime: private data, model, cached own message, generator. Only :meth:`step` releases."""

    def __init__(self, party: Any, seed: np.random.SeedSequence, rho: float, lam: float, solvers: tuple[str, ...],
                 plan: Any, sensitivity: Any = None) -> None:
        self.name = party.name
        # the party's own checks of its data (the centre sees its declaration only)
        if lam == 0 and party.bound is None and np.linalg.matrix_rank(party.data) < party.n_features:
            raise InvalidParameterError(f"Party {party.name!r}: with lam = 0 the x-update needs bound=... (its "
                                        "features are rank deficient).")
        if plan is not None:
            party.check_private(sensitivity)
        self.party = party
        self.D = party.data
        self.rho = rho
        self.update = PartyUpdate(party, rho, lam, solvers)
        self.rng = np.random.default_rng(seed)
        self.plan = plan
        self.x = np.zeros(party.n_features)
        self.q = np.zeros(party.n_samples)  # the locally cached D_m x~_m (what this party last sent)
        self.last: dict[str, Any] = {"noise_norm": 0.0, "solver_time": 0.0, "solver": "", "fallbacks": []}

    def charge(self, msg: SharingMessage) -> tuple[Any, tuple[float, float], int] | None:
        """One call of this party's noise plan per epoch (Gaussian noise on ``D_m x_m``)."""
        plan = self.plan
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
