"""Second-order-cone (SOC-WR) relaxation of AC power flow over a set of buses (SPEC §6.1).

All variables of one model live in a single :class:`cvxpy.Variable` vector ``u`` with named index slices
(:class:`SocLayout`), which makes the flat layout of an agent, the slices for shared blocks and the
hand-coded gradients trivial. The formulation is PowerModels.jl's SOCWR (``src/form/wr.jl``,
``src/form/shared.jl``):

* ``w_i = |V_i|^2`` in ``[vmin^2, vmax^2]``; per branch ``wr, wi`` (the real and imaginary parts of
  ``V_f conj(V_t)``) and the four flows ``p_fr, q_fr, p_to, q_to`` given by the linear branch equations;
* rotated SOC ``wr^2 + wi^2 <= w_f w_t`` written as ``||(2 wr, 2 wi, w_f - w_t)|| <= w_f + w_t``;
* ``tan(angmin) wr <= wi <= tan(angmax) wr`` (angle limits outside (-90, 90) degrees, or both 0, become
  +-60 degrees as in PowerModels); parallel branches share ``(wr, wi)`` like PowerModels' bus pairs;
* ``p^2 + q^2 <= rate_a^2`` at both ends when ``rate_a > 0``; generator limits;
* per owned bus the net injections ``pinj_i = sum pg - gs_i w_i - sum p flows leaving i`` and
  ``qinj_i = sum qg + bs_i w_i - sum q flows leaving i``. The balance deviations are ``pinj - pd`` and
  ``qinj - qd``: the loads (private data, :class:`cvxpy.Parameter`) enter the **objective only**, so the
  feasible set does not depend on the data (needed by objective perturbation).

Objectives: ``"balance"`` (paper eq. 28) ``s * sum_i (pinj_i - pd_i)^2 + (qinj_i - qd_i)^2`` and ``"cost"``
``sum_g (c2 pg^2 + c1 pg + c0) / cost_scale + s * (the same sum)``, or the exact balance ``pinj = pd``,
``qinj = qd`` when ``penalty`` is None (the centralized OPF reference).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from cvxdp import solve_with_fallback
from cvxdp.errors import ConfigError

from .network import PowerCase

__all__ = [
    "SocLayout",
    "SocModel",
    "build_soc",
    "solve_central",
    "OBJECTIVES",
    "angle_limits",
    "flow_coefficients",
]

OBJECTIVES = ("balance", "cost")
_DEFAULT_ANGLE = np.deg2rad(60.0)
_BLOCKS = ("w", "wr", "wi", "p_fr", "q_fr", "p_to", "q_to", "pg", "qg", "pinj", "qinj")


def angle_limits(case: PowerCase) -> tuple[np.ndarray, np.ndarray]:
    """Branch angle-difference limits (radians) as PowerModels uses them (+-60 degrees by default)."""
    lo, hi = np.array(case.angmin, dtype=float), np.array(case.angmax, dtype=float)
    both_zero = (lo == 0) & (hi == 0)
    lo[(lo <= -np.pi / 2) | both_zero] = -_DEFAULT_ANGLE
    hi[(hi >= np.pi / 2) | both_zero] = _DEFAULT_ANGLE
    return lo, hi


@dataclass(frozen=True)
class SocLayout:
    """Index slices of the single variable vector ``u`` of a SOC model.

    ``buses`` are the bus positions with a ``w`` (own buses first, then neighbours), ``own`` the buses
    whose balance this model carries, ``lines`` branch indices, ``gens`` generator indices. Each block
    attribute (``w``, ``wr``, ... ``qinj``) holds the positions of that block inside ``u``, aligned with
    ``buses``, ``lines``, ``gens`` or ``own``.
    """

    buses: np.ndarray
    own: np.ndarray
    lines: np.ndarray
    gens: np.ndarray
    w: np.ndarray
    wr: np.ndarray
    wi: np.ndarray
    p_fr: np.ndarray
    q_fr: np.ndarray
    p_to: np.ndarray
    q_to: np.ndarray
    pg: np.ndarray
    qg: np.ndarray
    pinj: np.ndarray
    qinj: np.ndarray
    size: int

    def line_block(self, k: int) -> np.ndarray:
        """Positions of ``[wr, wi, p_fr, q_fr, p_to, q_to]`` of branch ``k`` (a case branch index)."""
        j = int(np.flatnonzero(self.lines == k)[0])
        return np.array([self.wr[j], self.wi[j], self.p_fr[j], self.q_fr[j], self.p_to[j], self.q_to[j]])

    def bus_w(self, i: int) -> int:
        """Position of ``w`` of bus position ``i``."""
        return int(self.w[int(np.flatnonzero(self.buses == i)[0])])

    def split(self, u: np.ndarray) -> dict[str, np.ndarray]:
        """Named blocks of a flat vector."""
        u = np.asarray(u, dtype=float)
        return {name: u[getattr(self, name)] for name in _BLOCKS}


def _layout(case: PowerCase, own: np.ndarray) -> SocLayout:
    own = np.asarray(own, dtype=int)
    own_set = set(own.tolist())
    on = np.flatnonzero(case.branch_status)
    touch = [k for k in on if case.f_bus[k] in own_set or case.t_bus[k] in own_set]
    lines = np.asarray(touch, dtype=int)
    ends = set(case.f_bus[lines].tolist()) | set(case.t_bus[lines].tolist())
    neighbours = np.array(sorted(ends - own_set), dtype=int)
    buses = np.concatenate([own, neighbours]).astype(int)
    gens = np.array(
        [g for g in range(case.n_gen) if case.gen_status[g] and case.gen_bus[g] in own_set], dtype=int
    )
    sizes = {
        "w": len(buses),
        **{b: len(lines) for b in _BLOCKS[1:7]},
        "pg": len(gens),
        "qg": len(gens),
        "pinj": len(own),
        "qinj": len(own),
    }
    offsets, off = {}, 0
    for name in _BLOCKS:
        offsets[name] = np.arange(off, off + sizes[name])
        off += sizes[name]
    return SocLayout(buses=buses, own=own, lines=lines, gens=gens, size=off, **offsets)


def flow_coefficients(case: PowerCase, lines: np.ndarray) -> dict[str, np.ndarray]:
    """Coefficients of the four linear flow equations (SPEC §6.1) for the given branches."""
    r, x = case.r[lines], case.x[lines]
    z2 = r**2 + x**2
    g, b = r / z2, -x / z2
    tm = case.tap[lines]
    tr, ti = tm * np.cos(case.shift[lines]), tm * np.sin(case.shift[lines])
    b_fr = b_to = case.b[lines] / 2.0
    t2 = tm**2
    return {
        # p_fr = a_w * w_f + a_r * wr + a_i * wi, etc.
        "pf": np.stack([g / t2, (-g * tr + b * ti) / t2, (-b * tr - g * ti) / t2]),
        "qf": np.stack([-(b + b_fr) / t2, -(-b * tr - g * ti) / t2, (-g * tr + b * ti) / t2]),
        "pt": np.stack([g, (-g * tr - b * ti) / t2, -(-b * tr + g * ti) / t2]),
        "qt": np.stack([-(b + b_to), -(-b * tr + g * ti) / t2, (g * tr + b * ti) / t2]),
    }


class SocModel:
    """The SOC-WR relaxation over the buses ``own`` (and their neighbours), in one variable vector.

    Parameters
    ----------
    case : PowerCase
    own : sequence of int, optional
        Bus positions whose power balance this model carries (default: all buses). Every in-service branch
        touching an own bus is included, with both its end buses.
    name : str
        Name of the CVXPY variable (and prefix of the load parameters).

    Attributes
    ----------
    layout : SocLayout
    u : cvxpy.Variable
    constraints : list of cvxpy.Constraint
        The data-free feasible set.
    pd, qd : cvxpy.Parameter
        Loads of the own buses (p.u.), initialised from the case.
    """

    def __init__(self, case: PowerCase, own: Sequence[int] | np.ndarray | None = None, *, name: str = "u"):
        self.case = case
        own_arr = np.flatnonzero(case.bus_type != 4) if own is None else np.asarray(own, dtype=int)
        self.layout = lay = _layout(case, own_arr)
        self.u = cp.Variable(lay.size, name=name)
        self.pd = cp.Parameter(
            len(lay.own), name=f"{name}_pd", value=np.asarray(case.pd[lay.own], dtype=float)
        )
        self.qd = cp.Parameter(
            len(lay.own), name=f"{name}_qd", value=np.asarray(case.qd[lay.own], dtype=float)
        )
        self.lb, self.ub = self._bounds()
        self.constraints = self._constraints()

    # ------------------------------------------------------------------ data-free feasible set
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        c, lay = self.case, self.layout
        lb, ub = np.full(lay.size, -np.inf), np.full(lay.size, np.inf)
        lb[lay.w], ub[lay.w] = c.vmin[lay.buses] ** 2, c.vmax[lay.buses] ** 2
        lb[lay.pg], ub[lay.pg] = c.pmin[lay.gens], c.pmax[lay.gens]
        lb[lay.qg], ub[lay.qg] = c.qmin[lay.gens], c.qmax[lay.gens]
        # wr, wi bounds implied by the SOC and the angle limits (PowerModels adds them explicitly)
        vmax_f, vmax_t = c.vmax[c.f_bus[lay.lines]], c.vmax[c.t_bus[lay.lines]]
        lo, hi = angle_limits(c)
        lo, hi = lo[lay.lines], hi[lay.lines]
        vv = vmax_f * vmax_t
        ub[lay.wr] = vv
        lb[lay.wr] = 0.0
        lb[lay.wi] = vv * np.minimum(np.sin(lo), 0.0)
        ub[lay.wi] = vv * np.maximum(np.sin(hi), 0.0)
        return lb, ub

    def _constraints(self) -> list[cp.Constraint]:
        c, lay, u = self.case, self.layout, self.u
        n, m = lay.size, len(lay.lines)
        pos = {int(b): int(p) for b, p in zip(lay.buses, lay.w)}
        wf = np.array([pos[int(i)] for i in c.f_bus[lay.lines]], dtype=int)
        wt = np.array([pos[int(i)] for i in c.t_bus[lay.lines]], dtype=int)
        rows_eq: list[np.ndarray] = []
        cols_eq: list[np.ndarray] = []
        vals_eq: list[np.ndarray] = []
        row = 0

        def add(r: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
            rows_eq.append(np.asarray(r))
            cols_eq.append(np.asarray(cols))
            vals_eq.append(np.asarray(vals))

        coef = flow_coefficients(c, lay.lines)
        ar = np.arange(m)
        for key, flow, wend in (
            ("pf", lay.p_fr, wf),
            ("qf", lay.q_fr, wf),
            ("pt", lay.p_to, wt),
            ("qt", lay.q_to, wt),
        ):
            a = coef[key]
            r = row + ar
            # flow - a_w w_end - a_r wr - a_i wi = 0
            add(r, flow, np.ones(m))
            add(r, wend, -a[0])
            add(r, lay.wr, -a[1])
            add(r, lay.wi, -a[2])
            row += m
        # parallel branches share (wr, wi)
        first: dict[tuple[int, int], int] = {}
        for j, k in enumerate(lay.lines):
            f, t = int(c.f_bus[k]), int(c.t_bus[k])
            key = (min(f, t), max(f, t))
            if key not in first:
                first[key] = j
                continue
            j0 = first[key]
            same = int(c.f_bus[lay.lines[j0]]) == f
            add(np.array([row, row]), np.array([lay.wr[j], lay.wr[j0]]), np.array([1.0, -1.0]))
            add(
                np.array([row + 1, row + 1]),
                np.array([lay.wi[j], lay.wi[j0]]),
                np.array([1.0, -1.0 if same else 1.0]),
            )
            row += 2
        # injections of own buses: rows (p, q) per own bus, in the order of lay.own
        n_own = len(lay.own)
        own_row = np.full(c.n_bus, -1, dtype=int)
        own_row[lay.own] = row + 2 * np.arange(n_own)
        w_own = np.array([pos[int(i)] for i in lay.own], dtype=int)
        gen_row = own_row[c.gen_bus[lay.gens]]
        gs, bs = c.gs[lay.own], c.bs[lay.own]
        pieces = [
            (own_row[lay.own], lay.pinj, -np.ones(n_own)),  # -pinj + sum pg - gs w - sum p flows = 0
            (own_row[lay.own] + 1, lay.qinj, -np.ones(n_own)),
            (gen_row, lay.pg, np.ones(len(lay.gens))),
            (gen_row + 1, lay.qg, np.ones(len(lay.gens))),
            (own_row[lay.own][gs != 0], w_own[gs != 0], -gs[gs != 0]),
            (own_row[lay.own][bs != 0] + 1, w_own[bs != 0], bs[bs != 0]),
        ]
        for ends, p_flow, q_flow in ((c.f_bus[lay.lines], lay.p_fr, lay.q_fr), (c.t_bus[lay.lines], lay.p_to, lay.q_to)):
            mine = own_row[ends] >= 0
            pieces += [(own_row[ends][mine], p_flow[mine], -np.ones(int(mine.sum()))),
                       (own_row[ends][mine] + 1, q_flow[mine], -np.ones(int(mine.sum())))]
        for r, cols, vals in pieces:
            add(r, cols, vals)
        row += 2 * n_own
        A = sp.csr_matrix(
            (np.concatenate(vals_eq), (np.concatenate(rows_eq), np.concatenate(cols_eq))), shape=(row, n)
        )
        cons: list[cp.Constraint] = [A @ u == 0]
        # bounds
        fin_lb, fin_ub = np.flatnonzero(np.isfinite(self.lb)), np.flatnonzero(np.isfinite(self.ub))
        cons += [u[fin_lb] >= self.lb[fin_lb], u[fin_ub] <= self.ub[fin_ub]]
        if m:
            # angle limits: tan(lo) wr - wi <= 0, wi - tan(hi) wr <= 0
            lo, hi = angle_limits(c)
            lo, hi = lo[lay.lines], hi[lay.lines]
            G = sp.vstack(
                [
                    sp.csr_matrix(
                        (
                            np.concatenate([np.tan(lo), -np.ones(m)]),
                            (np.tile(ar, 2), np.concatenate([lay.wr, lay.wi])),
                        ),
                        shape=(m, n),
                    ),
                    sp.csr_matrix(
                        (
                            np.concatenate([np.ones(m), -np.tan(hi)]),
                            (np.tile(ar, 2), np.concatenate([lay.wi, lay.wr])),
                        ),
                        shape=(m, n),
                    ),
                ]
            ).tocsr()
            cons.append(G @ u <= 0)
            # rotated SOC: ||(2 wr, 2 wi, w_f - w_t)|| <= w_f + w_t
            pair = np.concatenate([ar, ar])
            T = sp.csr_matrix((np.ones(2 * m), (pair, np.concatenate([wf, wt]))), shape=(m, n))
            X3 = sp.csr_matrix(
                (np.concatenate([np.ones(m), -np.ones(m)]), (pair, np.concatenate([wf, wt]))), shape=(m, n)
            )
            X1 = sp.csr_matrix((2 * np.ones(m), (ar, lay.wr)), shape=(m, n))
            X2 = sp.csr_matrix((2 * np.ones(m), (ar, lay.wi)), shape=(m, n))
            cons.append(cp.SOC(T @ u, cp.vstack([X1 @ u, X2 @ u, X3 @ u]), axis=0))
            # thermal limits at both ends
            lim = np.flatnonzero(c.rate_a[lay.lines] > 0)
            if len(lim):
                rate = c.rate_a[lay.lines][lim]
                ml = len(lim)
                al = np.arange(ml)
                for p_idx, q_idx in ((lay.p_fr, lay.q_fr), (lay.p_to, lay.q_to)):
                    P = sp.csr_matrix((np.ones(ml), (al, p_idx[lim])), shape=(ml, n))
                    Q = sp.csr_matrix((np.ones(ml), (al, q_idx[lim])), shape=(ml, n))
                    cons.append(cp.SOC(rate, cp.vstack([P @ u, Q @ u]), axis=0))
        return cons

    # ------------------------------------------------------------------ objectives
    def balance_term(self) -> cp.Expression:
        """``sum_i (pinj_i - pd_i)^2 + (qinj_i - qd_i)^2`` over the own buses."""
        lay = self.layout
        return cp.sum_squares(self.u[lay.pinj] - self.pd) + cp.sum_squares(self.u[lay.qinj] - self.qd)

    def cost_term(self) -> cp.Expression:
        """Generator cost (currency/h) of the own generators."""
        gc = self.case.gencost[self.layout.gens]
        if np.any(gc[:, 0] < 0):
            raise ConfigError(
                f"{self.case.name}: a generator has a negative quadratic cost coefficient (non-convex cost)."
            )
        pg = self.u[self.layout.pg]
        return cp.sum_squares(cp.multiply(np.sqrt(gc[:, 0]), pg)) + gc[:, 1] @ pg + float(gc[:, 2].sum())

    def objective(self, kind: str, *, penalty: float | None = 1.0, cost_scale: float = 1.0) -> cp.Expression:
        """The objective ``kind`` ("balance" or "cost"); ``penalty`` None means exact balance (cost only)."""
        if kind == "balance":
            return (1.0 if penalty is None else penalty) * self.balance_term()
        if kind == "cost":
            cost = self.cost_term() / cost_scale
            return cost if penalty is None else cost + penalty * self.balance_term()
        raise ConfigError(
            f"The objective must be one of {', '.join(map(repr, OBJECTIVES))}. Got {kind!r} instead."
        )

    def balance_constraints(self) -> list[cp.Constraint]:
        """Exact power balance at the own buses (used when the cost objective has no penalty)."""
        lay = self.layout
        return [self.u[lay.pinj] == self.pd, self.u[lay.qinj] == self.qd]

    def gradient(
        self, kind: str, *, penalty: float | None = 1.0, cost_scale: float = 1.0
    ) -> Callable[[np.ndarray], np.ndarray]:
        """Hand-coded gradient of :meth:`objective` at a flat ``u`` (reads the current load values); a picklable
        object, so a party can store its agent in its own file."""
        return _SocGradient(self.layout, self.pd, self.qd, self.case.gencost[self.layout.gens],
                            1.0 if penalty is None else float(penalty), kind == "balance" or penalty is not None,
                            kind == "cost", cost_scale)

    def curvature_bound(self, h_inj: float, h_pg: np.ndarray | float = 0.0) -> float:
        """A bound on the curvature of an objective with diagonal Hessian ``h_inj`` on the injections and
        ``h_pg`` on the generators' active power, over the feasible set: the smallest ``L`` with
        ``f(u) <= f(v) + <grad f(v), u - v> + L/2 ||u - v||^2`` for feasible ``u, v`` (what LinearizedADMM's eta
        must be measured against). Public: it reads the network, not the loads.

        Feasible differences ``d = u - v`` keep each own bus's balance rows: ``d_pinj = a . d_x`` and
        ``d_qinj = c . d_x``, where ``x`` are the bus's generators, its ``w`` (shunt) and the flows ending there.
        These variables belong to one bus each, so keeping only these rows (dropping the flow definitions and
        the inequalities only enlarges the set of directions) leaves one small block per bus. The bound is the
        largest generalized eigenvalue over the buses of ``(h_inj G G^T + diag(h_x), I + G G^T)`` with
        ``G = [a c]``. For the balance objective it is ``h_inj mu / (1 + mu)`` with ``mu`` the largest
        eigenvalue of ``G^T G``: below ``h_inj``, more so at buses with few lines and generators.
        """
        import scipy.linalg as sl

        c, lay = self.case, self.layout
        h_pg = np.broadcast_to(np.asarray(h_pg, dtype=float), (len(lay.gens),))
        out = 0.0
        for b in lay.own:
            gens = np.flatnonzero(c.gen_bus[lay.gens] == b)
            fr = np.flatnonzero(c.f_bus[lay.lines] == b)
            to = np.flatnonzero(c.t_bus[lay.lines] == b)
            nf = len(fr) + len(to)
            k = len(gens)
            # x = [pg (k), qg (k), w (1), p flows (nf), q flows (nf)]
            n = 2 * k + 1 + 2 * nf
            a, q = np.zeros(n), np.zeros(n)
            a[:k], q[k:2 * k] = 1.0, 1.0
            a[2 * k], q[2 * k] = -c.gs[b], c.bs[b]
            a[2 * k + 1:2 * k + 1 + nf] = -1.0
            q[2 * k + 1 + nf:] = -1.0
            G = np.column_stack([a, q])
            K = h_inj * (G @ G.T)
            K[np.arange(k), np.arange(k)] += h_pg[gens]
            lam = sl.eigh(K, np.eye(n) + G @ G.T, eigvals_only=True)
            out = max(out, float(lam[-1]))
        return out

    def values(self, u: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Named blocks of ``u`` (default: the variable's current value)."""
        return self.layout.split(self.u.value if u is None else u)


def build_soc(case: PowerCase, own: Sequence[int] | np.ndarray | None = None, *, name: str = "u") -> SocModel:
    """Shorthand for :class:`SocModel`."""
    return SocModel(case, own, name=name)


def solve_central(
    case: PowerCase,
    objective: str = "cost",
    *,
    penalty: float | None = None,
    cost_scale: float = 1.0,
    solver: str = "CLARABEL",
    time_limit: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Centralized SOC-WR solve over the whole network.

    Parameters
    ----------
    case : PowerCase
    objective : {"cost", "balance"}
    penalty : float or None
        Weight on the squared balance deviations; None with ``"cost"`` enforces exact balance (the SOC-OPF
        whose optimum sits just below the AC-OPF cost), None with ``"balance"`` means weight 1.
    cost_scale : float
        The generator cost is divided by it inside the objective.
    solver : str
        First solver to try; then the others of :data:`cvxdp.model.central.FALLBACK_ORDER`, each capped (iterations
        and ``time_limit`` seconds) and announced by a :class:`cvxdp.model.central.SolverFallbackWarning`.
    time_limit : float
        Seconds each solver of the chain may run.
    progress : callable(str), optional
        Receives one line per step (building the model, each solver's start and status).

    Returns
    -------
    dict
        ``objective`` (the model objective), ``cost`` (generator cost, currency/h), ``balance`` (sum of
        squared deviations), ``solver``, ``time_s``, ``status``, and the arrays ``pg``, ``qg`` (per
        generator, p.u.), ``w``, ``vm`` (per bus), ``u`` (flat) and ``model`` (the :class:`SocModel`).
    """
    if objective not in OBJECTIVES:
        raise ConfigError(
            f"The objective must be one of {', '.join(map(repr, OBJECTIVES))}. Got {objective!r} instead."
        )
    t0 = time.perf_counter()
    model = SocModel(case)
    cons = list(model.constraints)
    if objective == "cost" and penalty is None:
        cons += model.balance_constraints()
    prob = cp.Problem(cp.Minimize(model.objective(objective, penalty=penalty, cost_scale=cost_scale)), cons)
    if progress is not None:
        progress(f"{case.name}: SOC model with {model.layout.size} variables over {case.n_bus} buses and "
                 f"{int(case.branch_status.sum())} branches built in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    used = solve_with_fallback(prob, solver, time_limit=time_limit, progress=progress,
                               label=f"the centralized SOC solve of {case.name}")
    elapsed = time.perf_counter() - t0
    u = np.asarray(model.u.value, dtype=float)
    vals = model.values(u)
    lay = model.layout
    pg, qg = np.zeros(case.n_gen), np.zeros(case.n_gen)
    pg[lay.gens], qg[lay.gens] = vals["pg"], vals["qg"]
    w = np.full(case.n_bus, np.nan)
    w[lay.buses] = vals["w"]
    gc = case.gencost
    cost = float(np.sum(gc[:, 0] * pg**2 + gc[:, 1] * pg + gc[:, 2] * case.gen_status))
    dev = np.sum((vals["pinj"] - case.pd[lay.own]) ** 2 + (vals["qinj"] - case.qd[lay.own]) ** 2)
    return {
        "objective": float(prob.value),
        "cost": cost,
        "balance": float(dev),
        "solver": used,
        "time_s": elapsed,
        "status": prob.status,
        "pg": pg,
        "qg": qg,
        "w": w,
        "vm": np.sqrt(np.maximum(w, 0)),
        "u": u,
        "model": model,
    }


class _SocGradient:
    """The gradient of the zone objective: balance deviations on the injections (the loads are Parameters, read
    at each call) and the generation cost on ``pg``."""

    def __init__(self, layout, pd, qd, gencost: np.ndarray, s: float, with_balance: bool, with_cost: bool,
                 cost_scale: float) -> None:
        self.lay, self.pd, self.qd, self.gc = layout, pd, qd, gencost
        self.s, self.with_balance, self.with_cost, self.cost_scale = s, with_balance, with_cost, cost_scale

    def __call__(self, u: np.ndarray) -> np.ndarray:
        lay = self.lay
        u = np.asarray(u, dtype=float)
        g = np.zeros(lay.size)
        if self.with_balance:
            g[lay.pinj] = 2.0 * self.s * (u[lay.pinj] - self.pd.value)
            g[lay.qinj] = 2.0 * self.s * (u[lay.qinj] - self.qd.value)
        if self.with_cost:
            g[lay.pg] = (2.0 * self.gc[:, 0] * u[lay.pg] + self.gc[:, 1]) / self.cost_scale
        return g
