"""The coordinator side of the sharing family (SPEC §5): the centre of DP ADMM sharing (Hu et al.).

Party m (:class:`cvxdp.families.sharing.node.SharingNode`) releases ``q_m = D_m x_m + N(0, sigma^2 I)`` and
nothing else. The centre (the state here: labels, z, y) runs the z-update (8) and the dual update (9) on the
releases; its public solution is the consensus prediction ``z`` (the parties' models stay with them). Released metrics: consensus/primal residual
``||sum_m q_m - z||``, dual residual ``rho ||z - z_prev||``, sigma, the centre's ``||y||``/``||z||`` and the
Assumption 1.1 check, privacy spent. The centre's values (``z``, ``y``, the residual it sends, ``dual_residual``,
``y_norm``, ``z_norm`` and the summary's ``assumption_1_1``) are computed from the releases *and the training labels*,
which are public to the centre by assumption (a ledger note of every private run says so; docs/what-is-public.md):
the mechanism protects the parties' features, not the labels. Non-private evaluation (party side, pooled): objective, train_loss,
regularizer, max_violation, noise_magnitude, test loss/error, solver names/times/fallbacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import DeclarationError, InvalidParameterError, check_float
from ...model import (
    RELATION,
    Evaluation,
    Release,
    VerticalParty,
    check_labels,
    check_parties,
    check_public_initial,
)
from ...privacy import COROLLARY1_NOTE, LEMMA1_PRESET, MIN_PLD_MULTIPLIER
from ...run import Backend, Charge, Family, NodeSpec, RoundPlan
from .node import SharingMessage, SharingNode
from .params import (
    ADMMSharing,
    AssumptionViolation,
    as_mechanism,
    corollary1,
    log_loss,
    loss_value,
    party_plan,
    sharing_dual_update,
    z_update,
)

HISTORY_COLUMNS = ["round", "epoch", "objective", "train_loss", "regularizer", "consensus_residual",
                   "primal_residual", "dual_residual", "max_violation", "noise_magnitude", "sigma", "y_norm",
                   "z_norm", "assumption_ok", "solver_time", "fallbacks", "test_loss", "test_logloss", "test_error",
                   "wall_time"]


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

    history_order = (*HISTORY_COLUMNS[:-1], "eps_basic", "eps_pld", "eps_rdp", "eps_corollary1")
    agent_order = ("round", "agent", "objective", "x_norm", "noise_magnitude", "sigma", "sent_arrays", "sent_values",
                   "solver", "solver_time", "fallbacks")
    unit = "epoch"
    violation_check = False
    agent_type = (VerticalParty,)
    agent_label = "cvxdp.VerticalParty (ADMMSharing)"

    def __init__(self, algorithm: Any, agents: Sequence[Any], **kwargs: Any) -> None:
        super().__init__(algorithm, agents, **kwargs)
        parties = check_parties(agents)
        self.agents = parties
        mech = as_mechanism(self.privacy)
        self.privacy = mech
        if mech is not None:
            check_public_initial(parties)
        self.labels, self.test_labels, self.host = centre_labels(algorithm, parties)
        self.rho, self.lam, self.T = float(algorithm.rho), float(algorithm.lam), int(algorithm.epochs)
        M, N = len(parties), parties[0].n_samples
        self.N = N
        # ---------------- privacy: per-party sensitivity, sigma and per-epoch claim (no data read)
        self.plans: list[Any] = [None] * M
        self.mech_info: dict[str, dict] = {}
        self.b1 = None
        if mech is not None:
            for p in parties:  # the public half of Assumption 1 (each party checks its rows itself)
                if p.bound is None:
                    raise DeclarationError(f"Party {p.name!r}: a private run needs a bounded feasible set "
                                           "(Assumption 1.1): give bound=b, which adds ||x|| <= b.")
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
        # PLD's grid grows like 1/multiplier^2: with a tiny multiplier the budget guard composes with RDP
        pld_ok = all(p is None or p.noise_multiplier >= MIN_PLD_MULTIPLIER for p in self.plans)
        self.guard_accountant = self.accountant if (self.accountant != "pld" or pld_ok) else "rdp"
        if mech is not None and mech.sensitivity == "paper":
            self.notes += [(LEMMA1_PRESET, True, True), (COROLLARY1_NOTE, True, False)]
        if mech is not None:  # the public assumptions the guarantee relies on (non-voiding ledger notes)
            self.assume(SHARING_LABELS.format(host=self.host))
            self.assume(SHARING_BOUNDS)

    def config(self) -> dict[str, Any]:
        mech = self.privacy
        return {"privacy": mech.describe() if mech is not None else None, "target_delta": self.target_delta,
                "parties": {p.name: {"features": p.n_features, "bound": p.bound, "closed_form": p.closed_form}
                            for p in self.agents},
                "samples": self.N, "label_holder": self.host, "b1": self.b1}

    def fingerprint_data(self) -> dict[str, Any]:
        return {"labels": self.labels}

    def nodes(self) -> list[NodeSpec]:
        # each party calibrates its own plan (the same numbers as self.plans, the coordinator's copy); work: the
        # party's number of variables (a shape, public), as in the other families (backends balance by it)
        public = {"parties": len(self.agents), **({} if self.b1 is None else {"b1": float(self.b1)})}
        return [NodeSpec(p.name, SharingNode, (self.algorithm, self.solvers, self.privacy, self.accountant, self.b1,
                                               len(self.agents)), work=float(p.n_features), public=public)
                for p in self.agents]

    def start(self, declarations: Sequence[Mapping[str, Any]]) -> SharingState:
        n = len(self.labels)
        return SharingState(z=np.zeros(n), y=np.zeros(n), v=np.zeros(n), z_prev=np.zeros(n))

    # ---------------------------------------------------------------- one epoch
    def plan(self, t: int, state: SharingState) -> RoundPlan:
        residual, y = state.v - state.z, state.y.copy()  # Algorithm 1, line 12
        y_norm, z_norm = float(np.linalg.norm(state.y)), float(np.linalg.norm(state.z))
        messages = [SharingMessage(t, residual, y, plan) for plan in self.plans]
        ok, notes = self._assumption(t, y_norm, z_norm, state)
        released = {"epoch": t, "sigma": max((p.scale for p in self.plans if p is not None), default=0.0),
                    "assumption_ok": ok}
        agent_released = [{"sigma": p.scale if p is not None else 0.0} for p in self.plans]
        charges = [None if p is None else Charge(p.dp_event(), (p.epsilon, p.delta)) for p in self.plans]
        return RoundPlan(messages=messages, charges=charges, released=released, agent_released=agent_released,
                         notes=notes, context=(residual, y, y_norm, z_norm, ok))

    def _assumption(self, t: int, y_norm: float, z_norm: float, state: SharingState) -> tuple[bool, list[str]]:
        """Assumption 1.1 of Hu et al. before epoch ``t`` (checked under the paper's Lemma 1 sensitivity, from the
        centre's own values): raise, or note once that the claim does not cover the release (assumptions='record')."""
        mech, b1 = self.privacy, self.b1
        if mech is None or mech.sensitivity != "paper" or (y_norm <= b1 and z_norm <= b1):
            return True, []
        msg = (f"Assumption 1.1 of Hu et al. fails before epoch {t}: ||y|| = {y_norm:.4g}, ||z|| = "
               f"{z_norm:.4g}, b1 = {b1:.4g}; Lemma 1's sensitivity (and so the epoch's privacy claim) "
               "does not cover this release. Use larger bounds or sensitivity='worst_case'.")
        if mech.assumptions == "raise":
            raise AssumptionViolation(msg)
        if state.warned:  # the explicit opt-out: the run goes on, the ledger says the claim is void
            return False, []
        return False, [f"Assumption 1.1 of Hu et al. failed (first before epoch {t}); Lemma 1's claim does not cover "
                       "the release (assumptions='record')"]

    def aggregate(self, t: int, plan: RoundPlan, releases: Sequence[Release], state: SharingState
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        _, _, y_norm, z_norm, ok = plan.context
        state.max_y, state.max_z = max(state.max_y, y_norm), max(state.max_z, z_norm)
        state.assumption_ok.append(ok)
        state.warned = state.warned or not ok
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

    def evaluate(self, evaluations: Sequence[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
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
    def solution(self, state: SharingState) -> dict[str, np.ndarray]:
        """The centre's consensus prediction ``z`` (from the released ``q_m`` and the labels it holds); each party's
        model ``x_m`` stays with the party (``result.local`` in a simulation, private)."""
        return {"z": state.z.copy()}

    def privacy_columns(self, ledger: Any, t: int) -> dict[str, float]:
        """Hu et al.'s Corollary 1 after ``t`` epochs (the paper's figure, beside the ledger's totals)."""
        if not self.mech_info:
            return {}
        return {"eps_corollary1": max(corollary1(i["eps_step"], i["delta_step"], t, self.delta_prime)[0]
                                      for i in self.mech_info.values())}

    def finish(self, result: Any, state: SharingState, backend: Backend) -> None:
        """Corollary 1, the mechanism's details and Assumption 1.1 beside the ledger's totals; the recorded messages.

        ``assumption_1_1`` (``max_y_norm``, ``max_z_norm``) reads the centre's y and z, computed with the labels:
        public to the centre by assumption (the run's ledger notes name it)."""
        mech, summary = self.privacy, result.privacy
        if mech is not None:
            names = self.names
            per = {n: list(corollary1(self.mech_info[n]["eps_step"], self.mech_info[n]["delta_step"],
                                      result.ledger.steps(n), self.delta_prime)) for n in names}
            summary["corollary1"] = {"per_agent": per, "worst": [max(v[0] for v in per.values()),
                                                                 max(v[1] for v in per.values())],
                                     "delta_prime": self.delta_prime}
            summary["mechanism"] = {"name": mech.short_name, "relation": RELATION, "b1": self.b1,
                                    "sensitivity_mode": mech.describe()["sensitivity"], "parties": self.mech_info}
            summary["assumption_1_1"] = {"held": bool(all(state.assumption_ok)), "max_y_norm": state.max_y,
                                         "max_z_norm": state.max_z, "b1": self.b1,
                                         "checked": mech.sensitivity == "paper"}
        result.messages = list(state.messages)


@dataclass(frozen=True)
class Message:
    """One message of a sharing run: ``direction`` "up" (party -> centre) or "down" (centre -> parties)."""

    epoch: int
    direction: str
    sender: str
    receiver: str
    kind: str  # "prediction" (uplink q_m), "residual" (sum_k q_k - z) or "dual" (y)
    payload: np.ndarray = field(repr=False)


#: The sharing labels (a public assumption of every private sharing run)
SHARING_LABELS = ("the training labels are public to the centre (held by {host!r}): the centre's z (the public "
                  "solution), the residual and dual y it sends to the parties, and the history's dual_residual, y_norm "
                  "and z_norm and the summary's assumption_1_1 are computed from them and the released q_m, "
                  "unaccounted (only the parties' features are protected)")
#: The declared bounds of a private sharing run (a public assumption)
SHARING_BOUNDS = ("the bounds each party declares are public and true: its sample count N, its model bound b "
                  "(||x_m|| <= b; b1 = max b, Assumption 1.1) and its regulariser's curvature c1; the noise is "
                  "calibrated to them (the feature rows' norm <= 1, Assumption 1.3, each party checks itself)")


def centre_labels(algorithm: ADMMSharing, parties: list[VerticalParty]) -> tuple[np.ndarray, np.ndarray | None, str]:
    holders = [p for p in parties if p.holds_labels]
    if algorithm.labels is not None:
        labels, host = check_labels(algorithm.labels, "labels", "ADMMSharing", algorithm.loss), "centre"
    elif len(holders) == 1:
        labels = check_labels(holders[0].labels, "labels", f"VerticalParty {holders[0].name!r}", algorithm.loss)
        host = holders[0].name
    elif not holders:
        raise InvalidParameterError("ADMMSharing needs the training labels: pass ADMMSharing(labels=...) (held by "
                                    "the centre) or declare one party with labels=... (the label holder).")
    else:
        raise InvalidParameterError("Several parties declare labels ("
                                    + ", ".join(repr(p.name) for p in holders)
                                    + "); exactly one party may hold them, or pass ADMMSharing(labels=...).")
    if len(labels) != parties[0].n_samples:
        raise InvalidParameterError(f"The labels have {len(labels)} entries but the parties have "
                                    f"{parties[0].n_samples} samples.")
    test = algorithm.test_labels
    if test is None and len(holders) == 1 and holders[0].test_labels is not None:
        test = holders[0].test_labels
    if test is not None:
        test = check_labels(test, "test_labels", "ADMMSharing", algorithm.loss)
        if not all(p.test_samples == len(test) for p in parties):
            test = None  # no test features on some party: no test column
    return labels, test, host
