"""Algorithm A: DP linearized ADMM with multiple local updates (Ryu & Kim; SPEC §2), "ladmm"."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...params import check_int
from ...schedules import AdaptiveRho, AutoEta, Schedule, StepSchedule, as_schedule, describe
from .updates import Algorithm

Projector = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, object]]


class LinearizedADMM(Algorithm):
    """Linearized ADMM: J linearized, proximal local updates per round; the average of the J outputs is sent.

    Parameters
    ----------
    rho : "auto", float or schedule, default "auto"
        Penalty rho^t. A float means constant; see :mod:`cvxdp.schedules`. ``"auto"``:
        :class:`~cvxdp.schedules.AdaptiveRho` ``(decrease=False)``: residual balancing on released residuals
        (no privacy cost) that raises rho when the primal residual dominates and never lowers it. The linearized
        step moves ``w`` more than an exact one, which reads as a large dual residual: balancing both ways
        drove rho to 0.1-0.2 on the power template's balance objective and left the copies 3.5-800x further
        apart after 300 rounds (case14 / case118 / case300 zones: consensus residual 0.014 / 0.024 / 0.078
        both ways, 1.8e-5 / 0.0022 / 0.022 upwards only). Rounds to 1e-3 of the cost optimum, both ways ->
        upwards only: case14 in 2 areas 86 -> 114, in 3 zones 132 -> 106, case118 1043 -> 1081, case300
        1127 -> 577, PGLib case14 / case118 / case300 70 / 118 / 469 -> 26 / 146 / 469. Since it only rises,
        with ``eta="auto"`` it starts at ``min(1, max_p L_p)``, the agents' curvature scale
        (:func:`cvxdp.families.consensus.step_sizes.auto_rho_start`; digits in 5 agents: 0.003, 800 rounds to 1e-3 instead of
        never in 1,500 from 1).
    eta : "auto", float or schedule, default "auto"
        Proximal weight eta^t (non-decreasing, bounded). ``"auto"`` (:class:`~cvxdp.schedules.AutoEta`): per
        agent, ``eta_p = L_p``, its curvature bound — in a private run the agent's declared public bound
        ``Agent(lipschitz=...)`` (required), else the smaller of the declared bound and an estimate from the
        data at the start — and
        ``eta_p = 0.55 L_p`` in a non-private run when the objective is quadratic (``eta_p > L_p / 2`` suffices
        for a constant Hessian; :mod:`cvxdp.families.consensus.step_sizes`). In a private run ``eta_p`` then doubles each time the
        agent's released copies move only with the noise (:mod:`cvxdp.families.consensus.noise_eta`; released values and public
        noise scales only; ``AutoEta(noise_growth=1.0)`` keeps it fixed).
    local_updates : int
        J >= 1 local updates per round.
    rounds : int
        Maximum number of rounds T.
    tol_primal, tol_dual : float, optional
        Stop when both the primal (consensus) and dual residuals fall below these.
    tol_mismatch : float, optional
        Stop when the copies' mismatch (the history's ``mismatch`` column: how far the agents' released copies
        of each shared value disagree) falls below it. PowerModelsADA's ADMM stops when half of it falls below
        its ``tol`` (``tol_mismatch = 2 * tol`` is the same rule). It reads released values only.
    """

    name = "ladmm"
    private_ok = True
    #: rho="auto": residual balancing that only raises rho (see the ``rho`` parameter)
    auto_rho = AdaptiveRho(decrease=False)

    def __init__(self, rho: float | str | Schedule = "auto", eta: float | str | Schedule = "auto", local_updates: int = 1,
                 rounds: int = 100, *, tol_primal: float | None = None, tol_dual: float | None = None,
                 tol_mismatch: float | None = None) -> None:
        super().__init__(rho=rho, rounds=rounds, tol_primal=tol_primal, tol_dual=tol_dual, tol_mismatch=tol_mismatch)
        self.eta = eta
        self._local_updates = local_updates

    @property
    def local_updates(self) -> int:
        return self._local_updates

    def validate(self) -> None:
        super().validate()
        self.eta_schedule = as_schedule(self.eta, "eta", "LinearizedADMM")
        check_int(self._local_updates, "local_updates", "LinearizedADMM", 1)

    def describe(self) -> dict:
        return {**super().describe(), "eta": describe(self.eta_schedule), "local_updates": self._local_updates}

    def eta_at(self, t: int) -> float:
        return self.eta_schedule(t)

    @property
    def auto_eta(self) -> AutoEta | None:
        """The :class:`~cvxdp.schedules.AutoEta` marker when eta is chosen per agent, else None."""
        sched = getattr(self, "eta_schedule", None) or as_schedule(self.eta, "eta", "LinearizedADMM")
        return sched if isinstance(sched, AutoEta) else None

    def bind_epsilon(self, epsilon: float | None) -> None:
        """Give a :class:`~cvxdp.schedules.StepSchedule` declared without epsilon the run's epsilon.

        Non-private runs use epsilon = inf (the ``c2/eps`` term vanishes).
        """
        for name in ("rho_schedule", "eta_schedule"):
            sched = getattr(self, name)
            if isinstance(sched, StepSchedule) and sched.epsilon is None:
                setattr(self, name, replace(sched, epsilon=float(epsilon) if epsilon else math.inf))

    def __repr__(self) -> str:
        return (f"LinearizedADMM(rho={self.rho!r}, eta={self.eta!r}, local_updates={self._local_updates!r}, "
                f"rounds={self.rounds!r}" + ("" if self.tol_mismatch is None else f", tol_mismatch={self.tol_mismatch!r}")
                + ")")


def linearized_updates(u: np.ndarray, *, grad: Callable[[np.ndarray], np.ndarray], project: Projector,
                       sidx: np.ndarray, bw: np.ndarray, lam: np.ndarray, rho: float, eta: float, J: int,
                       perturb: Callable[[np.ndarray], np.ndarray] | None, placement: str | None,
                       grad_point: Projector | None = None,
                       ) -> tuple[np.ndarray, list[float], list[object]]:
    """Run J local updates from ``u`` (SPEC §2 step 2) and return the average output and the noise norms.

    ``u^j = Proj_{W, c}(v)``, ``v = (eta u^{j-1} + rho E^T B w + E^T lambda - (g^{j-1} + xi^j)) / c``,
    ``c = eta + rho*[shared]``. ``perturb(value)`` returns ``value + xi`` (the mechanism's noise); under
    objective perturbation it perturbs the gradient, under output perturbation the projected point.
    ``grad_point(u, c)`` (private runs, same signature as ``project``) maps ``u`` into ``W`` before the gradient is taken, so the declared
    gradient sensitivity (a supremum over ``u in W``) holds where the gradient is evaluated even when ``u``
    is a noisy output outside ``W`` (OutPert); the proximal term still uses ``u`` itself.
    """
    n = u.size
    c = np.full(n, eta)
    c[sidx] += rho
    anchor = np.zeros(n)
    anchor[sidx] = rho * bw + lam
    total = np.zeros(n)
    norms: list[float] = []
    reports: list[object] = []
    for _ in range(J):
        g = grad(u if grad_point is None else grad_point(u, c)[0])
        if perturb is not None and placement == "objective":
            noisy = perturb(g)
            norms.append(float(np.linalg.norm(noisy - g)))
            g = noisy
        u, report = project((eta * u + anchor - g) / c, c)
        if perturb is not None and placement == "output":
            noisy = perturb(u)
            norms.append(float(np.linalg.norm(noisy - u)))
            u = noisy
        reports.append(report)
        total += u
    return total / J, norms, reports
