"""The "power" template: zone-decomposed SOC power flow (SPEC §6.1, Ryu & Kim Appendix D).

``[model]`` keys (case file)
----------------------------
network : str, required
    A pandapower built-in case, e.g. ``"case14"``, ``"case118"``, ``"case1354pegase"``; a bundled PGLib-OPF
    v23.07 case (``"pglib_opf_case14_ieee"``, ``"pglib_opf_case118_ieee"``, ``"pglib_opf_case300_ieee"``); or
    the path of a MATPOWER version-2 case file (``*.m``), relative to the case file's directory unless
    absolute. A file keeps MATPOWER's bus numbers (``zones`` lists them) and order. The file's content is part
    of every run's and study cell's fingerprint (:func:`cvxdp.run.storage.case_context` hashes a file that a
    ``[model]`` string names), so a resumed run on an edited file is refused.
zones : list of lists of int
    The partition, as MATPOWER (1-based) bus numbers. Exactly one of ``zones`` and ``auto_zones``.
auto_zones : int >= 2
    Number of zones of an automatic connected partition (:func:`~cvxdp_models.power.zones.auto_zones`).
objective : "balance" (default) or "cost"
    ``"balance"``: ``penalty * sum_i (pinj_i - pd_i)^2 + (qinj_i - qd_i)^2`` over each zone's buses (the
    paper's eq. 28). ``"cost"``: generator cost divided by ``cost_scale`` plus the same penalty term.
alpha : float > 0, default 0.1
    Adjacency size (p.u.) of the neighbouring relation on loads (see :func:`load_sensitivity`). The agents
    declare the exact sensitivity ``4 s alpha`` (l1) / ``2 sqrt(2) s alpha`` (l2) — the sound form of the
    paper's preset, scaled by the relation and ``s`` (the mechanisms divide by ``min(c)`` for OutPert) — and
    ``alpha`` itself for the "paper" preset (``sensitivity="paper"``), which reproduces Ryu & Kim's figures
    (Delta = 2 alpha / alpha) but is not a privacy guarantee for this model: on case14 the true per-step
    epsilon is 2x the claim (ObjL, balance), 50x (ObjL, cost with s = 25), 1.47x (OutG); the ledger says so.
penalty : float >= 0
    Weight ``s`` of the squared balance deviations; default 1 for "balance". For "cost" the default (or 0)
    is **exact** balance ``pinj = pd, qinj = qd`` as constraints: the economic dispatch, which ADMM solves
    well but whose loads then sit in the feasible set, so it has no gradient sensitivity and cannot run
    privately. A positive penalty keeps the loads in the objective (private runs possible) but makes the
    problem ill-conditioned: the penalized optimum is ``sum_i lambda_i^2 / (4 s)`` below the exact one
    (``lambda``: the scaled marginal costs), and first-order methods need ``eta ~ 2 s``.
cost_scale : float > 0, default 1000
    The generator cost (currency/h) is divided by it inside the "cost" objective.
load_scale : float > 0, default 1
    Multiplies every load.

Each zone ``p`` becomes ``cvxdp.Agent(f"zone{p}")`` over one variable vector: its buses, the adjacent buses
across cut lines and the cut lines (see :mod:`.soc`). Shared keys: ``f"line{k}"`` (1-based branch index
of a cut line) -> ``[wr, wi, p_fr, q_fr, p_to, q_to]`` and ``f"w{bus}"`` (MATPOWER bus number of a bus at
either end of a cut line) -> ``w``. Each bus's balance belongs to its owner zone only, so the zone
objectives sum to the centralized objective.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import cvxdp
from cvxdp.errors import ConfigError

from ..base import ModelInstance, check_model_keys
from .ac_check import ac_verdict, run_ac_check
from .network import PowerCase, load_network
from .soc import OBJECTIVES, SocModel, solve_central
from .zones import PARTITIONER, auto_zones, parse_zones, zone_of_bus

__all__ = ["build", "build_agents", "input_sensitivity", "load_sensitivity", "settings", "ZoneModel", "MODEL_KEYS"]

MODEL_KEYS = ("network", "zones", "auto_zones", "objective", "alpha", "penalty", "cost_scale", "load_scale")
DEFAULT_PENALTY = {"balance": 1.0, "cost": 0.0}
#: relative ADMM penalty of the shared voltage products (w, wr, wi) against the line flows (p.u.): exact ADMM
#: penalizes them with ``rho * VOLTAGE_RHO_SCALE`` (benchmarks/bench_power.py --acceptance; data-free)
VOLTAGE_RHO_SCALE = 100.0
LINE_RHO_SCALE = [VOLTAGE_RHO_SCALE, VOLTAGE_RHO_SCALE, 1.0, 1.0, 1.0, 1.0]  # [wr, wi, p_fr, q_fr, p_to, q_to]
EXACT_RELATION = (
    "none: objective = 'cost' with penalty = 0 puts the loads (the private data) in the constraints "
    "(exact balance), so the objective holds no private data and has no gradient sensitivity to calibrate "
    "noise to; for a private run set objective = 'balance' or penalty > 0 in [model]"
)
RELATION = (
    "alpha-adjacent loads: the loads differ at one bus only, by at most alpha (p.u.) in active and "
    "at most alpha in reactive demand"
)


def input_sensitivity(alpha: float) -> tuple[float, float]:
    """Sensitivity ``(Delta_1, Delta_2)`` of a zone's load vector ``(pd, qd)`` (its own buses) under
    alpha-adjacent loads (:data:`RELATION`): one bus's active and reactive loads move by at most ``alpha`` each,
    so the vector moves in two coordinates: ``Delta_1 = 2 alpha``, ``Delta_2 = sqrt(2) alpha``."""
    return 2.0 * alpha, math.sqrt(2.0) * alpha


def load_sensitivity(penalty: float, alpha: float) -> cvxdp.Sensitivity:
    """Exact gradient sensitivity of a zone objective under alpha-adjacent loads.

    The loads enter the objective only through ``s * ((pinj_i - pd_i)^2 + (qinj_i - qd_i)^2)``, whose
    gradient with respect to ``(pinj_i, qinj_i)`` is ``-2 s (pd_i - pinj_i, qd_i - qinj_i)``; every other
    coordinate's gradient (including the generator cost) is data-free. If the loads of one bus change by
    ``(dp, dq)`` with ``|dp|, |dq| <= alpha``, the gradient changes by ``2 s (dp, dq)`` in two coordinates:
    ``Delta_1 = 4 s alpha`` and ``Delta_2 = 2 sqrt(2) s alpha``, attained at every ``u``.
    """
    return cvxdp.Sensitivity(
        l1=4.0 * penalty * alpha, l2=2.0 * math.sqrt(2.0) * penalty * alpha, relation=RELATION, alpha=alpha
    )


def _float(model: dict, key: str, default: float, *, zero_ok: bool = False) -> float:
    value = model.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero_ok)
    ):
        interval = "[0, inf)" if zero_ok else "(0, inf)"
        raise ConfigError(
            f"The {key!r} entry of [model] must be a float in {interval}. Got {value!r} instead."
        )
    return float(value)


def _check_model(model: dict) -> dict[str, Any]:
    check_model_keys(model, MODEL_KEYS, "power")
    if "network" not in model:
        raise ConfigError("[model] of the power template needs a 'network' entry, e.g. network = \"case14\".")
    if not isinstance(model["network"], str):
        raise ConfigError(
            f"The 'network' entry of [model] must be a str such as 'case14', 'pglib_opf_case14_ieee' or a "
            f"path to a MATPOWER case file (*.m). Got {model['network']!r} instead."
        )
    if ("zones" in model) == ("auto_zones" in model):
        raise ConfigError(
            "[model] of the power template needs exactly one of 'zones' (a list of lists of bus "
            "numbers) and 'auto_zones' (a number of zones)."
        )
    objective = model.get("objective", "balance")
    if objective not in OBJECTIVES:
        raise ConfigError(
            f"The 'objective' entry of [model] must be one of {', '.join(map(repr, OBJECTIVES))}. "
            f"Got {objective!r} instead."
        )
    auto = model.get("auto_zones")
    if auto is not None and (isinstance(auto, bool) or not isinstance(auto, int) or auto < 2):
        raise ConfigError(
            f"The 'auto_zones' entry of [model] must be an int in [2, inf). Got {auto!r} instead."
        )
    zones = model.get("zones")
    if zones is not None and isinstance(zones, list) and len(zones) < 2:
        raise ConfigError(
            f"The 'zones' entry of [model] must list at least 2 zones. Got {len(zones)} instead."
        )
    # which partitioner turns auto_zones into zones: part of the fingerprint of runs with automatic zones, so a
    # run or study cell made with another partitioner is refused, not silently resumed or reused
    partitioner = {} if auto is None else {"partitioner": PARTITIONER}
    return {
        "network": model["network"],
        "zones": zones,
        "auto_zones": auto,
        **partitioner,
        "objective": objective,
        "alpha": _float(model, "alpha", 0.1),
        "penalty": _float(model, "penalty", DEFAULT_PENALTY[objective], zero_ok=objective == "cost"),
        "cost_scale": _float(model, "cost_scale", 1000.0),
        "load_scale": _float(model, "load_scale", 1.0),
    }


def zone_lipschitz(m: Any, kind: str, penalty: float | None, cost_scale: float) -> float:
    """Curvature bound of a zone's objective over its feasible set (what ``Agent(lipschitz=...)`` declares and
    LinearizedADMM's eta is measured against). The Hessian is diagonal: ``2 * penalty`` on the injections,
    ``2 c2 / cost_scale`` on the generators. :meth:`SocModel.curvature_bound` restricts it to the directions the
    buses' balance rows allow (case14's zones: 1.60-1.67 instead of 2 for the balance objective). Public: it
    reads the penalty, the network and the cost curves, not the loads."""
    lay = m.layout
    h_inj = 2.0 * (1.0 if penalty is None else float(penalty)) if (kind == "balance" or penalty is not None) else 0.0
    h_pg = 2.0 * m.case.gencost[lay.gens][:, 0] / cost_scale if kind == "cost" else np.zeros(len(lay.gens))
    return min(max([h_inj, *h_pg.tolist()]), m.curvature_bound(h_inj, h_pg))


class ZoneModel:
    """The zone decomposition of a case: one :class:`SocModel` and one :class:`cvxdp.Agent` per zone."""

    def __init__(
        self,
        case: PowerCase,
        zones: list[np.ndarray],
        *,
        objective: str = "balance",
        penalty: float | None = 1.0,
        cost_scale: float = 1000.0,
        alpha: float = 0.1,
    ) -> None:
        if len(zones) < 2:
            raise ConfigError(f"A zone decomposition needs at least 2 zones. Got {len(zones)} instead.")
        if objective not in OBJECTIVES:
            raise ConfigError(
                f"The objective must be one of {', '.join(map(repr, OBJECTIVES))}. Got {objective!r} instead."
            )
        exact = objective == "cost" and not penalty
        penalty = None if exact else (1.0 if penalty is None else float(penalty))
        self.case, self.zones = case, zones
        self._soc: dict[tuple, dict[str, Any]] = {}  # (objective, solver, time limit) -> the central SOC solve
        self.objective, self.penalty, self.cost_scale, self.alpha = objective, penalty, cost_scale, alpha
        self.owner = zone_of_bus(case, zones)
        on = np.flatnonzero(case.branch_status)
        self.cut_lines = np.array(
            [k for k in on if self.owner[case.f_bus[k]] != self.owner[case.t_bus[k]]], dtype=int
        )
        self.boundary = (
            np.unique(np.concatenate([case.f_bus[self.cut_lines], case.t_bus[self.cut_lines]]))
            if len(self.cut_lines)
            else np.zeros(0, dtype=int)
        )
        self.models: list[SocModel] = []
        self.agents: list[cvxdp.Agent] = []
        sens = (
            cvxdp.Sensitivity(relation=EXACT_RELATION, alpha=alpha)
            if exact
            else load_sensitivity(penalty, alpha)
        )
        cut = set(self.cut_lines.tolist())
        boundary = set(self.boundary.tolist())
        for p, own in enumerate(zones, start=1):
            m = SocModel(case, own, name=f"zone{p}")
            lay = m.layout
            shared = {}
            for k in lay.lines:
                if int(k) in cut:
                    shared[f"line{int(k) + 1}"] = m.u[lay.line_block(int(k))]
            for i in lay.buses:
                if int(i) in boundary:
                    shared[f"w{int(case.bus_number[i])}"] = m.u[lay.bus_w(int(i))]
            cons = m.constraints + (m.balance_constraints() if exact else [])
            # public per-block penalty weights (exact ADMM): voltage products are stiffer than flows
            scale = {k: (LINE_RHO_SCALE if k.startswith("line") else VOLTAGE_RHO_SCALE) for k in shared}
            agent = cvxdp.Agent(
                f"zone{p}",
                m.objective(objective, penalty=penalty, cost_scale=cost_scale),
                cons,
                shared=shared,
                gradient=m.gradient(objective, penalty=penalty, cost_scale=cost_scale),
                sensitivity=sens,
                lipschitz=zone_lipschitz(m, objective, penalty, cost_scale),  # public bound (issue 12)
                rho_scale=scale,
            )
            self.models.append(m)
            self.agents.append(agent)

    def noisy_loads(self, mechanism: cvxdp.InputPerturbation, seed: int | None = None,
                    loads: dict[str, np.ndarray] | None = None) -> dict[str, tuple[np.ndarray, cvxdp.InputRelease]]:
        """Every zone's load vector ``(pd, qd)`` over its own buses plus one draw of ``mechanism``'s noise.

        Neighbouring relation: :data:`RELATION` (alpha-adjacent loads: the loads differ at one bus only, by at
        most ``alpha`` p.u. in active and in reactive demand), so a zone's vector has sensitivity
        ``Delta_1 = 2 alpha`` (Laplace) and ``Delta_2 = sqrt(2) alpha`` (Gaussian) (:func:`input_sensitivity`);
        every own bus is perturbed, with or without load (a neighbouring data set may give it one). Noise from
        one generator per zone (``SeedSequence(seed).spawn``; None: fresh entropy).

        Parameters
        ----------
        mechanism : cvxdp.privacy.InputPerturbation
            Laplace or Gaussian, calibrated to each zone's whole-run (epsilon, delta).
        seed : int, optional
            Seed of the zones' generators (research only: a known seed replays the noise).
        loads : dict, optional
            Zone name -> the vector ``(pd, qd)`` to perturb instead of the zone's own loads (audits).

        Returns
        -------
        dict
            Zone name -> (the perturbed vector, its :class:`~cvxdp.privacy.InputRelease`).
        """
        if self.penalty is None:
            raise ConfigError("Input perturbation of the loads needs them in the objective: " + EXACT_RELATION)
        l1, l2 = input_sensitivity(self.alpha)
        streams = np.random.SeedSequence(seed).spawn(len(self.models))
        out = {}
        for agent, m, stream in zip(self.agents, self.models, streams):
            x = (loads or {}).get(agent.name)
            x = np.concatenate([m.pd.value, m.qd.value]) if x is None else np.asarray(x, dtype=float)
            out[agent.name] = mechanism.perturb(x, l1=l1, l2=l2, rng=np.random.default_rng(stream))
        return out

    @contextlib.contextmanager
    def perturbed_loads(self, mechanism: cvxdp.InputPerturbation,
                        seed: int | None = None) -> Iterator[dict[str, cvxdp.InputRelease]]:
        """One-shot input perturbation (issue 39): inside the block every zone's objective and gradient read
        its loads perturbed once (:meth:`noisy_loads`); the true loads are restored on exit (evaluate after the
        block). A run on the perturbed loads (e.g. exact ADMM) is post-processing: each zone's whole-run
        guarantee is the one release's, ``mechanism``'s (epsilon, delta).

        Yields
        ------
        dict
            Zone name -> its :class:`~cvxdp.privacy.InputRelease` (scale, DP event, epsilon, delta).
        """
        noisy = self.noisy_loads(mechanism, seed)
        saved = [(m.pd.value.copy(), m.qd.value.copy()) for m in self.models]
        try:
            for agent, m in zip(self.agents, self.models):
                n = len(m.pd.value)
                m.pd.value, m.qd.value = noisy[agent.name][0][:n], noisy[agent.name][0][n:]
            yield {name: release for name, (_, release) in noisy.items()}
        finally:
            for m, (pd, qd) in zip(self.models, saved):
                m.pd.value, m.qd.value = pd, qd

    # ------------------------------------------------------------------ evaluation
    def generator_output(self, local: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Active generation per generator and voltage magnitude per bus from the zones' local vectors."""
        pg = np.zeros(self.case.n_gen)
        vm = np.full(self.case.n_bus, np.nan)
        for agent, m in zip(self.agents, self.models):
            u = np.asarray(local[agent.name], dtype=float)
            pg[m.layout.gens] = u[m.layout.pg]
            nown = len(m.layout.own)
            vm[m.layout.buses[:nown]] = np.sqrt(np.maximum(u[m.layout.w[:nown]], 0.0))
        return pg, vm

    def metrics(self, local: dict[str, np.ndarray]) -> dict[str, float]:
        """Generator cost (currency/h), total squared balance deviation and objective at local vectors."""
        cost = balance = objective = 0.0
        gc = self.case.gencost
        for agent, m in zip(self.agents, self.models):
            u = np.asarray(local[agent.name], dtype=float)
            lay = m.layout
            pg = u[lay.pg]
            cost += float(np.sum(gc[lay.gens, 0] * pg**2 + gc[lay.gens, 1] * pg + gc[lay.gens, 2]))
            balance += float(np.sum((u[lay.pinj] - m.pd.value) ** 2 + (u[lay.qinj] - m.qd.value) ** 2))
            objective += agent.objective_value(u)
        return {"cost": cost, "balance_deviation": balance, "zone_objective": objective}

    def central(
        self,
        objective: str | None = None,
        *,
        ac_check: bool = True,
        solver: str = "CLARABEL",
        time_limit: float = 300.0,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Centralized solve of the same model (or of ``objective`` with the same penalty).

        ``solver`` goes first, then the capped and announced fallbacks of :func:`.soc.solve_central`
        (``time_limit`` seconds per solver); ``progress`` receives one line per step.
        """
        kind = self.objective if objective is None else objective
        if kind not in OBJECTIVES:
            raise ConfigError(
                f"The objective must be one of {', '.join(map(repr, OBJECTIVES))}. Got {kind!r} instead."
            )
        key = (kind, solver, float(time_limit))  # solved once: with and without the AC check, for the report
        if key not in self._soc:
            self._soc[key] = solve_central(self.case, kind, penalty=self.penalty, cost_scale=self.cost_scale,
                                           solver=solver, time_limit=time_limit, progress=progress)
        res = self._soc[key]
        out = {k: res[k] for k in ("objective", "solver", "time_s", "status", "cost", "balance")}
        out["objective_kind"] = kind
        if ac_check:
            if progress is not None:
                progress(f"{self.case.name}: AC power flow (pandapower runpp) from the SOC set-points")
            out.update(self.ac_check(res["pg"], res["vm"]))
        return out

    def ac_check(self, pg: np.ndarray, vm: np.ndarray) -> dict[str, Any]:
        """pandapower AC power flow from set-points ``(pg, vm)``: the mismatch (``ac_*`` keys, unit-suffixed),
        a verdict ``ac_feasible`` with the ``ac_violations`` found and the ``ac_tolerances`` used."""
        start = time.perf_counter()
        mismatch = run_ac_check(self.case, pg, vm)
        verdict = ac_verdict(self.case, mismatch)
        out = {f"ac_{k}": v for k, v in mismatch.items()}
        out.update({f"ac_{k}": v for k, v in verdict.items()})
        out["ac_time_s"] = time.perf_counter() - start
        return out

    def ac_check_local(self, local: dict[str, np.ndarray]) -> dict[str, Any]:
        """:meth:`ac_check` of the generator set-points in the zones' final local copies (a distributed,
        possibly private, dispatch): ``pg`` and ``sqrt(w)`` at the generator buses, from the owner zones."""
        pg, vm = self.generator_output(local)
        return self.ac_check(pg, np.where(np.isnan(vm), 1.0, vm))


def build_agents(case: PowerCase, zones: list[np.ndarray], **options: Any) -> ZoneModel:
    """Zone agents of ``case`` for an explicit partition (bus positions); see :class:`ZoneModel`."""
    return ZoneModel(case, zones, **options)


def settings(model: dict) -> dict[str, Any]:
    """The template's settings hook: the ``[model]`` table checked and resolved (defaults included), without
    loading the network; the built instance's ``settings``."""
    return _check_model(model)


def build(model: dict, *, base_dir: Path) -> ModelInstance:
    """Build the zone agents of a case file's ``[model]`` table (see the module docstring)."""
    cfg = settings(model)
    case = load_network(cfg["network"], base_dir)
    if cfg["load_scale"] != 1.0:
        case = case.with_loads(case.pd * cfg["load_scale"], case.qd * cfg["load_scale"])
    if cfg["zones"] is not None:
        zones = parse_zones(case, cfg["zones"])
    else:
        zones = auto_zones(case, cfg["auto_zones"])
    zm = ZoneModel(
        case,
        zones,
        objective=cfg["objective"],
        penalty=cfg["penalty"],
        cost_scale=cfg["cost_scale"],
        alpha=cfg["alpha"],
    )
    cache: dict[str, dict[str, Any]] = {}

    def central(objective: str | None = None, **options: Any) -> dict[str, Any]:
        key = f"{objective}|{sorted(options.items())}"
        if key not in cache:
            cache[key] = zm.central(objective, **options)
        return dict(cache[key])

    def evaluate(result: Any) -> dict[str, float]:
        ref = central(ac_check=False)
        out = zm.metrics(result.local)
        gap = out["zone_objective"] - ref["objective"]
        # a cost gap only against an optimum of the same objective: the balance objective does not price generation,
        # so the cost of its central optimum is that of one feasible dispatch, not a bound (NaN: JSON null)
        same = cfg["objective"] == "cost"
        out.update(
            {
                "central_objective": ref["objective"],
                "central_cost": ref["cost"],
                "objective_gap": gap,
                "relative_gap": gap / abs(ref["objective"]) if abs(ref["objective"]) > 1e-9 else float("nan"),
                "cost_gap": out["cost"] - ref["cost"] if same else float("nan"),
                "objective_kind": cfg["objective"],
            }
        )
        polished = getattr(result, "polished", None)
        if polished and polished.get("local"):  # exact ADMM's polished dispatch (the zones agree on every tie line)
            cost = zm.metrics(polished["local"])["cost"]
            out.update({"polished_round": int(polished["round"]), "polished_cost": cost,
                        "polished_cost_gap": cost - ref["cost"] if same else float("nan")})
        return out

    info = {
        **case.summary(),
        "zones": [case.bus_number[z].tolist() for z in zones],
        "objective": cfg["objective"],
        "penalty": cfg["penalty"],
        "cost_scale": cfg["cost_scale"],
        "alpha": cfg["alpha"],
        "load_scale": cfg["load_scale"],
        "cut_lines": [int(k) + 1 for k in zm.cut_lines],
        "boundary_buses": case.bus_number[zm.boundary].tolist(),
        "relation": RELATION,
        "variables_per_zone": [m.layout.size for m in zm.models],
    }
    def ac_check(result: Any) -> dict[str, Any]:
        """The AC check of the distributed point (the ``ac_*`` keys), and in ``ac_points`` side by side with the
        central SOC optimum's and the polished point's, with ``ac_at_fault`` / ``ac_diagnosis`` saying whether
        the relaxation or the distribution is at fault (:func:`ac_diagnosis`)."""
        out = zm.ac_check_local(result.local)
        points = {"central SOC": {k: v for k, v in central().items() if k.startswith("ac_")}, "distributed": out}
        polished = getattr(result, "polished", None)
        if polished and polished.get("local"):
            points["polished"] = zm.ac_check_local(polished["local"])
        out = dict(out)
        out["ac_points"] = {name: {k[3:]: v for k, v in point.items()} for name, point in points.items()}
        out["ac_at_fault"], out["ac_diagnosis"] = ac_diagnosis(out["ac_points"])
        return out

    return ModelInstance(agents=zm.agents, evaluate=evaluate, central=central, info=info, settings=dict(cfg),
                         ac_check=ac_check, perturbed_inputs=zm.perturbed_loads)


def ac_diagnosis(points: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """Which is at fault when the distributed point fails the AC check, from the kinds of violation (slack, voltage,
    reactive limit, overload, no convergence) of each point: ``"none"`` when the distributed (or polished) point
    passes; ``"relaxation"`` when the central SOC optimum fails in every way the distributed point does (the SOC
    relaxation's set-points are not AC feasible, whatever the distribution does); ``"distribution"`` when the
    central optimum passes; ``"both"`` when the central optimum fails too but the distributed point fails in
    other ways as well."""
    def kinds(point: dict[str, Any]) -> set[str]:
        return {" ".join(v.split()[:2]) for v in point.get("violations", [])}

    passing = [name for name in ("distributed", "polished") if points.get(name, {}).get("feasible")]
    if passing:
        return "none", f"the {' and the '.join(passing)} point(s) pass the AC check"
    central, distributed = kinds(points["central SOC"]), kinds(points["distributed"])
    if not central:
        return "distribution", ("the central SOC optimum passes the AC check but the distributed point does not: "
                                "the distribution is at fault (more rounds, tighter tolerances or less noise)")
    if distributed <= central:
        return "relaxation", ("the central SOC optimum fails the AC check in the same way: the SOC relaxation, not "
                              "the distribution, is at fault (an AC-feasible dispatch needs an AC-OPF, not this "
                              "model)")
    return "both", (f"the central SOC optimum fails the AC check too ({', '.join(sorted(central))}: the relaxation), "
                    f"and the distributed point also fails where it passes ({', '.join(sorted(distributed - central))}: "
                    "the distribution)")
