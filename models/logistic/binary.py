"""Binary l2-regularised logistic ERM over agents (the ERM of papers 000/001/004).

Pooled objective over ``N`` samples with labels ``y in {-1, +1}`` and rows ``||x_i|| <= C`` (``C = 1`` after
the papers' row normalisation):

    O(f) = (1/N) sum_i log(1 + exp(-y_i f^T x_i)) + (reg/2) ||f||^2

Agent p holds ``I_p`` and gets ``f_p(f) = (1/N) sum_{i in I_p} log(1 + exp(-y_i f^T x_i)) + (reg/(2P)) ||f||^2``,
so ``sum_p f_p = O`` for any split. ``N`` and ``P`` are public constants, so under add/remove one sample only
the loss term changes: the per-sample gradient is ``-y x sigma(-y f^T x)`` with ``|sigma| <= s_max <= 1``, hence
``Delta_2 <= s_max C / N`` and ``Delta_1 <= s_max sqrt(d) C / N``; with a box ``|f_j| <= bound``,
``s_max = sigma(bound sqrt(d) C)`` (else 1; the engine evaluates the gradient in ``W``). Optional box
``W = {|f_j| <= bound}``. ``N`` must be fixed across neighbours: public under add/remove one, or the data's
own count under replace one, which doubles the bounds (:mod:`cvxdp_models.logistic.relation`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cvxpy as cp
import numpy as np
from scipy.special import expit

import cvxdp

from . import relation as rel
from .data import clip_rows

__all__ = ["BinaryLogistic", "binary_agents", "binary_cost", "binary_sensitivity"]



def binary_cost(f: np.ndarray, X: np.ndarray, y: np.ndarray, total: int, reg: float, reg_weight: float = 1.0) -> float:
    """``(1/total) sum log(1 + exp(-y f^T x)) + reg_weight * reg/2 ||f||^2``."""
    margins = y * (X @ f)
    return float(np.logaddexp(0.0, -margins).sum() / total + 0.5 * reg * reg_weight * (f @ f))


def binary_sensitivity(features: int, clip: float, total: int, bound: float | None = None,
                       relation: str = "add_remove") -> cvxdp.Sensitivity:
    """Gradient sensitivity of the binary ERM with ``||x||_2 <= clip`` and ``N = total`` fixed across
    neighbours: ``k s_max C / N`` (l2), ``k s_max sqrt(d) C / N`` (l1), k = 1 add/remove, 2 replace."""
    s_max = float(expit(bound * math.sqrt(features) * clip)) if bound is not None else 1.0
    k = rel.factor(relation)
    return cvxdp.Sensitivity(l1=k * s_max * math.sqrt(features) * clip / total, l2=k * s_max * clip / total,
                             relation=rel.describe(relation, total))


class BinaryLogistic:
    """One agent's binary logistic ERM: CVXPY declaration plus numpy value and gradient.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Local features with ``||x_i|| <= clip``.
    y : ndarray, shape (n,)
        Labels in {-1, +1}.
    total : int
        Global sample count ``N``.
    reg : float
        Regularisation ``reg`` of the pooled objective.
    reg_weight : float
        This agent's share of the regulariser (``1/P`` so that the shares sum to one).
    bound : float or None
        Box half-width; ``None`` declares no constraint.
    name : str
    clip : float
    relation : {"add_remove", "replace"}
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, *, total: int, reg: float, reg_weight: float,
                 bound: float | None, name: str, clip: float, relation: str = "add_remove") -> None:
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y = np.asarray(y, dtype=float)
        if self.X.ndim != 2 or len(self.X) != len(self.y) or len(self.y) == 0:
            raise ValueError(f"Agent {name!r}: X must be (n, d) with n = len(y) > 0; got X {self.X.shape}, "
                             f"y {self.y.shape}.")
        if not np.all(np.isin(self.y, (-1.0, 1.0))):
            raise ValueError(f"Agent {name!r}: binary labels must be -1 or +1.")
        self.total, self.reg, self.reg_weight, self.bound = int(total), float(reg), float(reg_weight), bound
        self.name, self.clip, self.relation = name, clip, relation
        n, d = self.X.shape
        self.shape = (d,)
        self.A = self.y[:, None] * self.X  # rows y_i x_i
        self.f = cp.Variable(d, name="theta")
        self.A_param = cp.Parameter((n, d), value=self.A, name=f"YX_{name}")
        self.objective = (cp.sum(cp.logistic(-(self.A_param @ self.f))) / self.total
                          + 0.5 * self.reg * self.reg_weight * cp.sum_squares(self.f))
        self.constraints = [] if bound is None else [self.f <= bound, self.f >= -bound]

    @classmethod
    def pooled(cls, models: Sequence[BinaryLogistic], name: str = "central") -> BinaryLogistic:
        """One model over the union of the agents' data, with the whole regulariser (value ``sum_p f_p``)."""
        m0 = models[0]
        return cls(np.vstack([m.X for m in models]), np.concatenate([m.y for m in models]), total=m0.total,
                   reg=m0.reg, reg_weight=sum(m.reg_weight for m in models), bound=m0.bound, name=name,
                   clip=m0.clip, relation=m0.relation)

    def constant_problem(self) -> tuple[cp.Problem, cp.Variable]:
        """``min f s.t. W`` with the data as constants, and its variable."""
        f = cp.Variable(self.shape, name="theta")
        obj = cp.sum(cp.logistic(-(self.A @ f))) / self.total + 0.5 * self.reg * self.reg_weight * cp.sum_squares(f)
        cons = [] if self.bound is None else [f <= self.bound, f >= -self.bound]
        return cp.Problem(cp.Minimize(obj), cons), f

    @property
    def box(self) -> tuple[float, float]:
        """``(lo, hi)`` of the box (infinite without one)."""
        return (-np.inf, np.inf) if self.bound is None else (-self.bound, self.bound)

    @property
    def lipschitz(self) -> float:
        """``||X||_2^2 / (4 N) + reg_weight * reg`` (logistic'' <= 1/4)."""
        return float(np.linalg.norm(self.X, 2) ** 2 / (4.0 * self.total) + self.reg * self.reg_weight)

    def predict(self, u: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Labels in {-1, +1} (``sign(x^T f)``, ties -> +1)."""
        return np.where(X @ u >= 0, 1, -1)

    def value(self, u: np.ndarray) -> float:
        """``f_p`` at ``u``."""
        return binary_cost(u, self.X, self.y, self.total, self.reg, self.reg_weight)

    def gradient(self, u: np.ndarray) -> np.ndarray:
        """``-(1/N) A^T sigma(-A u) + reg_weight * reg * u``."""
        return -(self.A.T @ expit(-(self.A @ u))) / self.total + self.regularizer_gradient(u)

    def clipped_sum(self, u: np.ndarray, index: np.ndarray, clip: float) -> np.ndarray:
        """``sum_{i in index} clip(g_i, clip)`` with ``g_i = -a_i sigma(-a_i^T u)`` (``a_i = y_i x_i``) the gradient of
        sample i's logistic loss (without the ``1/N``), each rescaled to l2 norm at most ``clip``:
        ``||g_i|| = ||x_i|| sigma(-a_i^T u)``."""
        A = self.A[index]
        s = expit(-(A @ np.asarray(u, dtype=float)))
        norms = np.linalg.norm(A, axis=1) * s
        return -(A.T @ (s * np.minimum(1.0, clip / np.maximum(norms, 1e-300))))

    def regularizer_gradient(self, u: np.ndarray) -> np.ndarray:
        """``reg_weight * reg * u``: the gradient of this agent's share of the regulariser (reads no record)."""
        return self.reg * self.reg_weight * np.asarray(u, dtype=float)

    def per_example(self) -> cvxdp.PerExample:
        """The agent's per-example gradients (subsampled mechanisms): the logistic losses, add/remove one sample at
        the public ``N``, and the regulariser as the public part (under "replace" the relation is declared as such
        and the subsampled mechanisms refuse it)."""
        return cvxdp.PerExample(records=len(self.y), total=self.total, clipped_sum=self.clipped_sum,
                                relation="add_remove" if self.relation == "add_remove" else "replace",
                                public_gradient=self.regularizer_gradient)

    @property
    def sensitivity(self) -> cvxdp.Sensitivity:
        return binary_sensitivity(self.shape[0], self.clip, self.total, self.bound, self.relation)

    def agent(self) -> cvxdp.Agent:
        """The :class:`cvxdp.Agent` (shared key ``"theta"``)."""
        return cvxdp.Agent(self.name, self.objective, self.constraints, shared={"theta": self.f},
                           gradient=self.gradient, sensitivity=self.sensitivity, value=self.value,
                           per_example=self.per_example())


def binary_agents(parts: Sequence[tuple[np.ndarray, np.ndarray]], *, reg: float, clip: float = 1.0,
                  bound: float | None = None, names: Sequence[str] | None = None,
                  total: int | None = None, relation: str | None = None,
                  ) -> tuple[list[cvxdp.Agent], list[BinaryLogistic]]:
    """One agent per ``(X_p, y_p)`` part (rows clipped to ``clip``; regulariser split evenly).

    ``total`` is the public ``N`` (required for ``relation="add_remove"``); without it ``N`` is the parts'
    own total and the relation is "replace" (see :mod:`cvxdp_models.logistic.relation`).
    """
    total, relation = rel.resolve_relation(parts, total, relation, "binary_agents")
    names = list(names) if names is not None else [f"agent{p}" for p in range(len(parts))]
    models = [BinaryLogistic(clip_rows(X, clip), y, total=total, reg=reg, reg_weight=1.0 / len(parts),
                             bound=bound, name=nm, clip=clip, relation=relation)
              for (X, y), nm in zip(parts, names)]
    return [m.agent() for m in models], models
