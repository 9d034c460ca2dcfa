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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ...errors import DeclarationError, InvalidParameterError, check_float, check_int, fail
from ...params import POSITIVE, Param, Parameterized, PerNode, param
from ...privacy import PureEpsilonDpEvent, pure_epsilon_event
from .topology import check_graph

__all__ = [
    "ERMConstants", "PenaltyPerturbation", "alpha_for_bound", "attach_erm_constants",
    "bound_26", "bound_32", "check_bound_condition", "erm_constants", "gamma_norm_logpdf", "gamma_step_event",

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


class PenaltyPerturbation(Parameterized):
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
    parameters: ClassVar[dict[str, Param]] = {
        "alpha": param(PerNode(0.0), help="Gamma-norm noise rate alpha_i(1) (larger: less noise, E||eps|| = d/alpha)"),
        "growth": param(POSITIVE, help="alpha_i(t) = alpha_i(1) growth^(t-1)"),
    }

    def __init__(self, alpha: float | Sequence[float] | Mapping[str, float] = 1.0, *, growth: float = 1.0) -> None:
        self.alpha = alpha
        self.growth = growth

    def alphas(self, names: Sequence[str]) -> np.ndarray:
        """``alpha_i(1)`` per node."""
        return node_values(self.alpha, names, "alpha", type(self).__name__)

    def alpha_at(self, alpha1: np.ndarray | float, s: int) -> np.ndarray | float:
        """``alpha_i(s) = alpha_i(1) growth^(s-1)``."""
        return alpha1 * float(self.growth) ** (s - 1)

    def describe(self) -> dict[str, Any]:
        return {"mechanism": "gamma", "placement": "penalty/objective", "noise": "gamma-norm", **super().describe()}


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


def inexact_solve_note(solvers: Sequence[Mapping[str, Any]]) -> str:
    """The condition the papers' bounds (26)/(32) rest on, with the tolerance the run actually used.

    The bounds assume the **exact** minimiser of the perturbed primal problem (the noise is recovered from
    its optimality condition); cvxdp solves it to a tolerance (damped Newton / L-BFGS on the stationarity
    residual, or a conic solver's own tolerances), warm-started. The ledger's totals are conditional on it.
    """
    parts = sorted({f"{p['method']} (stationarity ||grad|| <= {p['tol']:g} (1 + ||p||))" if p["method"] != "cvxpy"
                    else "cvxpy (the conic solver's default tolerances)" for p in solvers})
    return ("penalty perturbation: the bound assumes the exact minimiser of the perturbed primal problem; "
            "the solver tolerance is " + "; ".join(parts))


# --------------------------------------------------------------------------- schedules and claims of a run
def check_penalty_perturbation(privacy: Any, algorithm: Any) -> PenaltyPerturbation | None:
    """``privacy`` validated: None or a mechanism ``algorithm`` accepts (a :class:`PenaltyPerturbation`, the graph
    family's only mechanism)."""
    if privacy is None:
        return None
    if isinstance(privacy, str) or not algorithm.accepts(privacy):  # a name is not a mechanism
        raise fail("privacy", type(algorithm).__name__, "None or a cvxdp.PenaltyPerturbation (Gamma-norm noise; the "
                   "Laplace/Gaussian mechanisms belong to LinearizedADMM)", type(privacy).__name__)
    return privacy.validate()


def penalty_schedule(algorithm: Any, names: Sequence[str]) -> Callable[[int], np.ndarray]:
    """``t -> eta_i(t)`` per node: ``eta_i(1) q_i^(t-1)`` (M-ADMM) or ``eta_hat_i q_i^ceil(t/2)`` (MR-ADMM)."""
    eta1, q = algorithm.penalties(names)
    if algorithm.kind == "radmm":
        return lambda t: eta1 * q ** ((t + 1) // 2)
    return lambda t: eta1 * q ** (t - 1)


def step_epsilons(erm: Sequence[Any], alpha: np.ndarray, eta: np.ndarray, V: np.ndarray,
                   recycled: bool) -> np.ndarray:
    """The per-node claims of one perturbed iteration: the summands of (26) or, for MR-ADMM, (32)."""
    if recycled:
        return np.array([mradmm_step_epsilon(c.C, c.c1, a, e, v, c.B, c.reg)
                         for c, a, e, v in zip(erm, alpha, eta, V)])
    return np.array([madmm_step_epsilon(c.C, c.c1, a, e, v, c.B) for c, a, e, v in zip(erm, alpha, eta, V)])


def privacy_plan(algorithm: Any, agents: Sequence[Any], privacy: Any) -> pd.DataFrame:
    """The per-iteration claims of a run, computed before running it (no data read, no noise drawn).

    Returns a DataFrame indexed by iteration t = 1..T with one column per node (0 on recycled iterations);
    ``plan.sum().max()`` is the papers' bound (26)/(32) of the run, ``plan.cumsum().max(axis=1)`` is P(t).
    """
    algorithm.validate()
    privacy = check_penalty_perturbation(privacy, algorithm)
    if privacy is None:
        raise fail("privacy", "privacy_plan", "a cvxdp.PenaltyPerturbation", None)
    names = [a.name for a in agents]
    topo = check_graph(algorithm.build_graph(names), names, owner=f"{type(algorithm).__name__}'s graph")
    erm = [erm_constants(a) for a in agents]
    eta_of = penalty_schedule(algorithm, names)
    recycled = algorithm.kind == "radmm"
    alpha1 = privacy.alphas(names)
    rows = []
    for t in range(1, algorithm.rounds + 1):
        if recycled and t % 2 == 0:
            rows.append(np.zeros(len(names)))
            continue
        alpha = privacy.alpha_at(alpha1, (t + 1) // 2 if recycled else t)
        rows.append(step_epsilons(erm, alpha, eta_of(t), topo.degrees, recycled))
    return pd.DataFrame(rows, columns=names, index=pd.RangeIndex(1, algorithm.rounds + 1, name="round"))
