"""Audit of subsampled local updates (``sampling_rate`` of ObjG / OutG): is the amplification real?

:func:`audit_subsampled_update` runs the party's own code path (:class:`~cvxdp.families.consensus.node.ConsensusNode`
``step`` with a subsampled :class:`~cvxdp.privacy.NoisePlan`) on two neighbouring data sets under add/remove one
record and bounds epsilon from below with :func:`~cvxdp.audits.release.empirical_epsilon`. The claim is the plan's own
per-step ``(epsilon, delta)``, the one the ledger composes (``PoissonSampledDpEvent``).

Problem: one agent, one coordinate on the box ``[-B, B]``. D holds ``records`` records whose per-example gradients are
0; D' adds one record whose per-example gradient is ``+C`` (the clip: the largest a record can move the clipped sum).
The subsampled gradient ``(1/(q N)) sum_{i in B} clip(g_i, C)`` is then 0 on D and ``C / (q N)`` on D' exactly when the
added record is sampled (probability ``q``): the worst case of the accounting's add/remove-one pair, so a correct plan
is tight and a party that does not sample (the full batch with the sampled claim) is refuted
(``tests/audits/test_sampling.py`` applies that mutation to the real code path).
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np

from ..errors import check_float, check_int, fail
from ..families.consensus.node import ConsensusNode, RoundMessage
from ..families.consensus.params import LinearizedADMM
from ..model import Agent, PerExample, Sensitivity
from .release import AuditResult, _check_mechanism, _fixed, empirical_epsilon


def _agent(records: int, added: bool, total: int, bound: float) -> Agent:
    """D (``added=False``: ``records`` zero-gradient records) or D' (one more record of gradient ``+clip``)."""
    grads = np.zeros(records + int(added))
    if added:
        grads[-1] = np.inf  # clipped to +C whatever C is

    def clipped_sum(u: np.ndarray, index: np.ndarray, clip: float) -> np.ndarray:
        return np.array([float(np.clip(grads[index], -clip, clip).sum())])

    x = cp.Variable(1, name="x")
    return Agent("audit", 0.0 * cp.sum(x), [x >= -bound, x <= bound], shared={"x": x},
                 gradient=lambda u: np.zeros(1),
                 sensitivity=Sensitivity(relation="add/remove one record (subsampled audit)"),
                 per_example=PerExample(records=records + int(added), total=total, clipped_sum=clipped_sum))


def audit_subsampled_update(mechanism: Any, *, records: int = 99, trials: int = 20_000, seed: int = 0,
                            rho: float = 1.0, eta: float = 1.0, alpha: float = 0.05) -> AuditResult:
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
    total, c = n + 1, r + e
    plan = mech.noise_plan(_agent(n, False, total, 1.0), min_weight=c, separable=True, steps=1, accountant="pld")
    grad_sens = float(mech.clip_norm) / (float(mech.sampling_rate) * total)
    spread = plan.scale / c if mech.placement == "objective" else plan.scale
    bound = grad_sens / c + 10.0 * spread  # wide: the box (post-processing) hardly ever clips the release
    algorithm = LinearizedADMM(rho=r, eta=e, local_updates=1, rounds=1)
    outputs = []
    for added, child in zip((False, True), np.random.SeedSequence(s).spawn(2)):
        node = ConsensusNode(_agent(n, added, total, bound), child, algorithm, private=True, mechanism=mech)
        msg = RoundMessage(round=1, bw=np.zeros(1), rho=r, eta=e, plan=plan, placement=mech.placement)
        node.charge(msg)  # the party's own checks of the plan (its sensitivity and claim)
        out = np.empty(t)
        for k in range(t):
            node.z, node.lam = np.zeros(1), np.zeros(1)
            out[k] = node.step(msg).arrays["ez"][0]
        outputs.append(out)
    res = empirical_epsilon(_fixed(np.sort(outputs[0])), _fixed(np.sort(outputs[1])), trials=t, delta=plan.delta,
                            alpha=a, rng=np.random.default_rng(s), claimed=plan.epsilon)
    details = {"mechanism": mech.short_name, "sampling_rate": plan.sampling_rate, "clip_norm": plan.clip_norm,
               "noise_multiplier": plan.noise_multiplier, "records": n, "rho": r, "eta": e, "box": [-bound, bound],
               "event": "PoissonSampledDpEvent", "seed": s}
    return AuditResult(res.epsilon_lower, plan.epsilon, res.best_threshold, res.counts, t, plan.delta, a,
                       "output" if res.epsilon_lower > 0 else None, details)
