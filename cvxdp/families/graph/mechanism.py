"""Gamma-norm objective perturbation and the papers' privacy bounds (SPEC §3-§4).

Zhang, Khalili & Liu perturb the primal update of decentralized ADMM with a random vector ``eps`` whose
density is proportional to ``exp(-alpha ||eps||_2)`` ("Gamma-norm" noise: ``||eps|| ~ Gamma(shape d,
scale 1/alpha)``, direction uniform on the sphere):

* penalty perturbation (PP, ICML 2018, eq. 24): ``eta_i(t) sum_j ||f + eps - (f_i + f_j)/2||^2`` in M-ADMM,
  i.e. the linear term ``2 eta_i(t) V_i eps^T f``; DVP (Zhang & Zhu 2017) is PP with ``eta_i(t) = theta``;
* private MR-ADMM (IEEE TIFS 2019, eq. 18): the linear term ``eps^T f`` on odd iterations only.

Neighbouring relation and sensitivity. Two data sets are neighbours when they differ in **one sample of one
node's D_i (replace one sample)**; B_i is public. For the regularized ERM
``O(f, D_i) = C/B_i sum_n L(y_n f^T x_n) + rho/N R(f)`` with ``||x|| <= 1``, ``|L'| <= 1``, ``0 < L'' <= c_1``
and R 1-strongly convex, the gradient of O changes by at most ``2 C / B_i`` (l2) and its Hessian by a rank-2
term of norm at most ``2 c_1 C / B_i``. The noise is recovered from the released f through the KKT condition
of the perturbed update (a bijection), so the privacy loss of one update is ``alpha * ||eps(D) - eps(D')||``
plus the log-ratio of the Jacobians. For PP, ``eps = -(grad O + ...)/(2 eta V)`` moves by at most
``C/(eta V B_i)``; for MR-ADMM by ``2C/B_i``. The papers bound the whole run by basic composition of these
pure-DP steps:

* (26), M-ADMM with PP: ``beta = max_i sum_{t=1}^T C (1.4 c_1 + alpha_i(t)) / (eta_i(t) V_i B_i)``;
* (32), private MR-ADMM: ``beta = max_i sum_{k=1}^K 2C/B_i (1.4 c_1 / (rho/N + 2 eta_i(2k-1) V_i) + alpha_i(k))``;
  even iterations reuse the odd iteration's results and add nothing (Lemma 2).

Both hold under the parameter condition ``2 c_1 < B_i/C (rho/N + 2 theta V_i)`` (PP; MR-ADMM: with
``eta_i(1)`` in place of ``theta``), checked by :func:`check_bound_condition` with a clear error.

dp-accounting has no event for this mechanism, so each perturbed iteration is recorded in the run's
:class:`~cvxdp.privacy.accounting.PrivacyLedger` as a pure-epsilon event, :func:`gamma_step_event` (the
papers' per-iteration claim; their sum per node *is* the papers' bound, the ledger's "basic" total), and each
recycled MR-ADMM iteration as a ``NoOpDpEvent``. The ledger's "rdp" and "pld" accountants compose the steps
as binary randomized response with the same epsilon (their worst case), at the run's ``target_delta``;
:func:`gamma_summary` gives the run's privacy summary. The older :class:`GammaLedger` (zCDP instead of RDP)
is kept for saved results.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ...errors import DeclarationError, InvalidParameterError
from ...params import check_float, check_int, fail
from ...privacy.accounting import PrivacyLedger, PureEpsilonDpEvent, pure_epsilon_event
from ...privacy.notes import GuaranteeNotes

__all__ = [
    "ERMConstants", "GammaLedger", "PenaltyPerturbation", "alpha_for_bound", "attach_erm_constants",
    "bound_26", "bound_32", "check_bound_condition", "erm_constants", "gamma_norm_logpdf", "gamma_step_event",
    "gamma_summary",
    "madmm_step_epsilon", "mradmm_step_epsilon", "privacy_curve_26", "privacy_curve_32",
    "sample_gamma_norm",
]

#: The factor of the Jacobian term in the papers' bounds (26) and (32).
JACOBIAN_FACTOR = 1.4


# --------------------------------------------------------------------------- sampling
def sample_gamma_norm(rng: np.random.Generator, alpha: float, dim: int) -> np.ndarray:
    """One draw of the density ``∝ exp(-alpha ||eps||_2)`` on R^dim.

    The direction is a normalised standard normal vector (uniform on the sphere), drawn first; the norm is
    ``Gamma(shape=dim, scale=1/alpha)``, drawn second (``dim + 1`` variates from ``rng`` per call).
    """
    if not isinstance(rng, np.random.Generator):
        raise fail("rng", "sample_gamma_norm", "a numpy.random.Generator", type(rng).__name__)
    a = check_float(alpha, "alpha", "sample_gamma_norm", 0.0, math.inf)
    d = check_int(dim, "dim", "sample_gamma_norm", 1)
    direction = rng.standard_normal(d)
    nrm = float(np.linalg.norm(direction))
    while nrm == 0.0:  # pragma: no cover - probability zero
        direction = rng.standard_normal(d)
        nrm = float(np.linalg.norm(direction))
    return direction / nrm * rng.gamma(shape=d, scale=1.0 / a)


def gamma_norm_logpdf(eps: np.ndarray, alpha: float) -> float:
    """Log density of the Gamma-norm noise at ``eps`` (normalised)."""
    eps = np.asarray(eps, dtype=float).ravel()
    d = eps.size
    # normaliser: int exp(-a r) r^(d-1) S_{d-1} dr = S_{d-1} Gamma(d) / a^d, S_{d-1} = 2 pi^(d/2) / Gamma(d/2)
    log_s = math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d)
    log_z = log_s + math.lgamma(d) - d * math.log(alpha)
    return float(-alpha * np.linalg.norm(eps) - log_z)


# --------------------------------------------------------------------------- ERM constants
@dataclass(frozen=True)
class ERMConstants:
    """The constants of a node's ERM objective that enter the bounds (26) and (32).

    ``O(f, D_i) = C/B_i sum_{n=1}^{B_i} L(y_n f^T x_n) + reg * R(f)`` with ``reg = rho/N``,
    ``R(f) = ||f||^2 / 2``, ``||x_n|| <= 1``, ``|L'| <= 1``, ``0 < L'' <= c1`` (logistic: ``c1 = 1/4``).

    Parameters
    ----------
    C : float
        Loss weight, > 0 (the papers take ``C <= B_i``).
    B : int
        The node's number of samples B_i (public).
    reg : float
        ``rho / N``, >= 0.
    c1 : float
        Bound on L'', >= 0.
    """

    C: float
    B: int
    reg: float
    c1: float = 0.25

    def __post_init__(self) -> None:
        owner = "ERMConstants"
        object.__setattr__(self, "C", check_float(self.C, "C", owner, 0.0, math.inf))
        object.__setattr__(self, "B", check_int(self.B, "B", owner, 1))
        object.__setattr__(self, "reg", check_float(self.reg, "reg", owner, 0.0, math.inf, closed="left"))
        object.__setattr__(self, "c1", check_float(self.c1, "c1", owner, 0.0, math.inf, closed="left"))

    @property
    def gradient_sensitivity(self) -> float:
        """``2 C / B_i``: l2 sensitivity of grad O under replace-one-sample."""
        return 2.0 * self.C / self.B

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def attach_erm_constants(agent: Any, constants: ERMConstants) -> Any:
    """Declare ``agent``'s ERM constants (stored as ``agent.erm``); returns the agent."""
    if not isinstance(constants, ERMConstants):
        raise fail("constants", "attach_erm_constants", "a cvxdp.families.graph.mechanism.ERMConstants",
                   type(constants).__name__)
    agent.erm = constants
    return agent


def erm_constants(agent: Any) -> ERMConstants:
    """``agent.erm``, or a DeclarationError naming the agent."""
    constants = getattr(agent, "erm", None)
    if not isinstance(constants, ERMConstants):
        raise DeclarationError(
            f"Agent {getattr(agent, 'name', agent)!r}: the Gamma-norm privacy bounds (26)/(32) need the ERM "
            "constants C, B_i, c1 and rho/N; declare them with cvxdp.families.graph.mechanism.attach_erm_constants(agent, "
            "ERMConstants(C=..., B=..., reg=..., c1=...)) (the 'erm' template does).")
    return constants


# --------------------------------------------------------------------------- the papers' formulas
def madmm_step_epsilon(C: float, c1: float, alpha: float, eta: float, V: float, B: float) -> float:
    """One PP iteration of node i (the summand of eq. 26): ``C (1.4 c1 + alpha) / (eta V B)``."""
    return C * (JACOBIAN_FACTOR * c1 + alpha) / (eta * V * B)


def mradmm_step_epsilon(C: float, c1: float, alpha: float, eta: float, V: float, B: float, reg: float) -> float:
    """One odd MR-ADMM iteration of node i (the summand of eq. 32): ``2C/B (1.4 c1/(reg + 2 eta V) + alpha)``."""
    return 2.0 * C / B * (JACOBIAN_FACTOR * c1 / (reg + 2.0 * eta * V) + alpha)


def _node_table(x: Any, n: int, name: str, owner: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise fail(name, owner, f"a scalar or one value per node ({n})", x)
    return arr


def _schedule_table(x: Any, n: int, name: str, owner: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 1:
        arr = np.broadcast_to(arr, (n, arr.size))
    if arr.ndim != 2 or arr.shape[0] != n:
        raise fail(name, owner, f"an array (nodes={n}, iterations) or one row shared by all nodes", np.shape(x))
    return arr


def _shapes(alpha: Any, eta: Any, V: Any, B: Any, owner: str) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                          np.ndarray]:
    Vv = np.atleast_1d(np.asarray(V, dtype=float))
    n = Vv.size
    Bv = _node_table(B, n, "B", owner)
    a = _schedule_table(alpha, n, "alpha", owner)
    e = _schedule_table(eta, n, "eta", owner)
    if a.shape != e.shape:
        raise fail("alpha", owner, f"the shape of eta {e.shape}", a.shape)
    return a, e, Vv, Bv


def privacy_curve_26(C: Any, c1: float, alpha: Any, eta: Any, V: Any, B: Any) -> np.ndarray:
    """``P(t) = max_i sum_{r=1}^t C (1.4 c1 + alpha_i(r)) / (eta_i(r) V_i B_i)`` for t = 1..T (paper 000, §5).

    ``alpha`` and ``eta`` have shape (N, T) (or (T,), shared by all nodes); ``V`` and ``B`` shape (N,);
    ``C`` a scalar or (N,).
    """
    a, e, Vv, Bv = _shapes(alpha, eta, V, B, "privacy_curve_26")
    Cv = _node_table(C, Vv.size, "C", "privacy_curve_26")
    steps = Cv[:, None] * (JACOBIAN_FACTOR * c1 + a) / (e * Vv[:, None] * Bv[:, None])
    return np.max(np.cumsum(steps, axis=1), axis=0)


def bound_26(C: Any, c1: float, alpha: Any, eta: Any, V: Any, B: Any) -> float:
    """Eq. (26): ``beta = max_i { sum_{t=1}^T C (1.4 c1 + alpha_i(t)) / (eta_i(t) V_i B_i) }``."""
    return float(privacy_curve_26(C, c1, alpha, eta, V, B)[-1])


def privacy_curve_32(C: Any, c1: float, rho: float, N: int, alpha: Any, eta: Any, V: Any, B: Any,
                     T: int | None = None) -> np.ndarray:
    """``P(t) = max_i sum_{k=1}^{floor((t+1)/2)} 2C/B_i (1.4 c1/(rho/N + 2 eta_i(2k-1) V_i) + alpha_i(k))``.

    ``alpha`` and ``eta`` have shape (N, K): ``alpha_i(k)`` and ``eta_i(2k-1)`` for k = 1..K. Returns P(t) for
    t = 1..T (default ``T = 2K``; paper 001, §VIII).
    """
    owner = "privacy_curve_32"
    a, e, Vv, Bv = _shapes(alpha, eta, V, B, owner)
    Cv = _node_table(C, Vv.size, "C", owner)
    K = a.shape[1]
    T = 2 * K if T is None else check_int(T, "T", owner, 1, 2 * K)
    steps = 2.0 * Cv[:, None] / Bv[:, None] * (JACOBIAN_FACTOR * c1 / (rho / N + 2.0 * e * Vv[:, None]) + a)
    per_k = np.max(np.cumsum(steps, axis=1), axis=0)  # after k odd iterations
    t = np.arange(1, T + 1)
    return per_k[(t + 1) // 2 - 1]


def bound_32(C: Any, c1: float, rho: float, N: int, alpha: Any, eta: Any, V: Any, B: Any) -> float:
    """Eq. (32): ``beta = max_i { sum_{k=1}^K 2C/B_i (1.4 c1 / (rho/N + 2 eta_i(2k-1) V_i) + alpha_i(k)) }``."""
    return float(privacy_curve_32(C, c1, rho, N, alpha, eta, V, B)[-1])


def alpha_for_bound(target: float, step_epsilon: Iterable[Iterable[tuple[float, float]]]) -> float:
    """The constant alpha at which a bound that is affine in alpha per node reaches ``target``.

    ``step_epsilon[i]`` lists, for node i, pairs ``(a, b)`` with the node's per-iteration epsilon
    ``a + b * alpha``; the bound is ``max_i sum (a + b alpha)``. Returns ``min_i (target - sum a)/sum b``;
    raises if ``target`` is below the alpha-free part.
    """
    check_float(target, "target", "alpha_for_bound", 0.0, math.inf)
    best = math.inf
    for pairs in step_epsilon:
        pairs = list(pairs)
        a = sum(p[0] for p in pairs)
        b = sum(p[1] for p in pairs)
        if b > 0:
            best = min(best, (target - a) / b)
    if not best > 0:
        raise InvalidParameterError(f"alpha_for_bound: a bound of {target:g} is below the noise-free part of the "
                                    "bound (the 1.4 c1 term); no alpha > 0 reaches it.")
    return best


def check_bound_condition(constants: Sequence[ERMConstants], weights: Sequence[float], degrees: Sequence[float],
                          names: Sequence[str], *, weight_name: str = "theta", owner: str = "MADMM") -> None:
    """The papers' parameter condition ``2 c1 < B_i/C (rho/N + 2 w_i V_i)`` for every node.

    ``w_i`` is ``theta`` (PP, DVP) or ``eta_i(1)`` (MR-ADMM). Raises InvalidParameterError naming the first
    node where it fails, with the numbers.
    """
    for c, w, v, name in zip(constants, weights, degrees, names):
        rhs = c.B / c.C * (c.reg + 2.0 * w * v)
        if not 2.0 * c.c1 < rhs:
            raise InvalidParameterError(
                f"{owner}: the parameter condition 2 c1 < B_i/C (rho/N + 2 {weight_name} V_i) of the privacy bound "
                f"fails at node {name!r}: 2 c1 = {2.0 * c.c1:g} but B_i/C (rho/N + 2 {weight_name} V_i) = "
                f"{c.B:g}/{c.C:g} * ({c.reg:g} + 2 * {w:g} * {v:g}) = {rhs:g}. Raise {weight_name}, or lower C.")


# --------------------------------------------------------------------------- the mechanism
def _per_node(value: Any, name: str, owner: str, low: float, closed: str = "neither") -> Any:
    if isinstance(value, Mapping):
        return {str(k): check_float(v, f"{name}[{k!r}]", owner, low, math.inf, closed) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        vals = list(np.asarray(value, dtype=object).ravel()) if isinstance(value, np.ndarray) else list(value)
        if not vals:
            raise fail(name, owner, "a float or a non-empty list (one per node)", value)
        return [check_float(v, name, owner, low, math.inf, closed) for v in vals]
    return check_float(value, name, owner, low, math.inf, closed)


def node_values(value: Any, names: Sequence[str], name: str, owner: str) -> np.ndarray:
    """A float, a list (one per node, in the agents' order) or a dict {node: value} -> array per node."""
    n = len(names)
    if isinstance(value, Mapping):
        missing = [m for m in names if m not in value]
        if missing:
            raise fail(name, owner, f"a value for every node (missing {missing[0]!r})", sorted(value))
        extra = sorted(set(value) - set(names))
        if extra:
            raise fail(name, owner, f"values for the graph's nodes only (unknown {extra[0]!r})", sorted(value))
        return np.array([float(value[m]) for m in names])
    if isinstance(value, (list, tuple, np.ndarray)):
        vals = np.asarray(value, dtype=float).ravel()
        if vals.size != n:
            raise fail(name, owner, f"a float or a list of {n} values (one per node)", list(vals))
        return vals
    return np.full(n, float(value))


class PenaltyPerturbation:
    """Gamma-norm noise (density ∝ ``exp(-alpha ||eps||_2)``) for the decentralized ADMM family.

    With :class:`cvxdp.MADMM` it is the penalty perturbation (PP, eq. 24: ``2 eta_i(t) V_i eps^T f``), with
    :class:`cvxdp.DVP` the dual variable perturbation, with :class:`cvxdp.MRADMM` / :class:`cvxdp.RADMM` the
    objective perturbation ``eps^T f`` of odd iterations (eq. 18). See the module docstring for the
    neighbouring relation (replace one sample of one node's D_i) and the sensitivity.

    Parameters
    ----------
    alpha : float, list or dict
        ``alpha_i(1)``: one value, one per node (agents' order) or ``{node: value}``; > 0. Larger alpha,
        less noise (``E ||eps|| = d / alpha``).
    growth : float
        ``q_2`` in ``alpha_i(s) = alpha_i(1) q_2^(s-1)``, where s is the iteration t (PP/DVP) or the odd
        iteration number k (MR-ADMM); > 0 (default 1: constant).
    """

    placement = "gamma"
    short_name = "gamma"

    def __init__(self, alpha: float | Sequence[float] | Mapping[str, float] = 1.0, *, growth: float = 1.0) -> None:
        self.alpha = alpha
        self.growth = growth

    def validate(self) -> PenaltyPerturbation:
        owner = type(self).__name__
        _per_node(self.alpha, "alpha", owner, 0.0)
        check_float(self.growth, "growth", owner, 0.0, math.inf)
        return self

    def alphas(self, names: Sequence[str]) -> np.ndarray:
        """``alpha_i(1)`` per node."""
        return node_values(self.alpha, names, "alpha", type(self).__name__)

    def alpha_at(self, alpha1: np.ndarray | float, s: int) -> np.ndarray | float:
        """``alpha_i(s) = alpha_i(1) growth^(s-1)``."""
        return alpha1 * float(self.growth) ** (s - 1)

    def describe(self) -> dict[str, Any]:
        alpha = self.alpha if not isinstance(self.alpha, np.ndarray) else self.alpha.tolist()
        return {"mechanism": "gamma", "placement": "penalty/objective", "noise": "gamma-norm",
                "alpha": alpha, "growth": self.growth}

    def __repr__(self) -> str:
        return f"PenaltyPerturbation(alpha={self.alpha!r}, growth={self.growth!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.describe() == other.describe()  # type: ignore[union-attr]

    __hash__ = None  # type: ignore[assignment]


# --------------------------------------------------------------------------- the ledger
def gamma_step_event(epsilon: float) -> PureEpsilonDpEvent:
    """The DpEvent of one perturbed Gamma-norm iteration of one node: pure ``epsilon``-DP.

    ``epsilon`` is the iteration's summand of bound (26) (:func:`madmm_step_epsilon`) or (32)
    (:func:`mradmm_step_epsilon`); the neighbouring relation is replace one sample of the node's D_i (see the
    module docstring). Record it with ``PrivacyLedger.record_event(node, gamma_step_event(eps))``.
    """
    return pure_epsilon_event(epsilon, "gamma_step_event")


GAMMA_ACCOUNTANTS = {
    "basic": "sum of the papers' per-iteration pure epsilons = bound {bound}",
    "rdp": "dp-accounting RDP of pure eps-DP steps (binary randomized response, exact Renyi curve), at "
           "target_delta, capped at the basic total",
    "pld": "dp-accounting PLD of pure eps-DP steps (randomized response), at target_delta, capped at the basic "
           "total",
}


def gamma_summary(ledger: PrivacyLedger, *, bound: str, pld: bool = True) -> dict[str, Any]:
    """The privacy summary of a Gamma-norm graph run from its :class:`PrivacyLedger`.

    Same keys as :meth:`GammaLedger.summary`: ``{"per_agent": {node: {"basic": [eps, delta], "rdp": eps,
    "pld": eps, "steps": n, "free_steps": m, "paper_bound": eps}}, "worst": {..., "agent": node},
    "target_delta", "mechanism": "gamma-norm", "bound", "paper_bound", "accountants", "ledger"`` (the
    ledger's :meth:`~PrivacyLedger.to_dict`) and the guarantee notes. "pld" is None when ``pld=False``;
    infinite epsilons are None.
    """
    if not isinstance(ledger, PrivacyLedger):
        raise fail("ledger", "gamma_summary", "a cvxdp.PrivacyLedger", type(ledger).__name__)
    full = ledger.summary(pld=pld)
    per_agent: dict[str, dict[str, Any]] = {}
    for name, row in full["per_agent"].items():
        per_agent[name] = {**row, "free_steps": ledger.free_steps(name), "paper_bound": row["basic"][0]}
    worst_agent = max(per_agent, key=lambda n: math.inf if per_agent[n]["basic"][0] is None
                      else per_agent[n]["basic"][0])
    worst = {**full["worst"], "free_steps": max(v["free_steps"] for v in per_agent.values()),
             "paper_bound": per_agent[worst_agent]["basic"][0], "agent": worst_agent}
    notes = {k: v for k, v in full.items() if k not in ("per_agent", "worst", "target_delta")}
    return {"per_agent": per_agent, "worst": worst, "target_delta": ledger.target_delta,
            "mechanism": "gamma-norm", "bound": bound, "paper_bound": worst["paper_bound"],
            "accountants": {k: v.format(bound=bound) for k, v in GAMMA_ACCOUNTANTS.items()},
            "ledger": ledger.to_dict(), **notes}


def _zcdp_epsilon(eps_steps: np.ndarray, delta: float) -> float:
    """eps-DP => eps^2/2-zCDP (Bun & Steinke 2016, Prop. 3.3); rho-zCDP => (rho + 2 sqrt(rho ln 1/delta), delta)."""
    basic = float(np.sum(eps_steps))
    if delta <= 0.0 or eps_steps.size == 0:
        return basic
    rho = 0.5 * float(np.sum(eps_steps ** 2))
    return min(basic, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))


#: Relative grid onto which per-step epsilons are rounded *up* before PLD composition (groups steps).
PLD_GRID = 1e-3


def _pld_epsilon(eps_steps: np.ndarray, delta: float) -> float:
    """Epsilon at ``delta`` of the composition of pure eps_t-DP steps under dp-accounting's PLD.

    Each step is dominated by randomized response with eps_t (``from_privacy_parameters``); steps are rounded
    up onto a relative grid of ``PLD_GRID`` and grouped (conservative); pessimistic discretisation with an
    interval of 1 % of the mean step, so the total rounding stays below 1 % of the basic total.
    """
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pldm

    steps = eps_steps[eps_steps > 0]
    if steps.size == 0:
        return 0.0
    basic = float(steps.sum())
    if delta <= 0.0:
        return basic
    grid = np.exp(np.ceil(np.log(steps) / math.log1p(PLD_GRID)) * math.log1p(PLD_GRID))
    values, counts = np.unique(grid, return_counts=True)
    interval = max(1e-6, 0.01 * basic / steps.size)
    total = None
    for value, count in zip(values, counts):
        p = pldm.from_privacy_parameters(common.DifferentialPrivacyParameters(float(value), 0.0),
                                         value_discretization_interval=interval)
        if count > 1:
            p = p.self_compose(int(count))
        total = p if total is None else total.compose(p)
    return min(basic, float(total.get_epsilon_for_delta(delta)))


def inexact_solve_note(proxes: Sequence[Any]) -> str:
    """The condition the papers' bounds (26)/(32) rest on, with the tolerance the run actually used.

    The bounds assume the **exact** minimiser of the perturbed primal problem (the noise is recovered from
    its optimality condition); cvxdp solves it to a tolerance (damped Newton / L-BFGS on the stationarity
    residual, or a conic solver's own tolerances), warm-started. The ledger's totals are conditional on it.
    """
    parts = sorted({f"{p.method} (stationarity ||grad|| <= {p.tol:g} (1 + ||p||))" if p.method != "cvxpy"
                    else "cvxpy (the conic solver's default tolerances)" for p in proxes})
    return ("penalty perturbation: the bound assumes the exact minimiser of the perturbed primal problem; "
            "the solver tolerance is " + "; ".join(parts))


class GammaLedger(GuaranteeNotes):
    """Per-node record of the pure-epsilon claims of a run with Gamma-norm noise (one entry per iteration).

    ``record(node, t, eps)`` stores a perturbed iteration's claim (the summand of eq. 26 or 32);
    ``record_free(node, t)`` a recycled iteration (no data touched, no privacy spent). A node's basic total is
    the papers' bound for that node; the worst node's is the papers' beta.

    Parameters
    ----------
    agent_names : iterable of str
    target_delta : float
        Delta at which the zCDP ("rdp") and PLD totals are reported, in [0, 1).
    bound : str
        Which of the papers' bounds the claims are the summands of ("(26)" or "(32)").
    """

    def __init__(self, agent_names: Iterable[str], *, target_delta: float, bound: str = "(26)") -> None:
        names = list(agent_names)
        if not names or len(set(names)) != len(names):
            raise fail("agent_names", "GammaLedger", "a non-empty list of unique str", names)
        self.target_delta = check_float(target_delta, "target_delta", "GammaLedger", 0.0, 1.0, "left")
        self.bound = bound
        self._steps: dict[str, list[tuple[int, float]]] = {n: [] for n in names}

    def __repr__(self) -> str:
        return f"GammaLedger(agents={list(self._steps)}, target_delta={self.target_delta!r}, bound={self.bound!r})"

    @property
    def agent_names(self) -> list[str]:
        return list(self._steps)

    def _name(self, agent: object) -> str:
        name = getattr(agent, "name", agent)
        if name not in self._steps:
            raise fail("agent", "GammaLedger", "one of " + ", ".join(map(repr, self._steps)), name)
        return name

    def record(self, agent: object, t: int, epsilon: float) -> None:
        """Record iteration ``t`` of ``agent`` as a pure ``epsilon``-DP step (epsilon > 0)."""
        eps = check_float(epsilon, "epsilon", "GammaLedger.record", 0.0, math.inf)
        self._steps[self._name(agent)].append((int(t), eps))

    def record_free(self, agent: object, t: int) -> None:
        """Record iteration ``t`` of ``agent`` as a recycled step: no data touched, epsilon 0."""
        self._steps[self._name(agent)].append((int(t), 0.0))

    def entries(self, agent: object) -> list[tuple[int, float]]:
        """``(iteration, epsilon)`` of every recorded iteration of ``agent``."""
        return list(self._steps[self._name(agent)])

    def epsilons(self, agent: object) -> np.ndarray:
        return np.array([e for _, e in self._steps[self._name(agent)]], dtype=float)

    def steps(self, agent: object) -> int:
        """Number of private (perturbed) iterations of ``agent``."""
        return int(np.count_nonzero(self.epsilons(agent)))

    def free_steps(self, agent: object) -> int:
        """Number of recycled iterations of ``agent`` (recorded with epsilon 0)."""
        return int(np.sum(self.epsilons(agent) == 0.0))

    def spent(self, agent: object, accountant: str = "basic") -> tuple[float, float]:
        """``(epsilon, delta)`` spent by ``agent``: "basic" (the papers' sum), "rdp" (zCDP) or "pld"."""
        from ...params import check_choice

        check_choice(accountant, "accountant", "GammaLedger.spent", ("basic", "rdp", "pld"))
        eps = self.epsilons(agent)
        if accountant == "basic" or self.target_delta == 0.0:
            return float(eps.sum()), 0.0
        if accountant == "rdp":
            return _zcdp_epsilon(eps[eps > 0], self.target_delta), self.target_delta
        return _pld_epsilon(eps, self.target_delta), self.target_delta

    def would_exceed(self, agent: object, epsilon: float, budget: tuple[float, float], rtol: float = 1e-9) -> bool:
        """Whether one more step of ``epsilon`` takes ``agent``'s basic total past ``budget[0]``."""
        return self.spent(agent, "basic")[0] + epsilon > budget[0] * (1.0 + rtol)

    def summary(self, *, pld: bool = True) -> dict[str, Any]:
        """Totals per node and for the worst node (the same shape as :meth:`PrivacyLedger.summary`).

        ``{"per_agent": {node: {"basic": [eps, 0.0], "rdp": eps, "pld": eps, "steps": n, "free_steps": m}},
        "worst": {..., "agent": node}, "target_delta": delta, "mechanism": "gamma-norm",
        "paper_bound": beta, "bound": "(26)" | "(32)", "accountants": {...}}``. "rdp" is zCDP; "pld" is
        None when ``pld=False``.
        """
        per_agent: dict[str, dict[str, Any]] = {}
        for name in self._steps:
            basic = self.spent(name, "basic")[0]
            per_agent[name] = {"basic": [basic, 0.0], "rdp": self.spent(name, "rdp")[0],
                               "pld": self.spent(name, "pld")[0] if pld else None,
                               "steps": self.steps(name), "free_steps": self.free_steps(name),
                               "paper_bound": basic}
        worst_agent = max(per_agent, key=lambda n: per_agent[n]["basic"][0])
        worst = {"basic": [max(v["basic"][0] for v in per_agent.values()), 0.0],
                 "rdp": max(v["rdp"] for v in per_agent.values()),
                 "pld": max(v["pld"] for v in per_agent.values()) if pld else None,
                 "steps": max(v["steps"] for v in per_agent.values()),
                 "free_steps": max(v["free_steps"] for v in per_agent.values()),
                 "paper_bound": per_agent[worst_agent]["basic"][0], "agent": worst_agent}
        return {"per_agent": per_agent, "worst": worst, "target_delta": self.target_delta,
                "mechanism": "gamma-norm", "bound": self.bound, "paper_bound": worst["paper_bound"],
                "accountants": {"basic": f"sum of the papers' per-iteration pure epsilons = bound {self.bound}",
                                "rdp": "zCDP of pure eps-DP steps (eps^2/2 each), at target_delta",
                                "pld": "dp-accounting PLD of pure eps-DP steps (randomized response), at target_delta"},
                "ledger": self.to_dict(), **self.notes_summary()}

    def to_dict(self) -> dict[str, Any]:
        return {"format": "cvxdp-gamma-ledger/1", "target_delta": self.target_delta, "bound": self.bound,
                "notes": self.notes,
                "agents": {n: [[t, e] for t, e in steps] for n, steps in self._steps.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GammaLedger:
        """Inverse of :meth:`to_dict` (also accepts a summary, which embeds it under "ledger")."""
        d = d.get("ledger", d) if "agents" not in d else d
        try:
            ledger = cls(list(d["agents"]), target_delta=d["target_delta"], bound=d.get("bound", "(26)"))
            for name, rows in d["agents"].items():
                ledger._steps[name] = [(int(t), float(e)) for t, e in rows]
            ledger._restore_notes(d)
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidParameterError(f"GammaLedger.from_dict: malformed ledger dict ({err!r}).") from err
        return ledger

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GammaLedger):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


def penalty_perturbation_from_table(table: Mapping[str, Any]) -> PenaltyPerturbation:
    """A [privacy] table with ``mechanism = "gamma"`` -> :class:`PenaltyPerturbation` (keys alpha, growth)."""
    from ...errors import ConfigError

    params = {k: v for k, v in table.items() if k != "mechanism"}
    unknown = sorted(set(params) - {"alpha", "growth"})
    if unknown:
        raise ConfigError(f"[privacy] with mechanism = \"gamma\" takes 'alpha' and 'growth'; unknown "
                          f"{', '.join(map(repr, unknown))}.")
    return PenaltyPerturbation(**params).validate()
