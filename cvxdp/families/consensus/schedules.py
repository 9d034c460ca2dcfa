"""Schedules for the penalty rho^t and the proximal weight eta^t (SPEC §2).

Every schedule is non-decreasing and bounded; ``value(t)`` is its value in round ``t`` (t = 1, 2, ...).
:class:`ResidualBalancing` (rho only) adapts to the residuals of the previous round (Boyd et al. §3.4.1);
it reads only communicated, already randomized values and so costs no privacy.

The defaults (``"auto"``) of :class:`~cvxdp.LinearizedADMM` and :class:`~cvxdp.ADMM`:

* ``rho="auto"`` is :class:`AdaptiveRho` — residual balancing both ways with an OSQP-style rescale
  ``rho *= sqrt(primal / dual)``, frozen after ``adapt_rounds`` (so rho is eventually constant, as the
  convergence analysis needs); it too reads only the aggregator's residuals (released values).
* ``eta="auto"`` is :class:`AutoEta` — a marker resolved per agent inside :func:`cvxdp.solve` from each
  agent's gradient Lipschitz constant (see :mod:`cvxdp.families.consensus.step_sizes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ...errors import check_float, check_int, fail


@dataclass(frozen=True)
class Constant:
    """``value`` in every round."""

    value: float

    def __post_init__(self) -> None:
        check_float(self.value, "value", "Constant", 0.0, math.inf)

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        return float(self.value)


@dataclass(frozen=True)
class LinearCapped:
    """``min(start + step*(t-1), cap)``."""

    start: float
    step: float
    cap: float

    def __post_init__(self) -> None:
        check_float(self.start, "start", "LinearCapped", 0.0, math.inf)
        check_float(self.step, "step", "LinearCapped", 0.0, math.inf, closed="left")
        check_float(self.cap, "cap", "LinearCapped", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        return float(min(self.start + self.step * (t - 1), self.cap))


@dataclass(frozen=True)
class GeometricCapped:
    """``min(start * factor**(t-1), cap)`` with ``factor >= 1``."""

    start: float
    factor: float
    cap: float

    def __post_init__(self) -> None:
        check_float(self.start, "start", "GeometricCapped", 0.0, math.inf)
        check_float(self.factor, "factor", "GeometricCapped", 1.0, math.inf, closed="left")
        check_float(self.cap, "cap", "GeometricCapped", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        return float(min(self.start * self.factor ** (t - 1), self.cap))


@dataclass(frozen=True)
class StepSchedule:
    """The authors' schedule ``c1 * 1.2**floor(t / period) + c2 / epsilon``, capped at ``cap``.

    With ``epsilon=None`` the run's epsilon is used (``cvxdp.solve`` fills it in from the mechanism).
    """

    c1: float
    c2: float
    period: int
    epsilon: float | None = None
    cap: float = math.inf

    def __post_init__(self) -> None:
        check_float(self.c1, "c1", "StepSchedule", 0.0, math.inf)
        check_float(self.c2, "c2", "StepSchedule", 0.0, math.inf, closed="left")
        check_int(self.period, "period", "StepSchedule", 1)
        if self.epsilon is not None:
            check_float(self.epsilon, "epsilon", "StepSchedule", 0.0, math.inf, closed="right")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        if self.epsilon is None:
            raise ValueError("StepSchedule(epsilon=None) is only usable inside cvxdp.solve, which supplies epsilon.")
        return float(min(self.c1 * 1.2 ** math.floor(t / self.period) + self.c2 / self.epsilon, self.cap))


@dataclass(frozen=True)
class ResidualBalancing:
    """Boyd et al. §3.4.1 for rho, made non-decreasing: multiply by ``tau`` when ``primal > mu*dual``.

    Starts at ``start``; never exceeds ``cap`` (bounded, as the convergence analysis needs).
    """

    start: float
    mu: float = 10.0
    tau: float = 2.0
    cap: float = 1e4

    def __post_init__(self) -> None:
        check_float(self.start, "start", "ResidualBalancing", 0.0, math.inf)
        check_float(self.mu, "mu", "ResidualBalancing", 1.0, math.inf)
        check_float(self.tau, "tau", "ResidualBalancing", 1.0, math.inf)
        check_float(self.cap, "cap", "ResidualBalancing", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        if previous is None:
            return float(self.start)
        if primal > self.mu * dual:
            return float(min(previous * self.tau, self.cap))
        return float(previous)


@dataclass(frozen=True)
class AdaptiveRho:
    """rho adapted to the residuals of the previous round, both ways (the default ``rho="auto"``).

    From round 2 on, while ``t <= adapt_rounds``: when ``primal / dual`` leaves ``[1/mu, mu]``, rho is
    multiplied by ``sqrt(primal / dual)`` clipped to ``[1/max_step, max_step]`` (OSQP's rescale; Boyd et al.
    §3.4.1 balance), and kept in ``[lo, hi]``. Afterwards rho stays constant. ``primal`` is the l2 norm of
    the consensus mismatch and ``dual = rho ||w - w_prev||`` (both in the units of the shared values), both
    computed by the aggregator from released values: adapting costs no privacy. The dual ``lambda`` is kept
    unscaled, so a change of rho needs no rescaling of it.
    """

    start: float = 1.0
    mu: float = 3.0
    max_step: float = 10.0
    adapt_rounds: int = 60
    lo: float = 1e-4
    hi: float = 1e6
    target: float = 1.0
    relative: bool = True
    decrease: bool = True

    def __post_init__(self) -> None:
        check_float(self.start, "start", "AdaptiveRho", 0.0, math.inf)
        check_float(self.mu, "mu", "AdaptiveRho", 1.0, math.inf, closed="left")
        check_float(self.max_step, "max_step", "AdaptiveRho", 1.0, math.inf, closed="left")
        check_int(self.adapt_rounds, "adapt_rounds", "AdaptiveRho", 1)
        check_float(self.lo, "lo", "AdaptiveRho", 0.0, self.start, closed="right")
        check_float(self.hi, "hi", "AdaptiveRho", self.start, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        if previous is None:
            return float(self.start)
        if t > self.adapt_rounds or not (math.isfinite(primal) and math.isfinite(dual)) or primal <= 0 or dual <= 0:
            return float(previous)
        ratio = primal / dual / self.target
        if 1.0 / self.mu <= ratio <= self.mu:
            return float(previous)
        step = min(max(math.sqrt(ratio), 1.0 / self.max_step), self.max_step)
        if step < 1.0 and not self.decrease:
            return float(previous)
        return float(min(max(previous * step, self.lo), self.hi))


@dataclass(frozen=True)
class BlockBalance:
    """Residual balancing per block of shared coordinates (exact ADMM's ``rho="auto"`` with declared weights).

    A block is the set of coordinates that share one declared weight (``Agent(rho_scale=...)``, e.g. the
    voltage products vs the line flows of the power template). While ``t <= adapt_rounds``, each block's
    weight is multiplied by ``sqrt(ratio)`` (clipped to ``[1/max_step, max_step]``) when its relative primal /
    dual residual ratio over ``target`` leaves ``[1/mu, mu]`` — :class:`AdaptiveRho`'s rule, one block at a
    time. Each weight stays within ``[declared / span, declared * span]``: the declared public weights set the
    scale, the balance adjusts it within a decade (by default). Without that bound, the first rounds' transient
    from a poor start (large moves of ``w``, read as a large dual residual) cut case2869pegase's flow and voltage
    weights 20-25x, after which every block stayed in its band and the run needed 140 rounds; with it, 74
    (case1354pegase 62 -> 47; the smaller cases unchanged: benchmarks/bench_power.py, bench_large_cases.py).

    Before round ``warmup`` a weight may go down but not up. In those rounds the copies still carry the cold
    start (zones start from their projection of 0 with zero duals), so a large primal residual says "far from
    the start", not "penalty too small"; raising the weight then pins the copies near a poor consensus and
    slows the duals that carry the prices. On PGLib's case118 (3 zones, mostly linear costs) the flow weight
    went 1 -> 10 in four rounds and the cost stayed ~4 % above the optimum for 40 rounds with the copies already
    agreeing: 51 rounds to PowerModelsADA's rule, 16 with ``warmup=10`` (case14 in 3 zones 16 -> 13, case118
    13 -> 11; case14 in 2 areas, case300, PGLib's case14 and case300 and both pegase cases unchanged; a 15-round warm-up
    gives counts within one round of these). Exact ADMM's default over-relaxation uses the same warm-up (``ADMM.warmup_rounds``).

    The penalty is not boosted once the cost settles (benchmarks/bench_rho_boost.py, the acceptance rows of
    bench_power.py, 60 rounds). The boost multiplied every weight by 3 per round, up to 30x its declared value, from
    the first round in which the summed objective moved less than 0.2 %. Rounds to PowerModelsADA's rule:
    - case300 16 -> 10, PGLib case300 35 -> 23, case118 8 -> 7;
    - case14 in 2 areas 5 -> 5, in 3 zones 12 -> 12;
    - PGLib case14 12 -> 14, PGLib case118 18 -> 41.
    The high penalty also freezes the cost short of the optimum: after 60 rounds case14 (2 areas) is still 0.42 %
    above it (default: 0.05 %) and PGLib case118 0.64 % (0.04 %). A plateau at the optimum and one above it look
    the same from inside the run. (x10 per round from a 0.5 % change: case300 9, case118 7, case14 in 3 zones 25.)

    The balance reads only released values (the copies ``E z``, the consensus ``w`` and the duals the aggregator keeps),
    so it costs no privacy.
    """

    target: float = 0.3
    mu: float = 3.0
    max_step: float = 10.0
    adapt_rounds: int = 60
    span: float = 10.0
    warmup: int = 15

    def __post_init__(self) -> None:
        check_float(self.target, "target", "BlockBalance", 0.0, math.inf)
        check_float(self.mu, "mu", "BlockBalance", 1.0, math.inf, closed="left")
        check_float(self.max_step, "max_step", "BlockBalance", 1.0, math.inf, closed="left")
        check_int(self.adapt_rounds, "adapt_rounds", "BlockBalance", 1)
        check_float(self.span, "span", "BlockBalance", 1.0, math.inf, closed="left")
        check_int(self.warmup, "warmup", "BlockBalance", 0)

    def update(self, t: int, weights, declared, *, rho: float, w, w_prev, shared, duals, gidx):
        """The weights (one per global coordinate) for the next round; ``declared`` defines the blocks."""
        import numpy as np

        if t > self.adapt_rounds:
            return weights
        ez, lam = np.concatenate(shared), np.concatenate(duals)
        bw = np.concatenate([w[g] for g in gidx])
        dw = np.concatenate([(w - w_prev)[g] for g in gidx])
        held_w, held_d = np.concatenate([weights[g] for g in gidx]), np.concatenate([declared[g] for g in gidx])
        out = weights.copy()
        for value in np.unique(declared):
            m = held_d == value
            primal = np.linalg.norm((bw - ez)[m]) / max(np.linalg.norm(ez[m]), np.linalg.norm(bw[m]), 1e-12)
            dual = np.linalg.norm((rho * held_w * dw)[m]) / max(np.linalg.norm(lam[m]), 1e-12)
            if not (primal > 0 and dual > 0 and math.isfinite(primal) and math.isfinite(dual)):
                continue
            ratio = primal / dual / self.target
            if 1.0 / self.mu <= ratio <= self.mu:
                continue
            out[declared == value] *= min(max(math.sqrt(ratio), 1.0 / self.max_step), self.max_step)
        if t < self.warmup:  # the cold start's primal residual does not ask for a larger penalty
            out = np.minimum(out, weights)
        return np.clip(out, declared / self.span, declared * self.span)


@dataclass(frozen=True)
class AutoEta:
    """eta chosen per agent from its gradient Lipschitz constant: ``eta_p = factor * L_p`` (the default
    ``eta="auto"``). ``factor=None`` (default) takes it from the agent's objective: 1 in general (the linearization
    majorizes ``f_p``), 0.55 when ``f_p`` is quadratic (``eta_p > L_p / 2`` suffices; see
    :mod:`cvxdp.families.consensus.step_sizes`). A marker: :func:`cvxdp.solve` resolves it.

    In a private run, an agent's eta is then multiplied by ``noise_growth`` each time its released copies move
    only with the noise (:mod:`cvxdp.families.consensus.step_sizes`: reads released values and public noise scales only);
    ``noise_growth=1`` keeps ``eta_p`` fixed."""

    factor: float | None = None
    noise_growth: float = 2.0

    def __post_init__(self) -> None:
        if self.factor is not None:
            check_float(self.factor, "factor", "AutoEta", 0.0, math.inf)
        check_float(self.noise_growth, "noise_growth", "AutoEta", 1.0, math.inf, closed="left")

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        raise ValueError("AutoEta is resolved per agent inside cvxdp.solve (eta_p = factor * L_p).")


@dataclass(frozen=True)
class FunctionSchedule:
    """Any callable ``t -> value`` (e.g. the authors' ``lambda t: 0.1 * math.sqrt(t)``), checked every round.

    The value must be a finite, positive float; otherwise the error names the parameter (``name``), its
    owner and the round. Non-decreasing and bounded (SPEC §2) is the caller's promise: it is not checked.
    """

    func: Callable[[int], float]
    name: str = "value"
    owner: str = "FunctionSchedule"

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise fail(self.name, self.owner, "a callable t -> value", self.func)

    def __call__(self, t: int, previous: float | None = None, primal: float = 0.0, dual: float = 0.0) -> float:
        value = self.func(t)
        try:
            v = math.nan if isinstance(value, bool) else float(value)
        except (TypeError, ValueError):
            v = math.nan
        if not (math.isfinite(v) and v > 0):
            raise fail(self.name, self.owner, f"a schedule whose value is a float in (0, inf) (round {t})", value)
        return v

    @property
    def label(self) -> str:
        return getattr(self.func, "__qualname__", None) or repr(self.func)


Schedule = (Constant | LinearCapped | GeometricCapped | StepSchedule | ResidualBalancing | AdaptiveRho | AutoEta
            | FunctionSchedule)
_KINDS = {"constant": Constant, "linear": LinearCapped, "geometric": GeometricCapped, "step": StepSchedule,
          "residual_balancing": ResidualBalancing, "adaptive": AdaptiveRho, "auto": AutoEta}
#: what the string "auto" means for each parameter
_AUTO = {"rho": AdaptiveRho, "eta": AutoEta}


def as_schedule(value: object, name: str, owner: str) -> Schedule:
    """Accept a positive float (constant), a schedule object, a dict ``{"kind": ..., **params}`` or any
    callable ``t -> value`` (wrapped in :class:`FunctionSchedule`, which checks every value)."""
    if isinstance(value, FunctionSchedule):
        return value
    if isinstance(value, str) and value == "auto" and name in _AUTO:
        return _AUTO[name]()
    if isinstance(value, (AdaptiveRho, AutoEta)) and not isinstance(value, _AUTO.get(name, ())):
        raise fail(name, owner, "'auto', a positive float or a schedule", value)
    if isinstance(value, (Constant, LinearCapped, GeometricCapped, StepSchedule, ResidualBalancing, AdaptiveRho,
                          AutoEta)):
        if isinstance(value, ResidualBalancing) and name != "rho":
            raise fail(name, owner, "a positive float or a non-adaptive schedule", value)
        return value
    if isinstance(value, dict):
        params = dict(value)
        kind = params.pop("kind", None)
        if kind not in _KINDS:
            raise fail(name, owner, "a schedule table with kind in " + ", ".join(map(repr, _KINDS)), value)
        return as_schedule(_KINDS[kind](**params), name, owner)
    if callable(value):
        return FunctionSchedule(value, name, owner)
    if isinstance(value, str) and name in _AUTO:
        raise fail(name, owner, "'auto', a float in (0, inf) or a schedule", value)
    return Constant(check_float(value, name, owner, 0.0, math.inf))


def describe(schedule: Schedule) -> dict:
    """JSON-able description, the inverse of :func:`as_schedule` on dicts (a callable is named, not stored)."""
    if isinstance(schedule, FunctionSchedule):
        return {"kind": "callable", "function": schedule.label}
    kind = next(k for k, cls in _KINDS.items() if isinstance(schedule, cls))
    return {"kind": kind, **asdict(schedule)}
