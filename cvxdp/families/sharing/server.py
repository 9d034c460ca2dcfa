"""The sharing family (SPEC §5): DP ADMM sharing over vertically partitioned features (Hu et al.).

Party m (:class:`SharingNode`) holds its feature block ``D_m`` and its model ``x_m``; per epoch it pulls the
centre's broadcast (``sum_k q_k - z`` and ``y``), runs the x-update (6) and releases
``q_m = D_m x_m + N(0, sigma^2 I)`` — nothing else. The centre (the server state here: labels, z, y) runs the
z-update (8) and the dual update (9) on the releases. Released metrics: consensus/primal residual
``||sum_m q_m - z||``, dual residual ``rho ||z - z_prev||``, sigma, the centre's ``||y||``/``||z||`` and the
Assumption 1.1 check, privacy spent. Non-private evaluation (party side, pooled): objective, train_loss,
regularizer, max_violation, noise_magnitude, test loss/error, solver names/times/fallbacks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InvalidParameterError
from ...params import check_float
from ...run.backends import Backend, NodeSpec
from ...run.protocol import Evaluation, Family, Release, RoundPlan
from .params import AssumptionViolation, corollary1, log_loss, loss_value, sharing_dual_update, z_update

HISTORY_COLUMNS = ["round", "epoch", "objective", "train_loss", "regularizer", "consensus_residual",
                   "primal_residual", "dual_residual", "max_violation", "noise_magnitude", "sigma", "y_norm",
                   "z_norm", "assumption_ok", "solver_time", "fallbacks", "test_loss", "test_logloss", "test_error",
                   "wall_time"]


@dataclass(frozen=True)
class SharingMessage:
    """Centre -> party in epoch t (Algorithm 1, line 12): ``sum_k q_k - z`` and ``y`` (the same for all)."""

    round: int
    residual: np.ndarray
    y: np.ndarray


class SharingNode:
    """Party m's runtime: private data, model, cached own message, generator. Only :meth:`step` releases."""

    def __init__(self, party: Any, rho: float, lam: float, solvers: tuple[str, ...], seed: np.random.SeedSequence,
                 plan: Any) -> None:
        from ...model.vertical import _LocalUpdate

        self.party = party
        self.D = party.data
        self.rho = rho
        self.update = _LocalUpdate(party, rho, lam, solvers)
        self.rng = np.random.default_rng(seed)
        self.plan = plan
        self.x = np.zeros(party.n_features)
        self.q = np.zeros(party.n_samples)  # the locally cached D_m x~_m (what this party last sent)
        self.last: dict[str, Any] = {"noise_norm": 0.0, "solver_time": 0.0, "solver": "", "fallbacks": []}

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
        from ...model.evaluation import compiled_metrics  # no CVXPY tree walk per round

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


@dataclass
class SharingState:
    """The centre's side of a sharing run (part of the checkpoint)."""

    z: np.ndarray
    y: np.ndarray
    v: np.ndarray
    z_prev: np.ndarray
    warned: bool = False
    max_y: float = 0.0
    max_z: float = 0.0
    assumption_ok: list[bool] = field(default_factory=list)
    messages: list[Any] = field(default_factory=list)


class SharingFamily(Family):
    """ADMM sharing on the round loop (see the module docstring)."""

    history_order = tuple(HISTORY_COLUMNS[:-1])
    agent_order = ("round", "agent", "objective", "x_norm", "noise_magnitude", "sigma", "sent_arrays", "sent_values",
                   "solver", "solver_time", "fallbacks")
    unit = "epoch"
    violation_check = False

    def __init__(self, algorithm: Any, agents: Sequence[Any], **kwargs: Any) -> None:
        from ...model.vertical import _accountant_ok, _as_mechanism, _labels, check_parties, party_plan
        from ...privacy.accounting import PrivacyLedger  # noqa: F401 - fail early if the accounting stack is missing

        super().__init__(algorithm, agents, **kwargs)
        parties = check_parties(agents)
        self.agents = parties
        mech = _as_mechanism(self.privacy)
        self.privacy = mech
        if mech is not None:
            from ...privacy.checks import check_public_initial

            check_public_initial(parties)
        self.labels, self.test_labels, self.host = _labels(algorithm, parties)
        self.rho, self.lam, self.T = float(algorithm.rho), float(algorithm.lam), int(algorithm.epochs)
        M, N = len(parties), parties[0].n_samples
        self.N = N
        if self.lam == 0 and any(p.bound is None for p in parties):
            for p in parties:  # unregularised without a bound: the x-update may be unbounded
                if p.bound is None and np.linalg.matrix_rank(p.data) < p.n_features:
                    raise InvalidParameterError(f"Party {p.name!r}: with lam = 0 the x-update needs bound=... "
                                                "(its features are rank deficient).")
        # ---------------- privacy: per-party sensitivity, sigma and per-epoch claim (no data read)
        self.plans: list[Any] = [None] * M
        self.mech_info: dict[str, dict] = {}
        self.b1 = None
        if mech is not None:
            for p in parties:
                p.check_private(mech.sensitivity)
            self.b1 = max(float(p.bound) for p in parties)  # Assumption 1.1: one b1 bounds every x_k, y and z
            for i, p in enumerate(parties):
                self.plans[i], self.mech_info[p.name] = party_plan(mech, p, rho=self.rho, lam=self.lam, b1=self.b1,
                                                                   parties=M, epochs=self.T,
                                                                   accountant=self.accountant)
        self.delta_prime = mech.delta_prime_value if mech is not None else None
        budget, target_delta = self.budget, self.target_delta
        if target_delta is None:
            if budget is not None and budget[1] > 0:
                target_delta = budget[1]
            elif mech is not None and mech.scope == "total":
                target_delta = float(mech.delta)
            elif mech is not None:
                target_delta = min(self.T * max(i["delta_step"] for i in self.mech_info.values())
                                   + self.delta_prime, 0.5)
            else:
                target_delta = 1e-6
        self.target_delta = check_float(target_delta, "target_delta", "solve", 0.0, 1.0)
        self.pld_ok = _accountant_ok("pld", self.plans)
        # the accountant of budget checks
        self.guard = self.accountant if (self.accountant != "pld" or self.pld_ok) else "rdp"

    @property
    def rounds(self) -> int:
        return self.T

    def config(self) -> dict[str, Any]:
        mech = self.privacy
        return {"privacy": mech.describe() if mech is not None else None, "target_delta": self.target_delta,
                "parties": {p.name: {"features": p.n_features, "bound": p.bound, "closed_form": p.closed_form}
                            for p in self.agents},
                "samples": self.N, "label_holder": self.host, "b1": self.b1}

    def fingerprint(self, config: Mapping[str, Any], checkpoint: Any) -> dict[str, str]:
        from ...model.vertical import _fingerprint

        return _fingerprint(dict(config), self.agents, self.labels, checkpoint)

    def node_specs(self, seeds: Sequence[np.random.SeedSequence]) -> list[NodeSpec]:
        return [NodeSpec(p.name, SharingNode, (p, self.rho, self.lam, self.solvers, s, plan))
                for p, s, plan in zip(self.agents, seeds, self.plans)]

    def start(self, backend: Backend) -> SharingState:
        n = len(self.labels)
        return SharingState(z=np.zeros(n), y=np.zeros(n), v=np.zeros(n), z_prev=np.zeros(n))

    def notes(self, ledger: Any, backend: Backend) -> None:
        if self.privacy is not None and self.privacy.sensitivity == "paper":
            from ...privacy.notes import COROLLARY1_NOTE, LEMMA1_PRESET

            ledger.note(LEMMA1_PRESET)
            ledger.note(COROLLARY1_NOTE, warn=False)

    # ---------------------------------------------------------------- one epoch
    def plan(self, t: int, state: SharingState) -> RoundPlan:
        residual, y = state.v - state.z, state.y.copy()  # Algorithm 1, line 12
        y_norm, z_norm = float(np.linalg.norm(state.y)), float(np.linalg.norm(state.z))
        messages = [SharingMessage(t, residual, y) for _ in self.names]
        released = {"epoch": t, "sigma": max((p.scale for p in self.plans if p is not None), default=0.0)}
        agent_released = [{"sigma": p.scale if p is not None else 0.0} for p in self.plans]
        return RoundPlan(messages=messages, charges=list(self.plans), released=released,
                         agent_released=agent_released, context=(residual, y, y_norm, z_norm))

    def would_exceed(self, ledger: Any, plan: RoundPlan) -> bool:
        return self.privacy is not None and any(
            ledger.would_exceed(n, c, count=1, budget=self.budget, accountant=self.guard)
            for n, c in zip(self.names, plan.charges))

    def before_step(self, t: int, plan: RoundPlan, state: SharingState, ledger: Any) -> None:
        _, _, y_norm, z_norm = plan.context
        state.max_y, state.max_z = max(state.max_y, y_norm), max(state.max_z, z_norm)
        mech, b1 = self.privacy, self.b1
        ok = True
        if mech is not None and mech.sensitivity == "paper" and (y_norm > b1 or z_norm > b1):
            ok = False
            msg = (f"Assumption 1.1 of Hu et al. fails before epoch {t}: ||y|| = {y_norm:.4g}, ||z|| = "
                   f"{z_norm:.4g}, b1 = {b1:.4g}; Lemma 1's sensitivity (and so the epoch's privacy claim) "
                   "does not cover this release. Use larger bounds or sensitivity='worst_case'.")
            if mech.assumptions == "raise":
                raise AssumptionViolation(msg)
            if not state.warned:  # the explicit opt-out: the run goes on, the ledger says the claim is void
                ledger.note(f"Assumption 1.1 of Hu et al. failed (first before epoch {t}); Lemma 1's claim does "
                            "not cover the release (assumptions='record')")
                state.warned = True
        plan.released["assumption_ok"] = ok
        state.assumption_ok.append(ok)

    def record(self, ledger: Any, t: int, plan: RoundPlan) -> None:
        for n, c in zip(self.names, plan.charges):
            if c is not None:
                ledger.record(n, c, count=1)

    def aggregate(self, t: int, plan: RoundPlan, releases: Sequence[Release], state: SharingState
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        from ...model.vertical import Message

        uplinks = [rel["q"] for rel in releases]
        if self.algorithm.record_messages:
            residual, y = plan.context[:2]
            for n in self.names:
                state.messages.append(Message(t, "down", "centre", n, "residual", residual.copy()))
                state.messages.append(Message(t, "down", "centre", n, "dual", y.copy()))
            state.messages.extend(Message(t, "up", n, "centre", "prediction", q.copy())
                                  for n, q in zip(self.names, uplinks))
        v = np.sum(uplinks, axis=0)  # lines 9-11: the z-update (8) and the dual update (9)
        z = z_update(v, state.y, self.rho, self.labels, self.algorithm.loss)
        state.z_prev, state.z = state.z, z
        state.y = sharing_dual_update(state.y, self.rho, v, z)
        state.v = v
        primal = float(np.linalg.norm(state.v - state.z))
        row = {"consensus_residual": primal, "primal_residual": primal,
               "dual_residual": self.rho * float(np.linalg.norm(state.z - state.z_prev)),
               "y_norm": float(np.linalg.norm(state.y)), "z_norm": float(np.linalg.norm(state.z))}
        return row, [{"sent_arrays": len(rel.arrays), "sent_values": rel.size} for rel in releases]

    def privacy_row(self, ledger: Any, t: int) -> dict[str, float]:
        names, accountant = self.names, self.accountant
        row = {"eps_basic": max(ledger.spent(n, "basic")[0] for n in names)}
        if accountant != "basic":
            row[f"eps_{accountant}"] = (max(ledger.spent(n, accountant)[0] for n in names)
                                        if accountant != "pld" or self.pld_ok else math.nan)
        if accountant == "pld" and not self.pld_ok:
            row["eps_rdp"] = max(ledger.spent(n, "rdp")[0] for n in names)
        row["eps_corollary1"] = max(corollary1(i["eps_step"], i["delta_step"], t, self.delta_prime)[0]
                                    for i in self.mech_info.values())
        return row

    def evaluation_row(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        loss, lam = self.algorithm.loss, self.lam
        pred = sum(ev.arrays["prediction"] for ev in evaluations)
        regs = [ev.values["regularizer"] for ev in evaluations]
        train_loss = loss_value(pred, self.labels, loss)
        row: dict[str, Any] = {"objective": train_loss + lam * sum(regs), "train_loss": train_loss,
                               "regularizer": lam * sum(regs),
                               "max_violation": max(ev.values["violation"] for ev in evaluations),
                               "noise_magnitude": float(np.mean([ev.values["noise_norm"] for ev in evaluations])),
                               "solver_time": sum(ev.values["solver_time"] for ev in evaluations),
                               "fallbacks": sum(len(ev.lists["fallbacks"]) for ev in evaluations)}
        if self.test_labels is not None:
            test_pred = sum(ev.arrays["test_prediction"] for ev in evaluations)
            row["test_loss"] = loss_value(test_pred, self.test_labels, loss)
            if loss == "logistic":
                row["test_logloss"] = log_loss(test_pred, self.test_labels)
                row["test_error"] = float(np.mean(np.where(test_pred >= 0, 1.0, -1.0) != self.test_labels))
        agents = [{"objective": ev.values["regularizer"], "x_norm": ev.values["x_norm"],
                   "noise_magnitude": ev.values["noise_norm"], "solver": ev.labels["solver"],
                   "solver_time": ev.values["solver_time"], "fallbacks": ";".join(ev.lists["fallbacks"])}
                  for ev in evaluations]
        return row, agents

    def converged(self, t: int, state: SharingState, row: Mapping[str, Any]) -> bool:
        alg = self.algorithm
        return (alg.tol_primal is not None and alg.tol_dual is not None
                and row["primal_residual"] <= alg.tol_primal and row["dual_residual"] <= alg.tol_dual)

    # ---------------------------------------------------------------- the end
    def solution(self, state: SharingState, local: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {n: np.array(x, copy=True) for n, x in local.items()}

    def summary(self, ledger: Any) -> dict[str, Any]:
        from ...model.vertical import RELATION, _ledger_summary

        summary = _ledger_summary(ledger, self.pld_ok)
        mech = self.privacy
        if mech is not None:
            names = self.names
            steps = {n: ledger.steps(n) for n in names}
            per = {n: list(corollary1(self.mech_info[n]["eps_step"], self.mech_info[n]["delta_step"], steps[n],
                                      self.delta_prime)) for n in names}
            summary["corollary1"] = {"per_agent": per, "worst": [max(v[0] for v in per.values()),
                                                                 max(v[1] for v in per.values())],
                                     "delta_prime": self.delta_prime}
            summary["mechanism"] = {"name": mech.short_name, "relation": RELATION, "b1": self.b1,
                                    "sensitivity_mode": mech.describe()["sensitivity"], "parties": self.mech_info}
            summary["assumption_1_1"] = {
                "held": None, "max_y_norm": None, "max_z_norm": None, "b1": self.b1,
                "checked": mech.sensitivity == "paper"}
        return summary

    def finish(self, result: Any, state: SharingState) -> Any:
        if self.privacy is not None:
            result.privacy["assumption_1_1"].update(held=bool(all(state.assumption_ok)), max_y_norm=state.max_y,
                                                    max_z_norm=state.max_z)
        result.messages = list(state.messages)
        return result
