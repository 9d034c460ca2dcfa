"""Empirical privacy audits of cvxdp's Laplace and Gaussian mechanisms, on the statistics of
:mod:`cvxdp.audits.statistics` (re-exported here, where they lived until issue 49).

Given samplers of a mechanism's scalar output on two neighbouring inputs D and D', count threshold events
``{out > t}`` and ``{out < t}`` and turn the counts into a high-confidence lower bound on epsilon with
one-sided Clopper-Pearson intervals. A correct (epsilon, delta)-DP mechanism satisfies
``P[M(D) in S] <= e^eps P[M(D') in S] + delta`` for every S, so
``log((p_lo - delta) / p'_hi)`` is, with probability at least ``1 - alpha``, at most epsilon; a value above
the claimed epsilon flags a bug (e.g. noise calibrated to the wrong sensitivity).

Two audits of cvxdp's own mechanisms are built on it:

* :func:`audit_mechanism`: the bare noise plan, ``0 + xi`` against ``Delta + xi``;
* :func:`audit_input_perturbation`: one-shot input perturbation (issue 39), a release ``x + xi`` on two
  neighbouring data vectors through the caller's code path, tested with the honest mechanism's optimal statistic;
* :func:`audit_local_update`: the realised output of one round (one local update) of a whole
  :func:`cvxdp.solve` run on a one-agent box problem, ``f(x; d) = 0.5 (x - d)^2`` with ``d' = d + Delta``;
* :func:`audit_subsampled_update`: one subsampled local update (``sampling_rate``) of the party's own code path on an
  add/remove-one pair, against the plan's amplified claim.

Each takes ``broken=`` to build the broken twins the audit must catch: ``"half-sensitivity"`` (the noise is
calibrated to ``Delta / 2``) and ``"reused-seed"`` (every run uses the same random stream). The attacker
of both audits sees the target run and a *reference run* on public data (the noise seed discipline is the
mechanism's: fresh streams, or the same stream when broken), and tests two statistics, each at
``alpha / 2`` (Bonferroni): the target's output, and the target's output minus the reference's. A correct
mechanism's reference run is independent of the secret, so both statistics are post-processing of an
(epsilon, delta)-DP release; with a reused seed the difference is a deterministic function of the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import check_choice, check_float, check_int, fail
from ..families.consensus.node import ConsensusNode, RoundMessage
from ..families.solve import LinearizedADMM, solve  # the front door re-exports the default algorithm
from ..model import Agent, Node, PerExample, Sensitivity
from ..privacy import InputPerturbation, Perturbation
from ..run import SerialBackend
from .statistics import (  # noqa: F401 - the statistics were this module's first part until issue 49
    DEFAULT_QUANTILES,
    AuditResult,
    Sampler,
    clopper_pearson_lower,
    clopper_pearson_upper,
    empirical_epsilon,
    fixed_sampler,
    rounds_direction,
    rounds_ratio,
    transcript_statistic,
    two_statistics,
)

#: The broken twins of :func:`audit_mechanism` and :func:`audit_local_update`.
BROKEN = ("none", "half-sensitivity", "reused-seed")


# --------------------------------------------------------------------------- audits of cvxdp's mechanisms
def _check_mechanism(mechanism: object, owner: str) -> Any:
    if not isinstance(mechanism, Perturbation):
        raise fail("mechanism", owner, "a cvxdp.ObjectivePerturbation or cvxdp.OutputPerturbation",
                   type(mechanism).__name__)
    return mechanism.validate()


def _check_audit(owner: str, sensitivity: float, trials: int, seed: int, broken: str | None,
                 alpha: float) -> tuple[float, int, int, str, float]:
    d = check_float(sensitivity, "sensitivity", owner, 0.0, math.inf)
    n = check_int(trials, "trials", owner, 10)
    s = check_int(seed, "seed", owner, 0)
    b = check_choice("none" if broken is None else broken, "broken", owner, BROKEN)
    a = check_float(alpha, "alpha", owner, 0.0, 1.0)
    return d, n, s, b, a


def _run_seeds(seed: int, broken: str) -> list[int]:
    """Seeds of the runs on D, D' and the reference: fresh and distinct, or all ``seed`` when reused."""
    if broken == "reused-seed":
        return [seed] * 3
    return [int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(3)]


def _declared_agent(sensitivity: float, size: int, broken: str) -> Any:
    from types import SimpleNamespace

    declared = sensitivity / 2 if broken == "half-sensitivity" else sensitivity
    return SimpleNamespace(name="audit", layout=SimpleNamespace(size=size),
                           sensitivity=Sensitivity(l1=declared, l2=declared,
                                                   relation="d' = d + Delta (one coordinate)"))


def _quadratic_setup(mech: Any, owner: str, d: float, broken: str, rho: float, eta: float) -> tuple:
    """``(rho, eta, c, box bound, declared sensitivity, honest plan)`` of the through-solve audits.

    The box ``[-B, B]``, ``B = Delta / c + 3 s`` (s the noise spread in x), is sized from the correctly
    calibrated noise, and is the same for the broken twins.
    """
    r = check_float(rho, "rho", owner, 0.0, math.inf)
    e = check_float(eta, "eta", owner, 0.0, math.inf)
    c = r + e
    honest = mech.noise_plan(_declared_agent(d, 1, "none"), min_weight=c, separable=True, steps=1,
                             accountant="pld")
    spread = honest.scale / c if mech.placement == "objective" else honest.scale
    return r, e, c, d / c + 3.0 * spread, d / 2 if broken == "half-sensitivity" else d, honest


def audit_mechanism(mechanism: Any, *, sensitivity: float = 1.0, trials: int | None = None, seed: int = 0,
                    broken: str | None = None, alpha: float = 0.05) -> AuditResult:
    """Audit a mechanism's bare noise: ``0 + xi`` (D) against ``Delta + xi`` (D') in one coordinate.

    The noise plan is the mechanism's own for an agent declaring sensitivity ``Delta`` (projection weight
    1, so OutPert's output sensitivity is ``Delta`` too); each trial is one coordinate of one draw (the
    coordinates are i.i.d.). The release is :meth:`NoisePlan.perturb` (for ``noise_source="opendp"``
    OpenDP's own release of the input). See the module docstring for the statistics and the reference run.

    Parameters
    ----------
    mechanism : ObjectivePerturbation or OutputPerturbation
        The mechanism (its epsilon/delta are per step here).
    sensitivity : float
        ``Delta``: the true shift between D and D', > 0.
    trials : int, optional
        Samples per input (>= 10); default 1,000,000 for numpy noise, 100,000 for OpenDP noise.
    seed : int
        Root seed of the audit: the runs on D, D' and the reference draw from distinct children of
        ``SeedSequence(seed)`` (all from ``default_rng(seed)`` when ``broken="reused-seed"``).
    broken : {None, "none", "half-sensitivity", "reused-seed"}
        The broken twin to audit instead: noise calibrated to ``Delta / 2``, or one random stream reused
        by every run.
    alpha : float
        Overall failure probability of the lower bound.

    Returns
    -------
    AuditResult
        ``claimed`` is the plan's per-step epsilon (``delta`` its delta); ``violated`` flags a refuted claim.
    """
    owner = "audit_mechanism"
    mech = _check_mechanism(mechanism, owner)
    if trials is None:
        trials = 100_000 if mech.noise_source == "opendp" else 1_000_000
    d, n, s, b, a = _check_audit(owner, sensitivity, trials, seed, broken, alpha)
    plan = mech.noise_plan(_declared_agent(d, 1, b), min_weight=1.0, separable=True, steps=1,
                           accountant="pld")
    seeds = _run_seeds(s, b)
    if b == "reused-seed":
        gens = [np.random.default_rng(s) for _ in seeds]
    else:
        gens = [np.random.default_rng(x) for x in seeds]
    zero, shift = np.zeros(n), np.full(n, d)
    out, out_prime, ref = (plan.perturb(g, x) for g, x in zip(gens, (zero, shift, zero)))
    details = {"mechanism": mech.short_name, "mode": "mechanism", "broken": b, "sensitivity": d,
               "declared_sensitivity": plan.sensitivity, "noise": plan.noise, "noise_scale": plan.scale,
               "noise_source": plan.noise_source, "seed": s, "run_seeds": seeds}
    return two_statistics(out, out_prime, ref, delta=plan.delta, alpha=a, claimed=plan.epsilon, seed=s,
                           details=details)


def audit_local_update(mechanism: Any, *, sensitivity: float = 1.0, trials: int = 20_000, seed: int = 0,
                       broken: str | None = None, rho: float = 1.0, eta: float = 1.0,
                       alpha: float = 0.05) -> AuditResult:
    """Audit the realised output of one round of :func:`cvxdp.solve` (one local update, J = 1).

    Problem: one agent, ``f(x; d) = 0.5 (x - d)^2`` on the box ``[-B, B]`` with ``d = 0`` (D) or
    ``d' = Delta`` (D'), gradient sensitivity ``Delta``, everything shared; ``B = Delta / c + 3 s``
    with ``c = eta + rho`` and ``s`` the spread of the noise in x (``scale / c`` for ObjPert, ``scale`` for
    OutPert), so the projection clips the tails. Each run is
    ``cvxdp.solve([agent], algorithm=LinearizedADMM(rho, eta, local_updates=1, rounds=1), privacy=mechanism,
    seed=...)`` and the statistic is the agent's communicated ``result.local[agent]``.

    The ``trials`` replicas are packed as the coordinates of one agent: the gradient, the weights ``c``, the
    box projection and the noise are all coordinate-wise and the noise coordinates i.i.d., so coordinate i
    of one run has exactly the distribution of a one-coordinate run (coordinate 0 *is* the one-coordinate
    run with the same seed), and the declared sensitivity is that of one replica. The claimed epsilon is the
    one the run's own privacy ledger records (basic composition over its single step).

    Parameters
    ----------
    mechanism : ObjectivePerturbation or OutputPerturbation
        The mechanism passed to ``cvxdp.solve``.
    sensitivity : float
        ``Delta``, > 0.
    trials : int
        Replicas per input (>= 10). One run of 20,000 takes about 0.4 s (three runs per audit).
    seed : int
        Root seed: the runs on D, D' and the reference use distinct seeds drawn from ``SeedSequence(seed)``,
        or all use ``seed`` when ``broken="reused-seed"``.
    broken : {None, "none", "half-sensitivity", "reused-seed"}
        Broken twin: the agent declares ``Delta / 2``, or every run reuses the same seed.
    rho, eta : float
        Penalty and proximal weight of the local update.
    alpha : float
        Overall failure probability of the lower bound.

    Returns
    -------
    AuditResult
    """
    import cvxpy as cp

    owner = "audit_local_update"
    mech = _check_mechanism(mechanism, owner)
    d, n, s, b, a = _check_audit(owner, sensitivity, trials, seed, broken, alpha)
    r, e, c, bound, declared, _ = _quadratic_setup(mech, owner, d, b, rho, eta)
    x = cp.Variable(n, name="x")
    data = cp.Parameter(n, name="d", value=np.zeros(n))
    agent = Agent("audit", 0.5 * cp.sum_squares(x - data), [x >= -bound, x <= bound], shared={"x": x},
                  gradient=lambda u: u - data.value,
                  sensitivity=Sensitivity(l1=declared, l2=declared,
                                          relation="d' = d + Delta (per replica coordinate)"))
    algorithm = LinearizedADMM(rho=r, eta=e, local_updates=1, rounds=1)
    seeds = _run_seeds(s, b)
    outputs, claims = [], []
    for value, run_seed in zip((0.0, d, 0.0), seeds):
        data.value = np.full(n, value)
        res = solve([agent], algorithm=algorithm, privacy=mech, seed=run_seed, accountant="pld")
        outputs.append(np.asarray(res.local["audit"], dtype=float))
        claims.append(res.ledger.spent("audit", "basic"))
    eps_claim, delta_claim = max(claims)
    plan = mech.noise_plan(agent, min_weight=c, separable=True, steps=1, accountant="pld")
    details = {"mechanism": mech.short_name, "mode": "solve", "broken": b, "sensitivity": d,
               "declared_sensitivity": declared, "noise": plan.noise, "noise_scale": plan.scale,
               "noise_source": plan.noise_source, "rho": r, "eta": e, "box": [-bound, bound],
               "seed": s, "run_seeds": seeds,
               "boundary_fraction": float(np.mean(np.abs(outputs[0]) >= bound * (1 - 1e-12)))}
    return two_statistics(outputs[0], outputs[1], outputs[2], delta=delta_claim, alpha=a, claimed=eps_claim,
                           seed=s, details=details)


# --------------------------------------------------------------------------- everything a node releases
def _recording_backend() -> Any:
    """A serial backend that keeps everything the nodes' ``step`` returns (their releases), round by round.

    ``backend.releases`` is a list (one entry per round) of the :class:`~cvxdp.model.node.Release` objects of
    every node; ``backend.sent`` the same as lists of the released arrays (consensus: ``E_p z_p``);
    ``backend.declared`` what the nodes answered to :meth:`~cvxdp.model.Node.declare` (their public declarations,
    read once before round 1). With the agents' :class:`~cvxdp.model.Declaration` objects these are everything a
    coordinator receives, so the public view can be replayed from them (tests/contract/test_public_view.py).
    """
    class RecordingBackend(SerialBackend):
        def __init__(self) -> None:
            super().__init__()
            self.releases: list[list[Any]] = []
            self.sent: list[list[np.ndarray]] = []
            self.declared: list[Any] = []

        def call(self, method, args=None, *, round=None):  # type: ignore[no-untyped-def]
            results = super().call(method, args, round=round)
            if method is Node.declare:
                self.declared = list(results)
            if method is Node.step:
                self.releases.append(list(results))
                self.sent.append([np.concatenate([np.ravel(a) for a in rel.arrays.values()]).copy()
                                  for rel in results])
            return results

    return RecordingBackend()


#: The problems of :func:`audit_release`: the data shift the gradient ("shift") or its curvature ("curvature").
AUDIT_PROBLEMS = ("shift", "curvature")


def _release_agent(kind: str, size: int, bound: float, declared: float) -> tuple[Agent, Any]:
    """The agent of :func:`audit_release`'s ``kind`` of problem on ``size`` coordinates, and its data parameter."""
    import cvxpy as cp

    x = cp.Variable(size, name="x")
    data = cp.Parameter(size, name="d", value=np.zeros(size), nonneg=kind == "curvature")
    if kind == "shift":
        agent = Agent("audit", 0.5 * cp.sum_squares(x - data), [x >= -bound, x <= bound], shared={"x": x},
                      gradient=lambda u: u - data.value,
                      sensitivity=Sensitivity(l1=declared, l2=declared,
                                              relation="d' = d + Delta w per replica (k coordinates)"))
    else:  # f = (1 + s) x^2 / 2 with s = 0 or Delta / B: the gradient moves by s |x| <= Delta on the box
        agent = Agent("audit", 0.5 * cp.sum(cp.multiply(1.0 + data, cp.square(x))), [x >= -bound, x <= bound],
                      shared={"x": x}, gradient=lambda u: (1.0 + data.value) * u,
                      sensitivity=Sensitivity(l1=declared, l2=declared,
                                              relation="curvature 1 + s, s' = s + Delta / B per replica"))
    return agent, data


def _rounds_statistics(profiles: list[np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The curvature problem's two statistics of the rounds jointly, on D and D': the combination of rounds that
    varies least over the reference run's replicas (``profiles[2]``), and the rounds' ratio (a fixed function of the
    release)."""
    u = rounds_direction(profiles[2])
    return {"rounds": (u @ profiles[0], u @ profiles[1]),
            "ratio": (rounds_ratio(profiles[0]), rounds_ratio(profiles[1]))}


def _recorded_run(agent: Agent, algorithm: Any, mech: Any, seed: int, shape: tuple[int, int],
                  ) -> tuple[np.ndarray, tuple[float, float]]:
    """One run's transcript (rounds x replicas x coordinates of what the node sent) and its ledger's PLD claim."""
    backend = _recording_backend()
    res = solve([agent], algorithm=algorithm, privacy=mech, seed=seed, accountant="pld", backend=backend)
    transcript = np.stack([sent[0] for sent in backend.sent]).reshape(len(backend.sent), *shape)
    return transcript, (res.privacy["worst"]["pld"], res.privacy["target_delta"])


def audit_release(mechanism: Any, *, rounds: int = 3, coordinates: int = 2, sensitivity: float = 1.0,
                  trials: int = 20_000, seed: int = 0, broken: str | None = None, rho: float = 1.0,
                  eta: float = 1.0, alpha: float = 0.05, problem: str = "shift") -> AuditResult:
    """Audit everything a node releases over ``rounds`` rounds of :func:`cvxdp.solve` against the run's ledger.

    Problem: one agent whose replicas each hold ``k = coordinates`` shared coordinates,
    ``f(x; d) = 0.5 ||x - d||^2`` on a box; D has ``d = 0``, D' moves every replica's ``d`` by ``Delta w``
    with ``w`` an extreme point of the unit q-ball (q = 2, Gaussian: ``w = 1/sqrt(k)``, spread over every
    released coordinate; q = 1, Laplace: ``w = e_1``, where a linear statistic of Laplace noise is
    strongest). The runs on D, D' and a reference run on D use the mechanism's seed discipline (distinct
    seeds; one seed for ``broken="reused-seed"``; OpenDP ignores seeds). A recording backend keeps every
    message ``E z`` of every round; the statistics are :func:`transcript_statistic` over all rounds and
    coordinates and its difference with the reference run's, each at ``alpha / 2``. The claim is the run's own
    ledger: its PLD epsilon at the ledger's target delta over all ``rounds`` steps.

    ``problem="curvature"`` (one coordinate, ``rounds >= 2``): ``f(x; s) = (1 + s) x^2 / 2`` on the box with
    ``s = 0`` (D) or ``s' = Delta / B`` (D'), so the gradient moves by ``s' |x| <= Delta``. The start is 0, so the
    data act only through the iterates, multiplying what the noise put there: a noise draw reused every round then
    makes the rounds' releases proportional with a data-dependent ratio. Two more statistics (all four at
    ``alpha / 4``) use the rounds jointly: the *rounds* combination ``sum_r u_r release_r`` with ``u`` from
    :func:`rounds_direction` of the reference run, which cancels a reused draw, and the *ratio*
    :func:`rounds_ratio` (round 2's release over round 1's), a fixed function of the release that is one
    data-dependent constant under a reused draw and that, unlike the rounds combination, the replicas clipped at
    the box do not blur (it is what refutes objective perturbation's Gaussian twin;
    tests/audits/test_mutations.py). On the shift problem a reused draw of objective perturbation is
    indistinguishable from a shift of the data, so no statistic can refute it there.

    Parameters
    ----------
    mechanism : ObjectivePerturbation or OutputPerturbation
    rounds : int
        Rounds of the run (J = 1), >= 1.
    coordinates : int
        Released coordinates per replica, >= 1.
    sensitivity : float
        ``Delta``, > 0 (the replica's gradient moves by ``Delta`` in the mechanism's norm).
    trials : int
        Replicas per input (packed as the agent's coordinates; the problem, the box and the noise are
        separable by coordinate, so replicas are independent).
    seed, broken, rho, eta, alpha
        As in :func:`audit_local_update`.
    problem : {"shift", "curvature"}
        What the neighbour's data move: the gradient's offset (default) or its curvature (see above). The
        curvature problem cannot see the half-sensitivity twin (its releases are linear in the noise, so halving
        the noise rescales D's and D''s runs alike) and refuses it.

    Returns
    -------
    AuditResult
        ``claimed``/``delta``: the run's composed (PLD) claim; ``details["rounds"]``, ``["coordinates"]``,
        ``["problem"]``.
    """
    owner = "audit_release"
    mech = _check_mechanism(mechanism, owner)
    d, n, s, b, a = _check_audit(owner, sensitivity, trials, seed, broken, alpha)
    R = check_int(rounds, "rounds", owner, 1)
    k = check_int(coordinates, "coordinates", owner, 1)
    kind = check_choice(problem, "problem", owner, AUDIT_PROBLEMS)
    if kind == "curvature" and (k != 1 or R < 2):
        raise fail("coordinates", owner, "coordinates=1 and rounds >= 2 with problem='curvature'", (k, R))
    if kind == "curvature" and b == "half-sensitivity":
        # every release there is linear in the noise: halving it rescales the runs on D and D' alike, which no
        # threshold event sees (ObjL 0.065 against a claim of 1.0, ObjG 0: tests/audits/test_release_checks.py)
        raise fail("broken", owner, "'none' or 'reused-seed' with problem='curvature' (the half-sensitivity twin "
                   "is audited on problem='shift')", b)
    r, e, c, bound, declared, honest = _quadratic_setup(mech, owner, d, b, rho, eta)
    # the neighbour's shift: an extreme point of the q-ball (Laplace: one coordinate; Gaussian: all of them)
    w = np.eye(k)[0] if mech.q == 1 else np.full(k, 1.0 / math.sqrt(k))
    agent, data = _release_agent(kind, n * k, bound, declared)
    algorithm = LinearizedADMM(rho=r, eta=e, local_updates=1, rounds=R)
    seeds = _run_seeds(s, b)
    stats_, profiles, claims = [], [], []
    for value, run_seed in zip((0.0, 1.0, 0.0), seeds):
        data.value = np.tile(value * d * w, n) if kind == "shift" else np.full(n, value * d / bound)
        transcript, claim = _recorded_run(agent, algorithm, mech, run_seed, (n, k))
        stats_.append(transcript_statistic(transcript, w))
        if kind == "curvature":  # each replica's per-round statistic (for the rounds direction below)
            profiles.append(np.einsum("rik,k->ri", transcript, w))
        claims.append(claim)
    eps_claim, delta_claim = max(claims)
    details = {"mechanism": mech.short_name, "mode": "release", "broken": b, "sensitivity": d,
               "declared_sensitivity": declared, "noise": honest.noise, "noise_source": mech.noise_source,
               "rounds": R, "coordinates": k, "rho": r, "eta": e, "box": [-bound, bound], "seed": s,
               "run_seeds": seeds, "problem": kind}
    extra = _rounds_statistics(profiles) if kind == "curvature" else None
    return two_statistics(stats_[0], stats_[1], stats_[2], delta=delta_claim, alpha=a, claimed=eps_claim,
                           seed=s, details=details, extra=extra)


# --------------------------------------------------------------------------- one-shot input perturbation (issue 39)
#: ``release(values, rng) -> noisy values``: one perturbed release of a data vector
Release = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def audit_input_perturbation(mechanism: InputPerturbation, values: np.ndarray, values_prime: np.ndarray, *,
                             l1: float, l2: float, release: Release | None = None, trials: int = 50_000,
                             seed: int = 0, alpha: float = 0.05) -> AuditResult:
    """Empirical epsilon of one input-perturbation release on neighbouring vectors ``values`` / ``values_prime``.

    Parameters
    ----------
    mechanism : InputPerturbation
        The mechanism whose claim (epsilon, delta) is audited.
    values, values_prime : ndarray
        Neighbouring data vectors (their difference within the declared sensitivity ``l1`` / ``l2``).
    l1, l2 : float
        The declared sensitivities (the honest noise scale of the statistic comes from them).
    release : callable(values, rng) -> ndarray, optional
        The release under audit; default ``mechanism.perturb(values, l1=l1, l2=l2, rng=rng)[0]``.
    trials : int
        Releases drawn on each side.
    seed : int
        Seed of the audit's generator.
    alpha : float
        Failure probability of the lower bound.

    Returns
    -------
    AuditResult
        ``claimed`` is the mechanism's epsilon; ``details`` names the statistic, the sensitivities and the scale.
    """
    n = check_int(trials, "trials", "audit_input_perturbation", 1)
    x, xp = np.asarray(values, dtype=float), np.asarray(values_prime, dtype=float)
    if x.shape != xp.shape or x.ndim != 1:
        raise fail("values_prime", "audit_input_perturbation", f"a 1-D vector of the shape of values {x.shape}",
                   f"shape {xp.shape}")
    if release is None:
        def release(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return mechanism.perturb(v, l1=l1, l2=l2, rng=rng)[0]
    noise = mechanism.distribution

    def statistic(y: np.ndarray) -> float:
        # rounded: the Laplace ratio has atoms (at +-||x - x'||_1) that rounding errors would split into events
        return round(noise.audit_statistic(y, x, xp), 12)

    def sampler(v: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
        return lambda rng, k: np.array([statistic(np.asarray(release(v, rng), dtype=float)) for _ in range(k)])

    delta = noise.claim_delta(mechanism.delta)
    res = empirical_epsilon(sampler(x), sampler(xp), trials=n, delta=delta, alpha=alpha,
                            rng=np.random.default_rng(seed), claimed=mechanism.epsilon)
    details = {"mechanism": mechanism.name, "statistic": noise.statistic, "l1": float(l1), "l2": float(l2),
               "scale": mechanism.scale(l1, l2), "seed": seed}
    return AuditResult(res.epsilon_lower, res.claimed, res.best_threshold, res.counts, res.trials, res.delta,
                       res.alpha, statistic="output" if res.epsilon_lower > 0 else None, details=details)


# --------------------------------------------------------------------------- subsampled local updates (issue 39)
# Audit of subsampled local updates (``sampling_rate`` of ObjG / OutG): is the amplification real?
#
# :func:`audit_subsampled_update` runs the party's own code path (:class:`~cvxdp.families.consensus.node.ConsensusNode`
# ``step`` with a subsampled :class:`~cvxdp.privacy.NoisePlan`) on two neighbouring data sets under add/remove one
# record and bounds epsilon from below with :func:`~cvxdp.audits.release.empirical_epsilon`. The claim is the plan's own
# per-step ``(epsilon, delta)``, the one the ledger composes (``PoissonSampledDpEvent``).
#
# Problem: one agent, one coordinate on the box ``[-B, B]``. D holds ``records`` records whose per-example gradients are
# 0; D' adds one record whose per-example gradient is ``+C`` (the clip: the largest a record can move the clipped sum).
# The subsampled gradient ``(1/(q N)) sum_{i in B} clip(g_i, C)`` is then 0 on D and ``C / (q N)`` on D' exactly when the
# added record is sampled (probability ``q``): the worst case of the accounting's add/remove-one pair, so a correct plan
# is tight and a party that does not sample (the full batch with the sampled claim) is refuted
# (``tests/audits/test_sampling.py`` applies that mutation to the real code path). The added record is D's first: a
# Poisson sample does not care where it sits, but a party that takes a fixed batch from the front (no randomness, no
# amplification) takes it every time and is refuted too; a fixed batch that never holds it is private for this pair,
# and the sampler's own test (tests/model/test_agent.py) checks every record's inclusion rate.
def _sampled_agent(records: int, added: bool, total: int, bound: float, regularizer: float = 0.0) -> Agent:
    """D (``added=False``: ``records`` zero-gradient records) or D' (one more record of gradient ``+clip``, the
    first), with a public term ``(regularizer/2) (x - 1)^2`` (:attr:`PerExample.public_gradient`; its gradient at the step's start
    ``x = 0`` is ``-regularizer``) when ``regularizer > 0``."""
    grads = np.zeros(records + int(added))
    if added:
        grads[0] = np.inf  # clipped to +C whatever C is; first, where a fixed batch from the front would hold it

    def clipped_sum(u: np.ndarray, index: np.ndarray, clip: float) -> np.ndarray:
        return np.array([float(np.clip(grads[index], -clip, clip).sum())])

    import cvxpy as cp

    x = cp.Variable(1, name="x")
    return Agent("audit", 0.0 * cp.sum(x), [x >= -bound, x <= bound], shared={"x": x},
                 gradient=lambda u: np.zeros(1),
                 sensitivity=Sensitivity(relation="add/remove one record (subsampled audit)"),
                 per_example=PerExample(records=records + int(added), total=total, clipped_sum=clipped_sum,
                                        public_gradient=(lambda u: regularizer * (u - 1.0)) if regularizer > 0 else None))


def audit_subsampled_update(mechanism: Any, *, records: int = 99, trials: int = 20_000, seed: int = 0,
                            rho: float = 1.0, eta: float = 1.0, alpha: float = 0.05,
                            regularizer: float = 0.0) -> AuditResult:
    """Audit one subsampled local update of ``mechanism`` (ObjG or OutG with ``sampling_rate``) against its claim.

    Parameters
    ----------
    mechanism : ObjectivePerturbation or OutputPerturbation
        Gaussian, ``calibrate="total"``, with ``sampling_rate`` and ``clip_norm``; its ``epsilon``/``delta`` are the
        budget of the one audited step (``steps=1``).
    records : int
        Records of D (D' has one more); the public normaliser is ``N = records + 1``.
    trials : int
        Local updates run on each of D and D' (one node each, fresh draws from its generator every step).
    seed : int
        Root of the two nodes' seeds (distinct children).
    rho, eta : float
        The step's penalty and proximal weight (``c = rho + eta``).
    alpha : float
        Failure probability of the lower bound.
    regularizer : float
        ``>= 0``: the agent's objective also holds ``(regularizer/2) (x - 1)^2``, a part that reads no record, declared as
        :attr:`~cvxdp.PerExample.public_gradient` (added to every estimate on D and D' alike).

    Returns
    -------
    AuditResult
        ``claimed``/``delta``: the plan's per-step claim; ``details``: sampling rate, clip, noise multiplier, box.
    """
    owner = "audit_subsampled_update"
    mech = _check_mechanism(mechanism, owner)
    if getattr(mech, "sampling_rate", None) is None:
        raise fail("mechanism", owner, "a mechanism with sampling_rate (subsampled local updates)", mech.describe())
    n = check_int(records, "records", owner, 1)
    t = check_int(trials, "trials", owner, 10)
    s = check_int(seed, "seed", owner, 0)
    r = check_float(rho, "rho", owner, 0.0, np.inf)
    e = check_float(eta, "eta", owner, 0.0, np.inf)
    a = check_float(alpha, "alpha", owner, 0.0, 1.0)
    reg = check_float(regularizer, "regularizer", owner, 0.0, np.inf, closed="left")
    total, c = n + 1, r + e
    plan = mech.noise_plan(_sampled_agent(n, False, total, 1.0), min_weight=c, separable=True, steps=1, accountant="pld")
    grad_sens = float(mech.clip_norm) / (float(mech.sampling_rate) * total)
    spread = plan.scale / c if mech.placement == "objective" else plan.scale
    bound = (grad_sens + reg) / c + 10.0 * spread  # wide: the box (post-processing) hardly ever clips the release
    algorithm = LinearizedADMM(rho=r, eta=e, local_updates=1, rounds=1)
    outputs = []
    for added, child in zip((False, True), np.random.SeedSequence(s).spawn(2)):
        node = ConsensusNode(_sampled_agent(n, added, total, bound, reg), child, algorithm, mechanism=mech,
                             accountant="pld")
        msg = RoundMessage(round=1, bw=np.zeros(1), rho=r, eta=e, plan=plan, placement=mech.placement)
        node.charge(msg)  # the party's own checks of the plan (its sensitivity and claim)
        out = np.empty(t)
        for k in range(t):
            node.z, node.lam = np.zeros(1), np.zeros(1)
            out[k] = node.step(msg).arrays["ez"][0]
        outputs.append(out)
    res = empirical_epsilon(fixed_sampler(np.sort(outputs[0])), fixed_sampler(np.sort(outputs[1])), trials=t, delta=plan.delta,
                            alpha=a, rng=np.random.default_rng(s), claimed=plan.epsilon)
    details = {"mechanism": mech.short_name, "sampling_rate": plan.sampling_rate, "clip_norm": plan.clip_norm,
               "noise_multiplier": plan.noise_multiplier, "records": n, "rho": r, "eta": e, "box": [-bound, bound],
               "regularizer": reg,
               "event": "PoissonSampledDpEvent", "seed": s}
    return AuditResult(res.epsilon_lower, plan.epsilon, res.best_threshold, res.counts, t, plan.delta, a,
                       "output" if res.epsilon_lower > 0 else None, details)
