"""Exact consensus ADMM ("admm"): the non-private baseline with an exact local prox solve (SPEC §2)."""

from __future__ import annotations

from ..schedules import AdaptiveRho
from .base import Algorithm


class ADMM(Algorithm):
    """Exact ADMM: each agent solves ``argmin_{u in W} f(u) - <lambda, E u> + rho/2 ||B w - E u||^2``.

    Parameters
    ----------
    rho : "auto", float or schedule, default "auto"
        Penalty. ``"auto"``: :class:`~cvxdp.schedules.AdaptiveRho` ``(target=0.1, mu=2)`` (residual balancing
        on released residuals, aiming at a primal residual 10x below the dual one, frozen after its
        ``adapt_rounds``). A change of rho sets the local solver up again (same compiled data).
    rounds : int
        Maximum number of rounds.
    tol_primal, tol_dual : float, optional
        Stop when both residuals fall below these.
    """

    name = "admm"
    private_ok = False
    #: rho="auto": the exact prox step tolerates a primal-leaning balance (measured on the power cases,
    #: benchmarks/bench_power.py --acceptance)
    auto_rho = AdaptiveRho(target=0.1, mu=2.0)

    def __init__(self, rho: float | str = "auto", rounds: int = 100, *, tol_primal: float | None = None,
                 tol_dual: float | None = None) -> None:
        super().__init__(rho=rho, rounds=rounds, tol_primal=tol_primal, tol_dual=tol_dual)
