"""Box-constrained multiclass logistic regression, one agent per data holder (Ryu & Kim §6.2, eq. 30).

Agent p holds samples ``I_p`` and minimises

    f_p(theta) = (1/I) sum_{i in I_p} CE(softmax(theta^T x_i), y_i),     W = {theta : |theta_jk| <= bound}

where ``I`` is the total number of samples over all agents (a public constant, fixed by the federation;
neighbouring data sets change one agent's ``I_p`` but not the normaliser). ``theta`` is a (features x
classes) matrix; the agent's flat local vector is ``u = theta.ravel(order="F")`` (class columns contiguous).

The CVXPY objective is DCP and DPP: ``sum(log_sum_exp(X @ theta, axis=1)) - sum(M * theta)`` with the
private data ``X`` (n x d) and ``M = X^T Y`` (d x K, ``Y`` one-hot) as parameters. The box is declared as
``theta <= bound, theta >= -bound`` so the engine's projection is a clip.

Sensitivity (add/remove one sample ``(x, y)`` with ``||x||_2 <= C``, public ``I``)
---------------------------------------------------------------------------------
``I`` must be the same for neighbours: a public constant under add/remove one, or the data's own total
under replace one (see :mod:`cvxdp_models.logistic.relation`; replace one doubles the bounds below).
The gradient changes by the per-sample term ``(1/I) x (p - e_y)^T`` with ``p = softmax(theta^T x)``, so

- l2 (Frobenius): ``||x||_2 ||p - e_y||_2 / I``. With ``s = 1 - p_y = sum_{k != y} p_k``,
  ``||p - e_y||_2^2 = s^2 + sum_{k != y} p_k^2 <= 2 s^2``, hence ``Delta_2 <= sqrt(2) s_max C / I``.
- l1 (entrywise): ``||x||_1 ||p - e_y||_1 / I = 2 s ||x||_1 / I`` and ``||x||_1 <= sqrt(d) ||x||_2``, hence
  ``Delta_1 <= 2 sqrt(d) s_max C / I``.

Here ``s_max = 1 - p_min`` where on the box ``|(theta_k - theta_y)^T x| <= 2 bound ||x||_1 <= 2 bound sqrt(d) C``
gives ``p_y >= p_min = 1 / (1 + (K - 1) exp(2 bound sqrt(d) C))``. ``s_max = 1`` recovers SPEC §6.2's
``sqrt(2) C / I``; the refinement only matters for small ``bound * C * sqrt(d)``. It holds for ``theta``
in the box, which is where the engine evaluates the gradient in a private run (it projects a noisy
OutPert output into ``W`` first).

Curvature (the public bound ``L_p`` each agent declares, :attr:`MulticlassLogistic.public_lipschitz`)
----------------------------------------------------------------------------------------------------
With ``vec`` column-major, the Hessian of ``f_p`` is ``(1/I) sum_{i in I_p} S_i (x) x_i x_i^T`` with the softmax
Jacobian ``S_i = diag(p_i) - p_i p_i^T``. For any ``v``, ``v^T S_i v = Var_{k ~ p_i}(v_k)``, the variance of a
distribution on the values ``v_k``, which is at most ``(max v - min v)^2 / 4 <= (v_max^2 + v_min^2) / 2 <=
||v||^2 / 2`` (Popoviciu's inequality), so ``||S_i||_2 <= 1/2`` and each sample adds at most ``||x_i||^2 / 2 <=
C^2 / 2`` to the Hessian's norm. Summed: ``L_p = n_p C^2 / (2 I)``. Under add/remove (public ``I``) the agent's
count ``n_p`` is not fixed across neighbours and only ``n_p <= I`` holds, so the bound declared is ``C^2 / 2``;
under replace one ``n_p`` is fixed and the bound is ``n_p C^2 / (2 I)``. It reads public constants only, holds
for every ``theta`` (not only in the box) and every neighbouring data set, and is reached: with every row equal to
one vector of norm ``C``, two classes, ``theta = 0`` and ``n_p = I``, the Hessian has the eigenvalue ``C^2 / 2``
(``tests/models/logistic/test_lipschitz.py``). Declaring it means set-up never estimates a curvature when eta is
given; with ``eta="auto"`` a non-private run still measures the data's curvature and takes the smaller
(:func:`cvxdp.model.curvature.lipschitz_constants`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cvxpy as cp
import numpy as np

import cvxdp

from . import relation as rel
from .data import clip_rows

__all__ = ["MulticlassLogistic", "block_rows_of", "label_positions", "multiclass_agents", "multiclass_sensitivity",
           "one_hot", "softmax_cost", "softmax_gradient", "value_and_gradient"]



def one_hot(y: np.ndarray, classes: int) -> np.ndarray:
    """``Y[i, y_i] = 1`` for integer labels in ``[0, classes)``."""
    y = np.asarray(y, dtype=int)
    Y = np.zeros((len(y), classes))
    Y[np.arange(len(y)), y] = 1.0
    return Y


def _softmax(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of logits ``Z`` (stable)."""
    zmax = Z.max(axis=1, keepdims=True)
    # floor at -600: exp never returns a subnormal (subnormals make BLAS calls 10-100x slower); the
    # change in value is below K * 1e-260
    E = np.exp(np.maximum(Z - zmax, -600.0))
    E /= E.sum(axis=1, keepdims=True)
    return E


def _cost_from_logits(Z: np.ndarray, y: np.ndarray, total: int) -> float:
    zmax = Z.max(axis=1)
    lse = np.log(np.exp(np.maximum(Z - zmax[:, None], -600.0)).sum(axis=1)) + zmax
    return float((lse.sum() - Z[np.arange(len(y)), y].sum()) / total)


def _gradient_from_logits(Z: np.ndarray, X: np.ndarray, Y: np.ndarray, total: int) -> np.ndarray:
    P = _softmax(Z)
    P -= Y
    return X.T @ P / total


#: Bytes of ``X`` per block of the fused pass: a block stays in cache between its two products
#: (``X_b theta`` and ``X_b^T P_b``), so one round reads the data from memory once instead of twice.
BLOCK_BYTES = 1 << 20
#: The precisions of the fast path ("float32" halves the bytes moved and doubles the SIMD width).
DTYPES = ("float64", "float32")


def _exp_floor(dtype: np.dtype) -> float:
    """Logit gap below which ``exp`` is floored: no subnormal results (they make BLAS 10-100x slower)."""
    return -600.0 if dtype == np.float64 else -80.0  # float32 subnormals start near exp(-87.3)


def block_rows_of(X: np.ndarray) -> int:
    """Rows per block of :func:`value_and_gradient`'s fused pass: about :data:`BLOCK_BYTES` of ``X``."""
    return max(64, BLOCK_BYTES // max(1, X.shape[1] * X.itemsize))


def label_positions(y: np.ndarray, classes: int, rows: int) -> np.ndarray:
    """Flat position of each row's label in its block's ``(rows, classes)`` buffer: ``(i mod rows) classes + y_i``
    (what :func:`value_and_gradient` would compute block by block; a model computes it once)."""
    y = np.asarray(y)
    return (np.arange(len(y)) % rows) * classes + y


def value_and_gradient(theta: np.ndarray, X: np.ndarray, y: np.ndarray, total: int,
                       block_rows: int | None = None, row_l1_bound: float | None = None,
                       positions: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """``softmax_cost`` and ``softmax_gradient`` at ``theta`` in one blocked pass over ``X``.

    For each block of rows: logits ``Z = X_b theta`` (in ``X``'s precision), the row-wise log-sum-exp (the
    value), ``softmax(Z) - e_y`` in place, and ``X_b^T (softmax(Z) - e_y)`` added to a float64
    accumulator. Each block is read once and reused from cache by the second product. The softmax is
    shifted by each row's maximum only when the logits may be large: with ``row_l1_bound >= max_i ||x_i||_1``,
    ``|Z_ik| <= max|theta| * row_l1_bound``, and below :func:`_shift_free_bound` neither ``exp`` nor the
    normalised probabilities can overflow or become subnormal, so the shift (three passes over ``Z``) is
    skipped. :class:`MulticlassLogistic` passes the public ``sqrt(d) C`` (``||x||_1 <= sqrt(d) ||x||_2``),
    so which branch runs depends on ``theta`` and public constants only.

    Parameters
    ----------
    theta : ndarray, shape (d, K)
    X : ndarray, shape (n, d), float64 or float32, C-contiguous
        The products run in this precision; sums over blocks and the value are accumulated in float64.
    y : ndarray of int, shape (n,)
    total : int
        The normaliser ``I``.
    block_rows : int, optional
        Rows per block (default: about :data:`BLOCK_BYTES` of ``X``).
    row_l1_bound : float, optional
        A bound on ``max_i ||x_i||_1`` (None: always shift).
    positions : ndarray of int, shape (n,), optional
        ``label_positions(y, K, rows)`` for the rows per block used here (computed once by the caller; None:
        computed block by block). Same numbers either way.

    Returns
    -------
    (float, ndarray of shape (d, K), float64, column-major)
    """
    n, d = X.shape
    theta = np.asarray(theta)
    t = np.asarray(theta, dtype=X.dtype)
    K = t.shape[1]
    rows = block_rows or block_rows_of(X)
    # max |theta_jk| as max(max theta, -min theta): the same number from two reductions, without |theta|'s
    # temporary (a column-major view's |theta| took 27 us at 784 x 62, the two reductions 11)
    largest = max(float(theta.max()), -float(theta.min())) if theta.size else 0.0
    shift = row_l1_bound is None or largest * row_l1_bound > _shift_free_bound(X.dtype, K)
    floor = _exp_floor(X.dtype)
    G = np.zeros(t.shape)
    buf = np.empty((min(rows, n), K), dtype=X.dtype)
    lse_sum = picked_sum = 0.0
    for start in range(0, n, rows):
        Xb = X[start:start + rows]
        Z = buf[:len(Xb)]
        # the labels' positions in the flat block
        labels = np.arange(len(Xb)) * K + y[start:start + len(Xb)] if positions is None \
            else positions[start:start + len(Xb)]
        np.matmul(Xb, t, out=Z)
        picked_sum += float(Z.take(labels).sum(dtype=np.float64))
        if shift:
            zmax = Z.max(axis=1, keepdims=True)
            Z -= zmax
            np.maximum(Z, floor, out=Z)
            lse_sum += float(zmax.sum(dtype=np.float64))
        np.exp(Z, out=Z)
        S = Z.sum(axis=1, keepdims=True)
        lse_sum += float(np.log(S, dtype=np.float64).sum())
        Z *= 1.0 / S
        Z.ravel()[labels] -= 1.0
        G += Xb.T @ Z
    # the quotients written column-major: the flat (column-major) gradient is then a plain copy of them, not a
    # transposing one (the same numbers)
    out = np.empty(t.shape, order="F")
    np.divide(G, total, out=out)
    return (lse_sum - picked_sum) / total, out


def _same_point(u: np.ndarray, last: np.ndarray) -> bool:
    """``np.array_equal(u, last)``, answered from every 97th entry first when they differ there (a new point
    usually does): the same answer, without comparing the whole vector on a miss."""
    if u.shape != last.shape or not (u[::97] == last[::97]).all():
        return False
    return bool((u == last).all())


def _shift_free_bound(dtype: np.dtype, classes: int) -> float:
    """Largest logit magnitude ``b`` for which the softmax needs no shift: with ``|Z_ik| <= b``,
    ``exp(Z)`` is in ``[e^-b, e^b]``, its row sums at most ``K e^b``, and the probabilities at least
    ``e^(-2b) / K``: all normal numbers, far from overflow (float64: ``b = 300``; float32: ``b = 40``, whose
    smallest probability ``1.8e-35 / K`` stays normal for ``K`` up to 1,000; larger ``K`` always shift)."""
    if dtype == np.float64:
        return 300.0
    return 40.0 if classes <= 1000 else 0.0


def softmax_cost(theta: np.ndarray, X: np.ndarray, y: np.ndarray, total: int) -> float:
    """``(1/total) sum_i CE(softmax(theta^T x_i), y_i)`` for ``theta`` of shape (d, K)."""
    return _cost_from_logits(X @ theta, y, total)


def softmax_gradient(theta: np.ndarray, X: np.ndarray, Y: np.ndarray, total: int) -> np.ndarray:
    """Gradient ``X^T (softmax(X theta) - Y) / total`` (shape (d, K)) of :func:`softmax_cost`."""
    return _gradient_from_logits(X @ theta, X, Y, total)


def multiclass_sensitivity(features: int, classes: int, clip: float, total: int,
                           bound: float | None = None, relation: str = "add_remove") -> cvxdp.Sensitivity:
    """Gradient sensitivity of eq. (30) with ``||x||_2 <= clip`` and a normaliser fixed across neighbours.

    Parameters
    ----------
    features, classes : int
        ``d`` and ``K``.
    clip : float
        Row-norm bound ``C``.
    total : int
        The normaliser ``I`` (total number of training samples).
    bound : float, optional
        Box half-width; tightens ``s_max`` below 1 (see the module docstring). ``None``: ``s_max = 1``.
    relation : {"add_remove", "replace"}
        The neighbouring relation; "replace" doubles both bounds.

    Returns
    -------
    cvxdp.Sensitivity
        ``l2 = k sqrt(2) s_max C / I``, ``l1 = k 2 sqrt(d) s_max C / I`` (k = 1 add/remove, 2 replace).
    """
    s_max = 1.0
    if bound is not None and classes >= 2:
        expo = 2.0 * bound * math.sqrt(features) * clip
        s_max = 1.0 - 1.0 / (1.0 + (classes - 1) * math.exp(expo)) if expo < 700 else 1.0
    k = rel.factor(relation)
    return cvxdp.Sensitivity(l1=k * 2.0 * math.sqrt(features) * s_max * clip / total,
                             l2=k * math.sqrt(2.0) * s_max * clip / total, relation=rel.describe(relation, total))


class MulticlassLogistic:
    """One agent's local model of eq. (30): CVXPY declaration plus fast numpy value and gradient.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Local features (already clipped to ``||x_i|| <= clip``).
    y : ndarray, shape (n,)
        Local labels in ``[0, classes)``.
    classes : int
    total : int
        The global normaliser ``I``.
    bound : float
        Box half-width of ``W``.
    name : str
        Agent name.
    clip : float
        The row-norm bound the data satisfy (used for the sensitivity only).
    relation : {"add_remove", "replace"}
        The neighbouring relation of the sensitivity (``total`` must be fixed under it).
    dtype : {"float64", "float32"}
        Precision of the fast numpy value and gradient (the CVXPY declaration is always float64).
        "float32" moves half the bytes (timings: ``benchmarks/bench_fl.py``); its iterates stay within 1e-5
        (relative, max norm) of float64's over 50 rounds and its test predictions are the same
        (``tests/models/logistic/test_fast_path.py``).
        Its rounding (about 1e-7 of each product) is not part of the sensitivity analysis, which assumes
        exact arithmetic in either precision. The gradient is summed and returned in float64, so the
        mechanisms add their noise to float64 vectors. The default here is "float64" (``value`` agrees with
        the CVXPY objective to 1e-12); the logistic template's ``[model] dtype`` defaults to "float32".
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, *, classes: int, total: int, bound: float, name: str,
                 clip: float, relation: str = "add_remove", dtype: str = "float64") -> None:
        if dtype not in DTYPES:
            raise ValueError(f"The 'dtype' parameter of MulticlassLogistic (agent {name!r}) must be one of "
                             f"{', '.join(DTYPES)}. Got {dtype!r} instead.")
        X64 = np.ascontiguousarray(X, dtype=float)
        self.y = np.asarray(y, dtype=int)
        if X64.ndim != 2 or len(X64) != len(self.y) or len(self.y) == 0:
            raise ValueError(f"Agent {name!r}: X must be (n, d) with n = len(y) > 0; got X {X64.shape}, "
                             f"y {self.y.shape}.")
        self.dtype = dtype
        self.X = X64 if dtype == "float64" else X64.astype(np.float32)
        self.Y = one_hot(self.y, classes)
        self.classes, self.total, self.bound, self.name, self.clip = classes, int(total), float(bound), name, clip
        self.relation = relation
        n, d = X64.shape
        # the public bound sqrt(d) C on every ||x_i||_1 lets value_and_gradient skip the softmax shift; data that
        # break the declared clip always take the shift (and break the sensitivity: multiclass_agents clips)
        clipped = bool(np.all(np.einsum("ij,ij->i", X64, X64) <= (clip * (1 + 1e-9)) ** 2))
        self.row_l1_bound = math.sqrt(d) * float(clip) if clipped else None
        # the fused pass's blocks and the labels' positions in them: computed once, not every call
        self._rows = block_rows_of(self.X)
        self._positions = label_positions(self.y, classes, self._rows)
        self.shape = (d, classes)
        self.theta = cp.Variable(self.shape, name="theta")
        self.X_param = cp.Parameter((n, d), value=X64, name=f"X_{name}")
        self.M_param = cp.Parameter(self.shape, value=X64.T @ self.Y, name=f"XtY_{name}")
        self.objective = (cp.sum(cp.log_sum_exp(self.X_param @ self.theta, axis=1))
                          - cp.sum(cp.multiply(self.M_param, self.theta))) / self.total
        self.constraints = [self.theta <= self.bound, self.theta >= -self.bound]
        self._last_u: np.ndarray | None = None
        self._last: tuple[float, np.ndarray] | None = None

    # ----------------------------------------------------------------- references
    @classmethod
    def pooled(cls, models: Sequence[MulticlassLogistic], name: str = "central",
               dtype: str | None = None) -> MulticlassLogistic:
        """One model over the union of the agents' data (same ``total``; its value is ``sum_p f_p``), in the
        precision ``dtype`` (default: the agents')."""
        m0 = models[0]
        X = np.vstack([m.X_param.value for m in models])  # the float64 data, also for float32 models
        return cls(X, np.concatenate([m.y for m in models]), classes=m0.classes,
                   total=m0.total, bound=m0.bound, name=name, clip=m0.clip, relation=m0.relation, dtype=dtype or m0.dtype)

    def constant_problem(self) -> tuple[cp.Problem, cp.Variable]:
        """``min f s.t. W`` with the data as constants (no parameter canonicalization), and its variable."""
        theta = cp.Variable(self.shape, name="theta")
        X = np.asarray(self.X, dtype=float)
        obj = (cp.sum(cp.log_sum_exp(X @ theta, axis=1)) - cp.sum(cp.multiply(X.T @ self.Y, theta)))
        return cp.Problem(cp.Minimize(obj / self.total), [theta <= self.bound, theta >= -self.bound]), theta

    @property
    def box(self) -> tuple[float, float]:
        """``(lo, hi)`` of the box ``W``."""
        return -self.bound, self.bound

    @property
    def lipschitz(self) -> float:
        """A Lipschitz constant of the gradient on this agent's data: ``||X||_2^2 / (2 I)`` (softmax Hessian <= I/2).
        Computed from the private rows: for evaluation only (the declared bound is :attr:`public_lipschitz`)."""
        return float(np.linalg.norm(self.X, 2) ** 2 / (2.0 * self.total))

    @property
    def public_lipschitz(self) -> float:
        """The public bound on the gradient's Lipschitz constant that the agent declares (module docstring):
        ``C^2 / 2`` under add/remove, ``n_p C^2 / (2 I)`` under replace one."""
        share = len(self.y) / self.total if self.relation == "replace" else 1.0
        return 0.5 * self.clip ** 2 * share

    def predict(self, u: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Class indices ``argmax_k (theta^T x)_k`` (invariant to the row scaling of ``X``)."""
        return np.argmax(X @ self.unflatten(u), axis=1)

    # ----------------------------------------------------------------- fast numpy evaluation
    def unflatten(self, u: np.ndarray) -> np.ndarray:
        """Flat column-major vector -> (d, K) matrix."""
        return np.reshape(u, self.shape, order="F")

    def _evaluate(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and (d, K) gradient at ``u``, remembered for the last ``u``: the objective at the end of a
        round and the gradient at the start of the next are taken at the same point, so one fused pass
        over the data (:func:`value_and_gradient`) serves both."""
        u = np.asarray(u, dtype=float)
        if self._last is None or not _same_point(u, self._last_u):
            self._last_u, self._last = u.copy(), value_and_gradient(
                self.unflatten(u), self.X, self.y, self.total, block_rows=self._rows, row_l1_bound=self.row_l1_bound,
                positions=self._positions)
        return self._last

    def value(self, u: np.ndarray) -> float:
        """``f_p`` at the flat vector ``u``."""
        return self._evaluate(u)[0]

    def gradient(self, u: np.ndarray) -> np.ndarray:
        """Flat gradient of ``f_p`` at the flat vector ``u`` (column-major, like ``u``)."""
        return self._evaluate(u)[1].flatten(order="F")  # a copy: the cached array stays intact

    def clipped_sum(self, u: np.ndarray, index: np.ndarray, clip: float) -> np.ndarray:
        """``sum_{i in index} clip(g_i, clip)`` flat (column-major), ``g_i = x_i (softmax(theta^T x_i) - e_{y_i})^T``
        the gradient of sample i's cross-entropy (without the ``1/I``), each rescaled to Frobenius norm at most
        ``clip``: ``||g_i||_F = ||x_i||_2 ||p_i - e_{y_i}||_2``. In float64 whatever the model's ``dtype``."""
        X = np.asarray(self.X_param.value[index], dtype=float)
        P = _softmax(X @ self.unflatten(np.asarray(u, dtype=float)))
        P[np.arange(len(index)), self.y[index]] -= 1.0
        norms = np.linalg.norm(X, axis=1) * np.linalg.norm(P, axis=1)
        scale = np.minimum(1.0, clip / np.maximum(norms, 1e-300))
        return (X.T @ (P * scale[:, None])).flatten(order="F")

    def per_example(self) -> cvxdp.PerExample:
        """The agent's per-example gradients (subsampled mechanisms); add/remove one sample at the public ``I``
        (under "replace" the relation is declared as such and the subsampled mechanisms refuse it)."""
        return cvxdp.PerExample(records=len(self.y), total=self.total, clipped_sum=self.clipped_sum,
                                relation="add_remove" if self.relation == "add_remove" else "replace")

    @property
    def sensitivity(self) -> cvxdp.Sensitivity:
        return multiclass_sensitivity(self.shape[0], self.classes, self.clip, self.total, self.bound,
                                      self.relation)

    def agent(self) -> cvxdp.Agent:
        """The :class:`cvxdp.Agent` (shared key ``"theta"`` = the whole matrix)."""
        # value=: the vectorised numpy objective (same number as CVXPY's, tested) for the per-round metric
        return cvxdp.Agent(self.name, self.objective, self.constraints, shared={"theta": self.theta},
                           gradient=self.gradient, sensitivity=self.sensitivity, value=self.value,
                           per_example=self.per_example(), lipschitz=self.public_lipschitz)


def multiclass_agents(parts: Sequence[tuple[np.ndarray, np.ndarray]], *, classes: int, bound: float,
                      clip: float, names: Sequence[str] | None = None, total: int | None = None,
                      relation: str | None = None, dtype: str = "float64",
                      ) -> tuple[list[cvxdp.Agent], list[MulticlassLogistic]]:
    """Build one agent per ``(X_p, y_p)`` part; rows are clipped to ``||x|| <= clip`` here.

    Parameters
    ----------
    total : int, optional
        The public normaliser ``I`` (the federation's declared sample count). Required for
        ``relation="add_remove"``; without it ``I`` is the parts' own total and the relation is "replace".
    relation : {"add_remove", "replace"}, optional
        Default: "add_remove" when ``total`` is given, else "replace" (see
        :mod:`cvxdp_models.logistic.relation`).
    dtype : {"float64", "float32"}
        Precision of the agents' value and gradient (see :class:`MulticlassLogistic`).

    Returns
    -------
    agents : list of cvxdp.Agent
    models : list of MulticlassLogistic
        The per-agent models (``.value``, ``.gradient``, data), in the same order.
    """
    total, relation = rel.resolve_relation(parts, total, relation, "multiclass_agents")
    names = list(names) if names is not None else [f"agent{p}" for p in range(len(parts))]
    models = [MulticlassLogistic(clip_rows(X, clip), y, classes=classes, total=total, bound=bound, name=nm,
                                 clip=clip, relation=relation, dtype=dtype) for (X, y), nm in zip(parts, names)]
    return [m.agent() for m in models], models
