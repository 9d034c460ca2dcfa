"""ADMM sharing over vertically partitioned features (Hu et al., NeurIPS 2020; SPEC §5): "sharing".

Problem (3)-(4): ``min l(z) + lam sum_m R_m(x_m)  s.t.  sum_m D_m x_m = z,  x_m in X_m``, where party ``m``
holds the feature block ``D_m`` (N x d_m) and the local model ``x_m``. Algorithm 1, per epoch t:

    (6) party m:  x_m = argmin_{x in X_m} lam R_m(x) + <y, D_m x> + rho/2 ||s_m + D_m x||^2,
                  s_m = sum_{k != m} q_k - z   (the pulled sum_k q_k - z minus its own cached q_m)
    (7)           q_m = D_m x_m + N(0, sigma_m^2 I_N)        -- the only thing party m ever sends
    (8) centre:   z = argmin_z l(z) - <y, z> + rho/2 ||sum_m q_m - z||^2     (separable: one scalar per sample)
    (9)           y = y + rho (sum_m q_m - z)

**Where the labels live.** The loss ``l(z)`` absorbs the labels (paper §2), so the *centre* holds them:
``ADMMSharing(labels=...)``, or, when that is None, the one party declaring ``labels=`` (the "active"
party that wants to improve its model and hosts the centre, as party 1 in the paper's experiments). The
mechanism protects each party's feature block ``D_m``; the labels are the centre's own data and are not
protected by it.

This module holds the parameters (:class:`ADMMSharing`, :class:`SharingGaussian`) and the pure update
math over arrays; the round loop, the parties and the centre are in :mod:`cvxdp.model.vertical`.

Privacy (Lemma 1, Theorem 1, Corollary 1 of the paper, restated in SPEC §5):

    C_m     = 3 / (d_m rho) * [lam c1 + (1 + M rho) b1]              (l2 sensitivity of D_m x_m, Lemma 1)
    sigma_m = sqrt(2 ln(1.25/delta)) C_m / eps,  eps in (0, 1]      (per-epoch (eps, delta)-DP, Theorem 1)
    eps'    = sqrt(2 T ln(1/delta')) eps + T eps (e^eps - 1),  delta_total = T delta + delta'   (Corollary 1)

under Assumption 1: ``||x_m||, ||y||, ||z|| <= b1``; ``|R_m''| <= c1``; every row of ``D_m`` has l2 norm at
most 1; neighbouring ``D_m ~ D'_m`` differ in one sample's row with ``||D_m - D'_m|| <= 1``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from scipy.special import expit, log_expit

from ...errors import CvxdpError, check_float, check_int, fail
from ...model import RELATION, check_labels
from ...params import (
    COUNT,
    NONNEGATIVE,
    OPTIONAL_POSITIVE,
    POSITIVE,
    Algorithm,
    Boolean,
    Instance,
    Interval,
    NoneValue,
    Options,
    Param,
    Parameterized,
    param,
)
from ...privacy import (
    Gaussian,
    NoisePlan,
    OutputPerturbation,
    calibrate_to_total,
    gaussian_epsilon,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
)

LOSSES = ("logistic", "squared")
SENSITIVITIES = ("paper", "worst_case")
CALIBRATIONS = ("classic", "analytic")
ASSUMPTION_MODES = ("raise", "record", "warn")


class AssumptionViolation(CvxdpError, RuntimeError):
    """A run left the region where the privacy analysis holds (Assumption 1 of Hu et al.)."""


# --------------------------------------------------------------------------- losses (the centre's l(z))
def loss_value(z: np.ndarray, labels: np.ndarray, loss: str) -> float:
    """``l(z)``: mean logistic loss ``mean log(1 + exp(-b z))`` or half mean squared error ``mean (z-b)^2 / 2``."""
    if loss == "logistic":
        return float(-np.mean(log_expit(labels * z)))
    return float(0.5 * np.mean((z - labels) ** 2))


def log_loss(z: np.ndarray, labels: np.ndarray) -> float:
    """Mean logistic log-loss of margins ``z`` against labels in {-1, +1} (scikit-learn's ``log_loss``)."""
    return float(-np.mean(log_expit(labels * z)))


def z_update_logistic(v: np.ndarray, y: np.ndarray, rho: float, labels: np.ndarray, *, n: int | None = None,
                      tol: float = 1e-14, max_iter: int = 100) -> np.ndarray:
    """Eq. (8) for ``l(z) = (1/n) sum_i log(1 + exp(-b_i z_i))``: one scalar problem per sample, vectorized.

    Solves ``h(z_i) = -(b_i/n) sigmoid(-b_i z_i) - y_i + rho (z_i - v_i) = 0`` by safeguarded Newton steps:
    ``h`` is strictly increasing (``h' = sigmoid'/n + rho > 0``) and, as ``|l_i'| <= 1/n``, the root lies in
    ``[v + (y - 1/n)/rho, v + (y + 1/n)/rho]``; a Newton step leaving the current bracket is replaced by
    bisection.

    Parameters
    ----------
    v : ndarray (N,)
        ``sum_m q_m``, the aggregated (noisy) predictions.
    y : ndarray (N,)
        The dual variable.
    rho : float
        Penalty, > 0.
    labels : ndarray (N,)
        Labels in {-1, +1}.
    n : int, optional
        Normaliser of the loss (default N).
    """
    n = len(v) if n is None else n
    base = v + y / rho
    lo, hi = base - 1.0 / (n * rho), base + 1.0 / (n * rho)
    z = base.copy()
    for _ in range(max_iter):
        s = expit(-labels * z)
        h = -labels * s / n - y + rho * (z - v)
        lo = np.where(h < 0, z, lo)
        hi = np.where(h > 0, z, hi)
        step = h / (s * (1.0 - s) / n + rho)
        z_new = z - step
        outside = (z_new < lo) | (z_new > hi)  # a step that cannot move (converged) is not outside
        z_new = np.where(outside, 0.5 * (lo + hi), z_new)
        if np.all(np.abs(z_new - z) <= tol * (1.0 + np.abs(z))):
            return z_new
        z = z_new
    return z


def z_update_squared(v: np.ndarray, y: np.ndarray, rho: float, labels: np.ndarray, *,
                     n: int | None = None) -> np.ndarray:
    """Eq. (8) for ``l(z) = (1/(2n)) sum_i (z_i - b_i)^2``, in closed form: ``(b/n + y + rho v) / (1/n + rho)``."""
    n = len(v) if n is None else n
    return (labels / n + y + rho * v) / (1.0 / n + rho)


def z_update(v: np.ndarray, y: np.ndarray, rho: float, labels: np.ndarray, loss: str) -> np.ndarray:
    """Eq. (8) for the named loss."""
    if loss == "logistic":
        return z_update_logistic(v, y, rho, labels)
    return z_update_squared(v, y, rho, labels)


def sharing_dual_update(y: np.ndarray, rho: float, v: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Eq. (9): ``y + rho (sum_m q_m - z)``."""
    return y + rho * (v - z)


# --------------------------------------------------------------------------- party update (6), closed form
# --------------------------------------------------------------------------- privacy math (Lemma 1, Thm 1, Cor 1)
def lemma1_sensitivity(d_m: int, rho: float, lam: float, c1: float, b1: float, parties: int) -> float:
    """Lemma 1: ``C = 3 / (d_m rho) * [lam c1 + (1 + M rho) b1]``, the paper's l2 sensitivity of ``D_m x_m``.

    Parameters
    ----------
    d_m : int
        Number of features of party m.
    rho : float
        ADMM penalty.
    lam : float
        Regularisation weight lambda.
    c1 : float
        Bound on the regulariser's curvature, ``|R_m''| <= c1`` (1 for ``||x||^2 / 2``).
    b1 : float
        Assumption 1.1: bound on ``||x_k||``, ``||y||`` and ``||z||``.
    parties : int
        M, the number of parties.
    """
    owner = "lemma1_sensitivity"
    d = check_int(d_m, "d_m", owner, 1)
    r = check_float(rho, "rho", owner, 0.0, math.inf)
    la = check_float(lam, "lam", owner, 0.0, math.inf, closed="left")
    c = check_float(c1, "c1", owner, 0.0, math.inf, closed="left")
    b = check_float(b1, "b1", owner, 0.0, math.inf)
    m = check_int(parties, "parties", owner, 1)
    return 3.0 / (d * r) * (la * c + (1.0 + m * r) * b)


def theorem1_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Theorem 1: ``sigma = sqrt(2 ln(1.25/delta)) C / eps`` for ``eps in (0, 1]`` (per-epoch (eps, delta)-DP)."""
    owner = "theorem1_sigma"
    c = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    e = check_float(epsilon, "epsilon", owner, 0.0, 1.0, closed="right")
    d = check_float(delta, "delta", owner, 0.0, 1.0)
    if e < 1.0:  # the library's classic calibration (identical formula), which refuses eps >= 1
        return gaussian_sigma_classic(c, e, d)
    return math.sqrt(2.0 * math.log(1.25 / d)) * c / e


def theorem1_epsilon(sensitivity: float, sigma: float, delta: float) -> float:
    """Inverse of :func:`theorem1_sigma`: ``eps = sqrt(2 ln(1.25/delta)) C / sigma`` (a valid claim only if <= 1)."""
    owner = "theorem1_epsilon"
    c = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    s = check_float(sigma, "sigma", owner, 0.0, math.inf)
    d = check_float(delta, "delta", owner, 0.0, 1.0)
    return math.sqrt(2.0 * math.log(1.25 / d)) * c / s


def corollary1(epsilon: float, delta: float, epochs: int, delta_prime: float) -> tuple[float, float]:
    """Corollary 1 (advanced composition, Dwork & Roth Thm 3.20) over ``T = epochs`` per-epoch (eps, delta) steps.

    ``eps' = sqrt(2 T ln(1/delta')) eps + T eps (e^eps - 1)`` and total ``delta = T delta + delta'``.

    Returns
    -------
    (float, float)
        ``(eps', T delta + delta')``.
    """
    owner = "corollary1"
    e = check_float(epsilon, "epsilon", owner, 0.0, math.inf, closed="left")
    d = check_float(delta, "delta", owner, 0.0, 1.0, closed="left")
    t = check_int(epochs, "epochs", owner, 0)
    dp = check_float(delta_prime, "delta_prime", owner, 0.0, 1.0)
    if t == 0:
        return 0.0, 0.0
    growth = math.expm1(e) if e < 700.0 else math.inf  # e^eps overflows a float beyond ~709
    return math.sqrt(2.0 * t * math.log(1.0 / dp)) * e + t * e * growth, t * d + dp


def worst_case_sensitivity(n_samples: int, bound: float) -> float:
    """A bound that needs no assumption on y, z: ``||D x - D' x'|| <= ||D x|| + ||D' x'|| <= 2 sqrt(N) b_m``.

    Valid whenever every row has l2 norm at most 1 (so ``||D||_op <= ||D||_F <= sqrt(N)``) and
    ``||x_m|| <= b_m``, for any change of one row.
    """
    n = check_int(n_samples, "n_samples", "worst_case_sensitivity", 1)
    b = check_float(bound, "bound", "worst_case_sensitivity", 0.0, math.inf)
    return 2.0 * math.sqrt(n) * b


#: labels: any 1-D array of numbers (checked against the loss in ADMMSharing._check); described by their count
_LABELS = Instance((np.ndarray, list, tuple), "a 1-D array of labels", lambda v: f"{len(v)} labels")


# --------------------------------------------------------------------------- the mechanism
class SharingGaussian(Parameterized):
    """Gaussian perturbation of each party's shared predictions ``D_m x_m`` (paper eq. 7, Lemma 1, Theorem 1).

    Parameters
    ----------
    epsilon : float, optional
        Per-epoch epsilon of every party (``calibrate="step"``, the paper's setting) or each party's total over
        the run (``calibrate="total"``). ``calibration="classic"`` (Theorem 1) needs it in (0, 1]. Give exactly
        one of ``epsilon`` and ``sigma``.
    delta : float
        Per-epoch delta (``calibrate="step"``) or total delta (``calibrate="total"``), in (0, 1).
    sigma : float, optional
        Fix the noise standard deviation instead (the paper's Fig. 3 "noise levels"); the per-epoch claim is
        then Theorem 1's ``eps = sqrt(2 ln(1.25/delta)) C / sigma`` when that is <= 1, else the analytic
        Gaussian epsilon (Balle & Wang 2018) of ``sigma / C`` at ``delta``, which is valid for every epsilon.
    calibration : {"analytic", "classic"}, default "analytic"
        "analytic": the smallest sigma giving (eps, delta)-DP
        (:func:`cvxdp.privacy.calibration.gaussian_sigma_analytic`), valid for any epsilon. "classic":
        Theorem 1's formula (the paper).
    sensitivity : {"worst_case", "paper"} or float, default "worst_case"
        "worst_case": ``2 sqrt(N) b_m``, sound: it needs only the bounded set and normalised rows (checked).
        "paper": Lemma 1's ``C_m = 3/(d_m rho) [lam c1 + (1 + M rho) b1]`` — a **paper preset**: it
        reproduces the published figures but is invalid in general (a counterexample is in the tests), so
        the ledger records ``guarantee: false`` and the run warns once. A float: a sensitivity you derived
        yourself, used as is.
    calibrate : {"step", "total"}
        "total": calibrate sigma so that ``epochs`` epochs compose to (epsilon, delta) under the run's
        accountant (:func:`cvxdp.privacy.calibration.calibrate_to_total`).
    delta_prime : float, optional
        The delta' of Corollary 1 (default: ``delta``). RDP/PLD totals are reported at the Corollary's total
        ``T delta + delta'`` unless ``solve(target_delta=...)`` says otherwise, so all three are comparable.
    assumptions : {"raise", "record"}, default "raise"
        What to do when Assumption 1.1 fails during a run with ``sensitivity="paper"`` (``||y||`` or ``||z||``
        above b1), which voids the claim: stop with :class:`AssumptionViolation` (default), or (explicit
        opt-out) continue, mark the history (``assumption_ok``) and record in the ledger that the claim is
        void. "warn" is an alias of "record".
    """

    placement = "output"
    short_name = "SharingG"
    parameters: ClassVar[dict[str, Param]] = {
        "epsilon": param(POSITIVE, NoneValue(), help="per-epoch epsilon of every party (or each party's total with "
                         "calibrate = total); give exactly one of epsilon and sigma"),
        "delta": param(Interval(0.0, 1.0), help="per-epoch delta (or the total delta)"),
        "sigma": param(POSITIVE, NoneValue(), help="a fixed noise standard deviation instead of epsilon"),
        "calibration": param(Options(CALIBRATIONS), help="analytic (any epsilon) | classic (Theorem 1, epsilon <= 1)"),
        "sensitivity": param(Options(SENSITIVITIES), POSITIVE, help="worst_case (sound) | paper (Lemma 1: a paper "
                             "preset, not a guarantee) | a float you derived"),
        "calibrate": param(Options(("step", "total")), help="step: per epoch | total: each party's whole run"),
        "delta_prime": param(Interval(0.0, 1.0), NoneValue(), help="the delta' of Corollary 1 (default: delta)"),
        "assumptions": param(Options(ASSUMPTION_MODES), help="what to do when Assumption 1.1 fails under the paper "
                             "preset: raise | record (\"warn\" is an alias)"),
    }

    def __init__(self, epsilon: float | None = None, delta: float = 1e-5, *, sigma: float | None = None,
                 calibration: str = "analytic", sensitivity: str | float = "worst_case", calibrate: str = "step",
                 delta_prime: float | None = None, assumptions: str = "raise") -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.calibrate = calibrate
        self.delta_prime = delta_prime
        self.assumptions = assumptions

    @property
    def scope(self) -> str:
        """What epsilon/delta describe: "step" or "total" (the ``calibrate`` parameter)."""
        return self.calibrate

    def _check(self) -> None:
        owner = "SharingGaussian"
        if (self.epsilon is None) == (self.sigma is None):
            raise fail("epsilon", owner, "given exactly when 'sigma' is not (one of the two)",
                       (self.epsilon, self.sigma))
        if self.epsilon is not None and self.calibration == "classic" and self.calibrate == "step":
            check_float(self.epsilon, "epsilon", owner, 0.0, 1.0, closed="right")
        if self.sigma is not None and self.calibrate != "step":
            raise fail("calibrate", owner, "'step' when sigma is given", self.calibrate)

    @property
    def delta_prime_value(self) -> float:
        return float(self.delta if self.delta_prime is None else self.delta_prime)

    def describe(self) -> dict[str, Any]:
        return {"mechanism": self.short_name, **super().describe(), "delta_prime": self.delta_prime_value}

    def party_sensitivity(self, *, d_m: int, n_samples: int, bound: float, rho: float, lam: float, c1: float,
                          b1: float, parties: int) -> float:
        """The l2 sensitivity of one party's ``D_m x_m`` under this mechanism's ``sensitivity`` choice."""
        if self.sensitivity == "paper":
            return lemma1_sensitivity(d_m, rho, lam, c1, b1, parties)
        if self.sensitivity == "worst_case":
            return worst_case_sensitivity(n_samples, bound)
        return float(self.sensitivity)

    def noise_for(self, sensitivity: float, *, epochs: int, accountant: str) -> tuple[float, float, float]:
        """``(sigma, eps_step, delta_step)`` for one party with l2 ``sensitivity``.

        ``eps_step, delta_step`` is the per-epoch claim recorded in the ledger (basic composition) and used
        by Corollary 1.
        """
        self.validate()
        c, dl = float(sensitivity), float(self.delta)
        if self.sigma is not None:
            sigma = float(self.sigma)
            eps_t1 = theorem1_epsilon(c, sigma, dl)
            return sigma, (eps_t1 if eps_t1 <= 1.0 else gaussian_epsilon(c, sigma, dl)), dl
        eps = float(self.epsilon)
        if self.calibrate == "step":
            if self.calibration == "classic":
                return theorem1_sigma(c, eps, dl), eps, dl
            return gaussian_sigma_analytic(c, eps, dl), eps, dl
        sigma = calibrate_to_total("gaussian", c, eps, dl, epochs, accountant, calibration=self.calibration
                                   if self.calibration == "analytic" else "classic")
        step_delta = dl / epochs
        return sigma, gaussian_epsilon(c, sigma, step_delta), step_delta


# --------------------------------------------------------------------------- the algorithm
class ADMMSharing(Algorithm):
    """DP ADMM sharing over vertically partitioned features (Hu et al. 2020, Algorithm 1): "sharing".

    Parameters
    ----------
    rho : float
        Penalty of the augmented Lagrangian (5), > 0. The loss is a *mean* over samples, so rho lives on the
        scale 1/N: 0.25/N to 1/N converges in tens of epochs on the bundled data with the logistic loss.
        The parties update in parallel (Jacobi, as Algorithm 1), which needs rho of at least about the loss
        curvature (1/(4N) logistic, 1/N squared); much below it the iterates can diverge. Lemma 1's
        sensitivity grows like 1/rho.
    lam : float
        Regularisation weight lambda of (1), >= 0 (> 0 unless every party has a bound).
    epochs : int
        Number of epochs T (one x-update per party, one z- and y-update per epoch).
    loss : {"logistic", "squared"}
        The centre's loss: ``mean log(1 + exp(-b z))`` (labels in {-1, +1}) or ``mean (z - b)^2 / 2``.
    labels : array (N,), optional
        The training labels, held by the centre. Default: those of the one party declaring ``labels=``.
    test_labels : array, optional
        Labels of a test set (default: the label party's ``test_labels``); with every party's
        ``test_features`` the history gets a ``test_logloss`` column (evaluation only: nothing is sent).
    tol_primal, tol_dual : float, optional
        Stop when ``||sum_m q_m - z|| <= tol_primal`` and ``rho ||z - z_prev|| <= tol_dual``.
    record_messages : bool
        Keep every message of the run in ``result.messages`` (uplink: party -> centre, downlink: centre ->
        parties) for inspection; the per-message sizes are always in ``result.agent_history``.
    """

    name = "sharing"
    family = "sharing"
    file_aliases: ClassVar[dict[str, str]] = {"rounds": "epochs"}  # the CLI's and a case file's rounds: epochs here
    parameters: ClassVar[dict[str, Param]] = {
        "rho": param(POSITIVE, help="penalty of the augmented Lagrangian (about the loss curvature: 0.25/N to 1/N)"),
        "lam": param(NONNEGATIVE, help="l2 regularisation weight lambda"),
        "epochs": param(COUNT, help="epochs T (the CLI's --rounds)"),
        "loss": param(Options(LOSSES), help="the centre's loss: logistic | squared"),
        "labels": param(_LABELS, NoneValue(), help="the training labels, held by the centre (default: the label "
                        "party's)", file=False),
        "test_labels": param(_LABELS, NoneValue(), help="labels of a test set (evaluation only)", file=False),
        "tol_primal": param(*OPTIONAL_POSITIVE, help="stop when ||sum_m q_m - z|| falls below it (with tol_dual)"),
        "tol_dual": param(*OPTIONAL_POSITIVE, help="stop when rho ||z - z_prev|| falls below it (with tol_primal)"),
        "record_messages": param(Boolean(), help="keep every message of the run in result.messages"),
    }

    @classmethod
    def accepts(cls, privacy: object) -> bool:
        """The non-private run, :class:`SharingGaussian`, and Gaussian output perturbation (OutG: the same
        mechanism)."""
        if isinstance(privacy, str):
            return privacy in ("none", "OutG")
        return privacy is None or isinstance(privacy, SharingGaussian) or (
            isinstance(privacy, OutputPerturbation) and isinstance(privacy.distribution, Gaussian))

    def __init__(self, *, rho: float = 1.0, lam: float = 1e-3, epochs: int = 50, loss: str = "logistic",
                 labels: np.ndarray | None = None, test_labels: np.ndarray | None = None,
                 tol_primal: float | None = None, tol_dual: float | None = None,
                 record_messages: bool = False) -> None:
        self.rho = rho
        self.lam = lam
        self.epochs = epochs
        self.loss = loss
        self.labels = labels
        self.test_labels = test_labels
        self.tol_primal = tol_primal
        self.tol_dual = tol_dual
        self.record_messages = record_messages

    @property
    def rounds(self) -> int:  # the engine's name for the number of rounds
        return self.epochs

    def _check(self) -> None:
        for name in ("labels", "test_labels"):
            value = getattr(self, name)
            if value is not None:
                check_labels(value, name, type(self).__name__, self.loss)

__all__ = [
    "ADMMSharing", "AssumptionViolation", "LOSSES", "SharingGaussian", "corollary1", "log_loss",
    "lemma1_sensitivity", "loss_value", "sharing_dual_update", "theorem1_epsilon", "theorem1_sigma",
    "as_mechanism", "party_plan", "worst_case_sensitivity", "z_update", "z_update_logistic", "z_update_squared",
]


def party_plan(mechanism: SharingGaussian, party: Any, *, rho: float, lam: float, b1: float,
               parties: int, epochs: int = 1, accountant: str = "pld") -> tuple[Any, dict[str, Any]]:
    """The noise plan of one party's release ``q_m = D_m x_m + N(0, sigma^2 I_N)`` and its details.

    Sensitivity per ``mechanism.sensitivity`` (Lemma 1 by default, with the run's rho, lam, M and the common
    b1), sigma and the per-epoch claim per :meth:`SharingGaussian.noise_for`. The round loop and
    :func:`audit_sharing` both use it.
    """
    C = mechanism.party_sensitivity(d_m=party.n_features, n_samples=party.n_samples, bound=float(party.bound),
                                    rho=rho, lam=lam, c1=party.c1 if party.c1 is not None else 0.0, b1=b1,
                                    parties=parties)
    sigma, eps_step, delta_step = mechanism.noise_for(C, epochs=epochs, accountant=accountant)
    plan = NoisePlan("gaussian", scale=sigma, sensitivity=C, epsilon=eps_step, delta=delta_step, relation=RELATION)
    info = {"sensitivity": C, "sigma": sigma, "noise_multiplier": sigma / C, "eps_step": eps_step,
            "delta_step": delta_step, "d_m": party.n_features, "c1": party.c1, "bound": float(party.bound)}
    return plan, info


def as_mechanism(privacy: Any) -> SharingGaussian | None:
    """``privacy`` as the sharing family's mechanism: a :class:`SharingGaussian` as it is, a Gaussian
    :class:`~cvxdp.OutputPerturbation` (OutG: the same mechanism, with the sound default sensitivity) converted;
    None stays None."""
    if privacy is None:
        return None
    if isinstance(privacy, str) or not ADMMSharing.accepts(privacy):  # a name is not a mechanism
        raise fail("privacy", "ADMMSharing", "None, cvxdp.SharingGaussian or a Gaussian cvxdp.OutputPerturbation",
                   type(privacy).__name__ if not hasattr(privacy, "short_name") else privacy.short_name)
    if isinstance(privacy, SharingGaussian):
        return privacy.validate()
    # else OutG, which *is* the sharing mechanism: Gaussian output perturbation of D_m x_m (sound default sensitivity)
    privacy.validate()
    calibration = "classic" if privacy.calibration == "classic" else "analytic"
    return SharingGaussian(epsilon=privacy.epsilon, delta=privacy.delta, calibration=calibration,
                           calibrate=privacy.scope).validate()
