"""An agent's curvature bound ``L_p`` for the proximal weight eta: declared, or measured where the data are.

This runs at the party (its node reads its own data): :func:`lipschitz_constants` returns the declared public bound
(``Agent(..., lipschitz=L)``) in a private run -- nothing computed from private data may steer a private run -- and,
in a non-private run, the smaller of that bound and an estimate by power iteration on gradient differences
(:func:`estimate_lipschitz`; exact for quadratic objectives, the local curvature at the starting point otherwise).
:func:`has_constant_hessian` reads the CVXPY expression's structure (not the data) to tell a quadratic objective.
The coordinator turns the bounds into eta (:mod:`cvxdp.families.consensus.step_sizes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..errors import DeclarationError


class Curvature(NamedTuple):
    """An agent's curvature bound for eta: ``value`` (``L_p``, None if unknown), where it came from
    (``"declared"``, ``"estimated"`` or ``"unknown"``) and whether the objective is quadratic."""

    value: float | None
    source: str
    quadratic: bool = False

    @property
    def needed(self) -> float | None:
        """The smallest eta the convergence theory covers: ``L_p / 2`` (exclusive) for a quadratic objective,
        ``L_p`` otherwise."""
        if self.value is None or not math.isfinite(self.value):
            return None
        return self.value / 2 if self.quadratic else self.value

    def covers(self, eta: float) -> bool | None:
        """Whether ``eta`` meets :attr:`needed` (strictly above ``L_p / 2`` for a quadratic objective, at least
        ``L_p`` otherwise); None when ``L_p`` is unknown."""
        needed = self.needed
        if needed is None:
            return None
        return eta > needed * (1 + 1e-9) if self.quadratic else eta >= needed * (1 - 1e-9)


#: CVXPY atoms of degree two with a constant Hessian when their arguments are affine (and the second argument of
#: quad_over_lin / quad_form is constant); power only with p = 2
_QUADRATIC_ATOMS = ("quad_over_lin", "QuadForm")
_POWER_ATOMS = ("Power", "PowerApprox")


def has_constant_hessian(expr) -> bool:
    """Whether a CVXPY expression is a polynomial of degree at most two in its variables (its Hessian does not
    depend on the point): affine atoms over such expressions, and ``sum_squares``/``square``/``power(., 2)``/
    ``quad_form``/``quad_over_lin`` with a constant denominator over affine arguments.

    Structural: it reads the expression tree, not the parameters' values. CVXPY's own ``is_quadratic()`` also
    accepts piecewise atoms such as ``huber``, whose curvature vanishes where they are linear, so it is not used.
    """
    from cvxpy.atoms.affine.affine_atom import AffAtom
    from cvxpy.expressions.leaf import Leaf

    def degree2(e) -> bool:
        if isinstance(e, Leaf) or e.is_constant():
            return True
        if isinstance(e, AffAtom):  # a sum, a scaling, an index, ... of degree-2 terms
            return all(degree2(a) for a in e.args)
        name = type(e).__name__
        if name in _POWER_ATOMS:
            p = getattr(e, "p", None)
            p = getattr(p, "value", p)
            return p is not None and float(p) in (1.0, 2.0) and e.args[0].is_affine()
        return name in _QUADRATIC_ATOMS and e.args[0].is_affine() and all(a.is_constant() for a in e.args[1:])

    try:
        return bool(expr.is_convex()) and degree2(expr)
    except Exception:  # an expression CVXPY cannot classify: treat it as general (the safe side)
        return False


def estimate_lipschitz(grad: Callable[[np.ndarray], np.ndarray], u0: np.ndarray, *, iterations: int = 50,
                       rtol: float = 1e-6) -> float:
    """Largest curvature of ``grad`` at ``u0`` by power iteration on gradient differences.

    ``d -> (grad(u0 + h d) - grad(u0)) / h`` is the Hessian-vector product for a quadratic objective (exact for
    any ``h``) and its finite-difference approximation otherwise. The start direction is fixed (deterministic).
    Returns a non-negative float (``inf`` when the differences are not finite).
    """
    u0 = np.asarray(u0, dtype=float)
    n = u0.size
    if n == 0:
        return 0.0
    g0 = np.asarray(grad(u0), dtype=float)
    h = 1e-4 * (1.0 + float(np.linalg.norm(u0)) / math.sqrt(n))
    d = 1.0 + 0.5 * np.cos(np.arange(n) * 1.7)  # fixed, non-degenerate start direction
    d /= np.linalg.norm(d)
    est = 0.0
    for _ in range(iterations):
        hd = (np.asarray(grad(u0 + h * d), dtype=float) - g0) / h
        if not np.all(np.isfinite(hd)):
            return math.inf
        norm = float(np.linalg.norm(hd))
        if norm == 0.0:
            return 0.0
        converged = abs(norm - est) <= rtol * norm
        est, d = norm, hd / norm
        if converged:
            break
    return est


def declared_lipschitz(agent) -> float | None:
    """The agent's declared public bound (``Agent(lipschitz=...)``), or None."""
    value = getattr(agent, "lipschitz", None)
    return None if value is None else float(value)


def lipschitz_constants(agents: Sequence, starts: Sequence[np.ndarray], *, private: bool,
                        need: bool = True, prefer_declared: bool = False,
                        estimate: bool = True) -> list[Curvature]:
    """A :class:`Curvature` per agent: ``L_p``, its source (``"declared"``, ``"estimated"`` or ``"unknown"``) and
    whether the objective is quadratic (:func:`has_constant_hessian`, structural).

    ``private=True`` uses declared bounds only; with ``need=True`` a missing one raises a
    :class:`~cvxdp.errors.DeclarationError` naming the agent and what to do. A non-private run estimates ``L_p``
    at ``starts`` (:func:`estimate_lipschitz`) and takes the smaller of the estimate and a declared bound (the
    source says which one was used): the declared bound is a worst case over neighbouring data sets, the
    estimate this data's curvature. ``prefer_declared=True`` (an explicit eta, which is only checked against
    ``L_p``) takes a declared bound as it is and estimates only for agents that declare none; ``estimate=False``
    never estimates (an undeclared bound is ``"unknown"``).
    """
    out: list[Curvature] = []
    for agent, u0 in zip(agents, starts):
        declared = declared_lipschitz(agent)
        quadratic = has_constant_hessian(agent.objective)
        if private:
            if declared is not None:
                out.append(Curvature(declared, "declared", quadratic))
                continue
            if need:
                raise DeclarationError(
                    f"Agent {agent.name!r}: a private run with LinearizedADMM(eta='auto') needs a public bound on "
                    "the Lipschitz constant of the objective's gradient: declare Agent(..., lipschitz=L) (a value "
                    "that holds for every neighbouring data set), or give eta explicitly (e.g. eta=10.0). It is "
                    "not estimated from the data, since that would steer a private run with unaccounted "
                    "information.")
            out.append(Curvature(None, "unknown", quadratic))
            continue
        if prefer_declared and declared is not None:
            out.append(Curvature(declared, "declared", quadratic))
            continue
        if not estimate:
            out.append(Curvature(declared, "declared", quadratic) if declared is not None
                       else Curvature(None, "unknown", quadratic))
            continue
        try:
            estimate = estimate_lipschitz(lambda u, a=agent: a.grad(u), u0)
        except DeclarationError as exc:  # a non-finite gradient: say when it happened
            raise DeclarationError(f"{exc} This happened while estimating the Lipschitz constant of its gradient "
                                   "for eta, before round 1 (give eta explicitly and declare Agent(lipschitz=...) "
                                   "to skip the estimate).") from None
        if declared is not None and declared <= estimate:
            out.append(Curvature(declared, "declared", quadratic))
        else:
            out.append(Curvature(estimate, "estimated", quadratic))
    return out


__all__ = ["Curvature", "declared_lipschitz", "estimate_lipschitz", "has_constant_hessian", "lipschitz_constants"]
