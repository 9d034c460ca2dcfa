"""The party side of the graph family (SPEC §3-§4): one node of M-ADMM, PP, DVP, R-ADMM or MR-ADMM.

Node i (:class:`GraphNode`) holds its data, its exact primal update (:class:`cvxdp.model.local_prox.LocalProx`),
its own generator and its dual. It releases ``f_i`` every iteration, nothing else. Its message of iteration t
carries the neighbours' released ``f_j(t-1)`` (routed by the coordinator): node i first completes the dual update
of iteration t-1 with them (eq. 11 / 15; ``lambda_i += step/2 sum_j (f_i - f_j)``, the step sent in the message,
none after a recycled iteration), then runs the primal update of iteration t: the exact one (10)/(14) with
Gamma-norm noise under ``PenaltyPerturbation`` (PP eq. 24; MR-ADMM eq. 18) or the recycled step (16)/(19).

The primal update of node i is always ``f_i = argmin_{f in W_i} O(f, D_i) + a ||f||^2 - p^T f`` with
``a = eta_i V_i`` and ``p = eta_i sum_{j in V_i} (f_i + f_j) - 2 lambda_i - noise``, where the noise is
``2 eta_i V_i eps`` (PP/DVP, eq. 24) or ``eps`` (MR-ADMM, eq. 18) and ``eps`` is Gamma-norm noise drawn from the
node's own generator. Expanding the penalty ``eta sum_j ||f - (f_i + f_j)/2||^2`` gives exactly this form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np

from ...errors import DeclarationError, PartyRefusedError
from ...model import Agent, Evaluation, LocalProx, Node, Release, SolveReport, compile_projection
from .mechanism import erm_constants, gamma_step_event, sample_gamma_norm, step_epsilons


def recycled_step(f_odd: np.ndarray, recycled: np.ndarray, lam: np.ndarray, eta: float, disagreement: np.ndarray,
                  degree: float, gamma: float) -> np.ndarray:
    """The even update (16)/(19) from stored quantities only (no data).

    ``f(2k) = f(2k-1) - (g + 2 lambda(2k-1) + eta sum_j (f_i(2k-1) - f_j(2k-1))) / (2 eta V + gamma)`` where
    ``recycled`` is ``g = eps + grad O(f(2k-1))`` from the odd iteration's KKT condition and ``disagreement``
    is ``sum_j (f_i(2k-1) - f_j(2k-1))``.
    """
    return f_odd - (recycled + 2.0 * lam + eta * disagreement) / (2.0 * eta * degree + gamma)


@dataclass(frozen=True)
class GraphMessage:
    """Server -> node i in iteration t: the neighbours' released f_j(t-1) and the plan of the iteration.

    Attributes
    ----------
    round : int
    neighbours : ndarray, shape (V_i, d)
        ``f_j(t-1)`` of node i's neighbours, in the graph's neighbour order.
    dual_step : float or None
        The step of the pending dual update of iteration t-1 (None: nothing pending).
    eta : float
        ``eta_i(t)``.
    exact : bool
        An exact (data-reading) iteration, or a recycled one.
    alpha : float or None
        Gamma-norm noise parameter of this iteration (None: no noise).
    """

    round: int
    neighbours: np.ndarray
    dual_step: float | None
    eta: float
    exact: bool
    alpha: float | None = None


class GraphNode(Node):
    """One node of the graph family, built where its party runs (see the module docstring)."""

    def __init__(self, agent: Agent, seed: np.random.SeedSequence, algorithm: Any, degree: int,
                 solvers: tuple[str, ...], mechanism: Any = None) -> None:
        self.agent = agent
        self.name = agent.name
        self.recycling = algorithm.kind == "radmm"
        self.gamma = float(getattr(algorithm, "gamma", 0.0))
        self.V = degree
        # the node's own Gamma-norm noise (in a federation: the party's own policy), one alpha_i(1) for this node; the
        # noise rate of every iteration is computed here, and a message's alpha is only compared with it
        self.mechanism = mechanism
        self.private = mechanism is not None
        self.alpha1 = float(mechanism.alphas([agent.name])[0]) if self.private else None
        self.prox = LocalProx(agent, method=algorithm.local_solver, solvers=solvers)
        self.rng = np.random.default_rng(seed)
        d = agent.layout.size
        self.d = d
        try:
            self.erm = erm_constants(agent)
        except DeclarationError:
            self.erm = None
        if agent.initial is not None:
            self.f = self.prox.to_f(agent.layout.flatten(agent.initial))
        elif algorithm.init_scale > 0:
            self.f = algorithm.init_scale * self.rng.standard_normal(d)
        else:
            self.f = np.zeros(d)
        self.lam = np.zeros(d)
        self.recycled = np.zeros(d)
        self.projection = None
        if self.recycling and agent.constraints:
            self.projection = compile_projection(agent, solvers=solvers)
        self._last: tuple[float, SolveReport] = (0.0, SolveReport(solver="recycled"))

    def exact_at(self, t: int) -> bool:
        """Whether iteration ``t`` is exact (reads the data): every one for M-ADMM/DVP, the odd ones for (MR-)R-ADMM."""
        return not self.recycling or t % 2 == 1

    def alpha(self, t: int) -> float | None:
        """This node's own noise rate ``alpha_i(s) = alpha_i(1) growth^(s-1)`` of iteration ``t`` (s = t, or the odd
        iteration number k for MR-ADMM); None on a non-private node or a recycled iteration."""
        if not self.private or not self.exact_at(t):
            return None
        s = (t + 1) // 2 if self.recycling else t
        return self.alpha1 * float(self.mechanism.growth) ** (s - 1)

    def check_message(self, msg: GraphMessage) -> None:
        """The node's own reading of a message: the iteration kind its algorithm runs at that round, one row per
        neighbour, and the coordinator's noise rate equal to its own (a cross-check; the node draws its own)."""
        own = self.alpha(msg.round)
        if msg.exact != self.exact_at(msg.round):
            raise PartyRefusedError(f"Agent {self.name!r} refuses round {msg.round}: the message asks for "
                                    f"{'an exact' if msg.exact else 'a recycled'} iteration; its algorithm runs "
                                    f"{'an exact' if self.exact_at(msg.round) else 'a recycled'} one there.",
                                    party=self.name, round=msg.round, reason="plan", field="exact")
        if (own is None) != (msg.alpha is None) or (own is not None and not math.isclose(msg.alpha, own,
                                                                                        rel_tol=1e-9)):
            raise PartyRefusedError(f"Agent {self.name!r} refuses round {msg.round}: the coordinator's noise rate "
                                    f"alpha = {msg.alpha!r} is not this node's own {own!r}.", party=self.name,
                                    round=msg.round, reason="plan", field="alpha")
        if np.shape(msg.neighbours) != (self.V, self.d):
            raise PartyRefusedError(f"Agent {self.name!r} refuses round {msg.round}: the message holds neighbours of "
                                    f"shape {np.shape(msg.neighbours)}, not ({self.V}, {self.d}) (its degree and "
                                    "size).", party=self.name, round=msg.round, reason="message", field="neighbours")

    def charge(self, msg: GraphMessage) -> tuple[Any, tuple[float, float], int] | None:
        """A perturbed exact iteration: pure epsilon-DP with epsilon its summand of (26) / (32), from this node's own
        ERM constants, its own noise rate, its degree and the message's penalty; a recycled iteration reads no data (a
        NoOp). The message is checked first (:meth:`check_message`)."""
        self.check_message(msg)
        if not self.private:
            return None
        if not msg.exact:
            return dp_accounting.NoOpDpEvent(), (0.0, 0.0), 1
        c = self.erm
        eps = float(step_epsilons([c], np.array([self.alpha(msg.round)]), np.array([msg.eta]), np.array([self.V]),
                                  self.recycling)[0])
        return gamma_step_event(eps), (eps, 0.0), 1

    def declare(self) -> dict:
        """Public: ``f_i(0)`` (random from the node's generator, data-free, or the agent's public ``initial``) and
        the local solver's method and tolerance (for the ledger's note on inexact solves)."""
        return {"name": self.name, "initial": self.f.copy(),
                "solver": {"method": self.prox.method, "tol": self.prox.tol}}

    def step(self, msg: GraphMessage) -> Release:
        nbr = msg.neighbours
        V, f, eta = self.V, self.f, msg.eta
        if msg.dual_step is not None:  # the dual update of iteration t-1, with the neighbours' f_j(t-1)
            self.lam = self.lam + 0.5 * msg.dual_step * (V * f - nbr.sum(axis=0))
        noise_norm = 0.0
        if msg.exact:
            nb_sum = V * f + nbr.sum(axis=0)
            p = eta * nb_sum - 2.0 * self.lam
            alpha = self.alpha(msg.round)
            if alpha is not None:
                eps = sample_gamma_norm(self.rng, alpha, self.d)
                noise_norm = float(np.linalg.norm(eps))
                p = p - (eps if self.recycling else 2.0 * eta * V * eps)
            f_new, report = self.prox.solve(eta * V, p, f, round=msg.round)
            if self.recycling:  # eps + grad O(f_i(2k-1)) from the KKT condition of (14)/(18)
                self.recycled = -2.0 * self.lam - eta * (2.0 * V * f_new - nb_sum)
        else:
            disagreement = V * f - nbr.sum(axis=0)
            f_new = recycled_step(f, self.recycled, self.lam, eta, disagreement, V, self.gamma)
            report = SolveReport(solver="recycled")
            if self.projection is not None:
                u, report = self.projection.project(self.prox.to_u(f_new), np.ones(self.d), round=msg.round)
                f_new = self.prox.to_f(u)
            if self.private:
                noise_norm = math.nan  # no noise drawn on a recycled iteration
        self.f = f_new
        self._last = (noise_norm, report)
        return Release(self.agent.name, msg.round, {"f": f_new.copy()})

    def evaluate(self, round: int) -> Evaluation:
        """Non-private evaluation of the current iterate on this node's data (never part of a release)."""
        noise_norm, report = self._last
        value = self.prox.value(self.f)
        values = {"objective": value, "noise_magnitude": noise_norm, "solver_time": report.seconds}
        if self.erm is not None:
            values["loss"] = (value - self.erm.reg * 0.5 * float(self.f @ self.f)) / self.erm.C
        if self.agent.constraints:
            values["violation"] = self.prox.violation(self.f)
        return Evaluation(self.agent.name, round, values=values, labels={"solver": report.solver})

    def local(self) -> np.ndarray:
        return np.array(self.prox.to_u(self.f), copy=True)

    def state(self) -> dict:
        return {"f": self.f.copy(), "lam": self.lam.copy(), "recycled": self.recycled.copy(),
                "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.f = np.asarray(state["f"], dtype=float).copy()
        self.lam = np.asarray(state["lam"], dtype=float).copy()
        self.recycled = np.asarray(state["recycled"], dtype=float).copy()
        self.rng.bit_generator.state = state["rng"]
