"""The consensus family's update math over arrays (SPEC §2): the global, dual and linearized local updates."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def whole_range(idx: np.ndarray, size: int) -> bool:
    """Whether ``idx`` is ``0, 1, ..., size - 1`` in order (every coordinate, each once): then ``x[idx]`` and a
    scatter over ``idx`` are plain whole-array operations with the same numbers and no gather."""
    # size strictly increasing integers from 0 to size - 1 are exactly 0, 1, ..., size - 1
    return bool(idx.size == size and (size == 0 or (idx[0] == 0 and idx[-1] == size - 1
                                                    and np.all(idx[1:] > idx[:-1]))))


def selectors(gidx: Sequence[np.ndarray], size: int) -> list[np.ndarray | slice]:
    """Each agent's global indices, as ``slice(None)`` when it holds every coordinate in order
    (:func:`whole_range`): decided once per run, then read by :func:`global_update` every round."""
    return [slice(None) if whole_range(idx, size) else idx for idx in gidx]


def take(values: np.ndarray, sel: np.ndarray | slice) -> np.ndarray:
    """``values[sel]`` as a new array: a copy for ``slice(None)`` (:func:`selectors`), a gather otherwise."""
    return values.copy() if isinstance(sel, slice) else values[sel]


def norm(x: np.ndarray) -> float:
    """``||x||_2`` as :func:`numpy.linalg.norm` computes it (``sqrt(x . x)``: the same number), without its
    per-call overhead (it matters for many small agents)."""
    return math.sqrt(float(x @ x))


def holders(gidx: Sequence[np.ndarray | slice], size: int) -> float | np.ndarray:
    """How many agents hold each global coordinate: the number of agents (a float) when every agent's indices are
    ``slice(None)`` (:func:`selectors`), else one count per coordinate. Either divides a coordinate's sum with the
    same quotient (``x / n``, ``n`` the same float), so a run decides once and skips a count array per round."""
    if all(isinstance(idx, slice) for idx in gidx):
        return float(len(gidx))
    count = np.zeros(size)
    for idx in gidx:
        if isinstance(idx, slice):
            count += 1.0
        else:
            np.add.at(count, idx, 1.0)
    return count


def global_update(shared: Sequence[np.ndarray], duals: Sequence[np.ndarray], gidx: Sequence[np.ndarray | slice],
                  size: int, rho: float | np.ndarray, count: float | np.ndarray | None = None) -> np.ndarray:
    """``w_k = mean over holders p of ((E_p z_p)_k - lambda_{p,k}/rho_k)`` for every global coordinate k
    (``rho``: a scalar, or one value per global coordinate). An agent whose indices are ``slice(None)``
    (:func:`selectors`: every coordinate in order) adds its terms with one whole-array addition (the same sums,
    in the same agent order, as the scatter). ``count``: :func:`holders` of ``gidx`` (computed here when None)."""
    total = np.zeros(size)
    term = np.empty(size)  # each agent's ez - lambda / rho, operation by operation, in one reused array
    per_coordinate = np.ndim(rho) > 0
    for ez, lam, idx in zip(shared, duals, gidx):
        if isinstance(idx, slice):
            np.divide(lam, rho, out=term)
            np.subtract(ez, term, out=term)
            total += term
            continue
        np.add.at(total, idx, ez - lam / (rho[idx] if per_coordinate else rho))
    count = holders(gidx, size) if count is None else count
    total /= np.maximum(count, 1.0)  # in place: the same quotients
    return total


def smallest_weight(eta: float, rho: float, has_local: bool) -> float:
    """``min(c)`` with ``c = eta + rho [coordinate shared]``: ``eta`` when the agent has a local-only coordinate,
    else ``eta + rho`` (the smallest weight of the linearized step's projection; its sensitivity divides by it)."""
    return eta if has_local else eta + rho


def dual_update(lam: np.ndarray, rho: float, bw: np.ndarray, ez: np.ndarray) -> np.ndarray:
    """``lambda_p + rho (B_p w - E_p z_p)`` (server and agents run it identically; computed in one new array with
    the same operations, so the same numbers)."""
    out = np.subtract(bw, ez)
    out *= rho  # rho (bw - ez): products and sums commute exactly in floating point
    out += lam
    return out


Projector = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, object]]


class StepWork:
    """One node's work arrays for :func:`linearized_updates`, kept from round to round: the weights ``c`` (built
    again only when eta, rho or the size change; never written after it is built, so a projection may keep it),
    the anchor ``rho B w + lambda`` and the proximal point ``v``. The arrays never leave the step: what it returns
    is always a new array."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._c: np.ndarray | None = None
        self._arrays: dict[str, np.ndarray] = {}

    def weights(self, n: int, eta: float, rho: float | np.ndarray, sel: np.ndarray | slice) -> np.ndarray:
        """``c = eta + rho [coordinate shared]`` (a new array when eta, rho or the selection changed)."""
        key = None if isinstance(rho, np.ndarray) and rho.ndim else (n, eta, rho, id(sel))
        if key is None or key != self._key or self._c is None:
            c = np.full(n, eta)
            c[sel] += rho
            self._key, self._c = key, c
        return self._c

    def array(self, name: str, n: int) -> np.ndarray:
        """A work array of length ``n`` (its values are whatever the last step left)."""
        out = self._arrays.get(name)
        if out is None or out.size != n:
            out = self._arrays[name] = np.empty(n)
        return out


def linearized_updates(u: np.ndarray, *, grad: Callable[[np.ndarray], np.ndarray], project: Projector,
                       sidx: np.ndarray | slice, bw: np.ndarray, lam: np.ndarray, rho: float, eta: float, J: int,
                       perturb: Callable[[np.ndarray], np.ndarray] | None, placement: str | None,
                       grad_point: Projector | None = None, work: StepWork | None = None,
                       ) -> tuple[np.ndarray, list[float], list[object]]:
    """Run J local updates from ``u`` (SPEC §2 step 2) and return the average output and the noise norms.

    ``u^j = Proj_{W, c}(v)``, ``v = (eta u^{j-1} + rho E^T B w + E^T lambda - (g^{j-1} + xi^j)) / c``,
    ``c = eta + rho*[shared]``. ``perturb(value)`` returns ``value + xi`` (the mechanism's noise); under
    objective perturbation it perturbs the gradient, under output perturbation the projected point.
    ``grad_point(u, c)`` (private runs, same signature as ``project``) maps ``u`` into ``W`` before the gradient is taken, so the declared
    gradient sensitivity (a supremum over ``u in W``) holds where the gradient is evaluated even when ``u``
    is a noisy output outside ``W`` (OutPert); the proximal term still uses ``u`` itself.
    ``work`` (the node's :class:`StepWork`) keeps ``c`` while eta and rho stay and reuses the anchor's and
    ``v``'s arrays: the same operations in the same order, so the same numbers, with fewer passes and no
    allocation.
    """
    n = u.size
    sel = sidx  # ``slice(None)`` when every coordinate is shared (the node decides once: no gather or scatter)
    if work is None:
        c = np.full(n, eta)
        c[sel] += rho
    else:
        c = work.weights(n, eta, rho, sel)
    if isinstance(sel, slice):  # rho B w + lambda in one array (a product and a sum commute exactly)
        anchor = np.multiply(bw, rho, dtype=float, out=None if work is None else work.array("anchor", n))
        anchor += lam
    else:
        anchor = np.zeros(n)
        anchor[sel] = rho * bw + lam
    total = np.zeros(n) if J > 1 else None
    norms: list[float] = []
    reports: list[object] = []
    for _ in range(J):
        g = grad(u if grad_point is None else grad_point(u, c)[0])
        if perturb is not None and placement == "objective":
            noisy = perturb(g)
            norms.append(norm(noisy - g))
            g = noisy
        # (eta u + anchor - g) / c, operation by operation in one array
        v = np.multiply(u, eta, out=None if work is None else work.array("v", n))
        v += anchor
        v -= g
        v /= c
        u, report = project(v, c)
        if perturb is not None and placement == "output":
            noisy = perturb(u)
            norms.append(norm(noisy - u))
            u = noisy
        reports.append(report)
        if total is not None:
            total += u
    if total is None:  # J = 1: 0 + u, then / 1 (exact), as one new array: the same numbers, signed zeros too
        return np.add(u, 0.0), norms, reports
    total /= J  # in place: the same quotients, one large temporary fewer
    return total, norms, reports
