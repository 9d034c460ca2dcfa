"""Exact consensus ADMM ("admm"): the non-private baseline with an exact local prox solve (SPEC §2)."""

from __future__ import annotations

from .base import Algorithm


class ADMM(Algorithm):
    """Exact ADMM: each agent solves ``argmin_{u in W} f(u) - <lambda, E u> + rho/2 ||B w - E u||^2``.

    Parameters
    ----------
    rho : float or schedule
        Penalty. A change of rho recompiles the local problem once per new value.
    rounds : int
        Maximum number of rounds.
    tol_primal, tol_dual : float, optional
        Stop when both residuals fall below these.
    """

    name = "admm"
    private_ok = False

    def __init__(self, rho: float = 1.0, rounds: int = 100, *, tol_primal: float | None = None,
                 tol_dual: float | None = None) -> None:
        super().__init__(rho=rho, rounds=rounds, tol_primal=tol_primal, tol_dual=tol_dual)
