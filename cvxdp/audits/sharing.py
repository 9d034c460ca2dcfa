"""Audits of ADMM sharing's releases (SPEC §5): one release for neighbouring feature blocks, and a party's
whole uplink over a run of :func:`cvxdp.solve`. Imports flow one way: this module -> engine -> families ->
:mod:`cvxdp.model.vertical`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidParameterError, check_choice, check_float, check_int, fail
from ..families.sharing import ADMMSharing, SharingGaussian, as_mechanism, party_plan
from ..families.solve import solve
from ..model import PartyUpdate, VerticalParty
from .release import BROKEN, _run_seeds
from .statistics import empirical_epsilon, transcript_statistic, two_statistics


# --------------------------------------------------------------------------- auditing one release
def party_release_mean(party: VerticalParty, *, y: np.ndarray, s: np.ndarray, rho: float, lam: float,
                       solvers: tuple[str, ...] = ("CLARABEL", "ECOS")) -> np.ndarray:
    """The noiseless part ``D_m x_m`` of one release, for public inputs ``y`` and ``s_m = sum_{k!=m} q_k - z``
    (the x-update (6) exactly as the round loop runs it)."""
    party.check()
    update = PartyUpdate(party, float(rho), float(lam), tuple(solvers))
    x, _, _ = update.solve(party.data.T @ (np.asarray(y, dtype=float) + rho * np.asarray(s, dtype=float)), 0)
    return party.data @ x


def audit_sharing(party: VerticalParty, neighbour: np.ndarray, mechanism: SharingGaussian, *, y: np.ndarray,
                  s: np.ndarray, rho: float, lam: float, parties: int, b1: float | None = None,
                  trials: int = 1_000_000, seed: int = 0, alpha: float = 0.05,
                  statistic: str = "projection") -> Any:
    """Empirical lower bound on the epsilon of one sharing release for neighbouring feature blocks.

    The release is ``q = D_m x_m(D_m) + xi`` against ``q' = D'_m x_m(D'_m) + xi'`` with ``D'_m = neighbour``
    (e.g. one row replaced), the same public inputs ``y, s`` and the noise plan the round loop would use
    (:func:`party_plan`, calibrated on ``party``). Each trial is one release reduced to a scalar: the
    projection on the direction of the mean difference (the most powerful linear test; a post-processing
    of the release) or, with ``statistic="coordinate"``, the coordinate that moves most. The counts go to
    :func:`cvxdp.audits.release.empirical_epsilon`; ``claimed`` is the plan's per-epoch epsilon and
    ``details`` holds the realised shift ``||mean - mean'||`` beside the sensitivity the plan assumed.
    """
    from dataclasses import replace as _replace

    mech = as_mechanism(mechanism)
    if mech is None:
        raise fail("mechanism", "audit_sharing", "a cvxdp.SharingGaussian", mechanism)
    if not party.closed_form:
        raise InvalidParameterError("audit_sharing supports parties with the default regulariser and the ball only.")
    other = VerticalParty(party.name, np.asarray(neighbour, dtype=float), bound=party.bound)
    if other.data.shape != party.data.shape:
        raise fail("neighbour", "audit_sharing", f"an array of shape {party.data.shape}", other.data.shape)
    party.check_private(mech.sensitivity)
    other.check_private(mech.sensitivity)
    b1 = float(party.bound) if b1 is None else float(b1)
    plan, info = party_plan(mech, party, rho=rho, lam=lam, b1=b1, parties=parties)
    mean = party_release_mean(party, y=y, s=s, rho=rho, lam=lam)
    mean_prime = party_release_mean(other, y=y, s=s, rho=rho, lam=lam)
    diff = mean - mean_prime
    shift = float(np.linalg.norm(diff))
    if statistic == "projection":
        u = diff / shift if shift > 0 else np.eye(1, len(diff), 0)[0]
    elif statistic == "coordinate":
        u = np.eye(1, len(diff), int(np.argmax(np.abs(diff))))[0]
    else:
        raise fail("statistic", "audit_sharing", "'projection' or 'coordinate'", statistic)
    n_samples = len(mean)

    def sampler(center: np.ndarray):
        def draw(rng: np.random.Generator, n: int) -> np.ndarray:
            out = np.empty(n)
            chunk = max(1, 2_000_000 // n_samples)
            for a in range(0, n, chunk):  # releases in chunks: plan.perturb of every trial's N-vector
                b = min(n, a + chunk)
                noise = plan.sample(rng, (b - a) * n_samples).reshape(b - a, n_samples)
                out[a:b] = (center + noise) @ u
            return out
        return draw

    res = empirical_epsilon(sampler(mean), sampler(mean_prime), trials=trials, delta=plan.delta, alpha=alpha,
                            rng=np.random.default_rng(seed), claimed=plan.epsilon)
    details = {"mechanism": "SharingGaussian", "statistic": statistic, "realised_shift": shift,
               "declared_sensitivity": plan.sensitivity, "shift_over_sensitivity": shift / plan.sensitivity,
               "sigma": plan.scale, **{k: v for k, v in info.items() if k not in ("sensitivity", "sigma")}}
    return _replace(res, details=details, statistic=statistic)


def audit_sharing_release(parties: Sequence[VerticalParty], index: int, neighbour_row: np.ndarray,
                          mechanism: SharingGaussian, *, labels: np.ndarray, row: int = 0, epochs: int = 3,
                          rho: float = 1.0, lam: float = 0.1, trials: int = 400, seed: int = 0,
                          broken: str | None = None, alpha: float = 0.05) -> Any:
    """Audit everything party ``index`` sends over ``epochs`` epochs of :func:`cvxdp.solve`, against the ledger.

    D is ``parties`` as given; D' replaces row ``row`` of party ``index``'s features by ``neighbour_row`` (the
    sharing relation: one sample's feature row of D_m replaced). Each trial is three whole
    :class:`~cvxdp.ADMMSharing` runs with message recording: on D, on D' and a reference run on D, with
    seeds drawn from one ``SeedSequence(seed)`` (distinct per run; ``broken="reused-seed"`` gives the three
    runs of a trial one seed, the replay bug of a fixed default seed). The statistic is
    :func:`cvxdp.audits.release.transcript_statistic` of the party's predictions over every epoch along the
    changed sample (and its difference with the reference run's), each at ``alpha / 2``; the claim is the
    runs' own ledger: the worst party's PLD epsilon at the ledger's target delta. Trials cost three runs
    each (about 10 ms per run on a small instance), so this audit catches gross failures (replayed noise,
    a grossly wrong calibration) rather than small constant factors.
    """
    owner = "audit_sharing_release"
    mech = as_mechanism(mechanism)
    if mech is None:
        raise fail("mechanism", owner, "a cvxdp.SharingGaussian", mechanism)
    parties = list(parties)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(parties):
        raise fail("index", owner, f"an int in [0, {len(parties) - 1}]", index)
    target = parties[index]
    if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < target.data.shape[0]:
        raise fail("row", owner, f"an int in [0, {target.data.shape[0] - 1}]", row)
    new_row = np.asarray(neighbour_row, dtype=float)
    if new_row.shape != (target.data.shape[1],):
        raise fail("neighbour_row", owner, f"an array of shape ({target.data.shape[1]},)", new_row.shape)
    n = check_int(trials, "trials", owner, 10)
    s = check_int(seed, "seed", owner, 0)
    b = check_choice("none" if broken is None else broken, "broken", owner, BROKEN)
    a = check_float(alpha, "alpha", owner, 0.0, 1.0)
    features = target.data.copy()
    features[row] = new_row
    neighbour = VerticalParty(target.name, features, bound=target.bound)
    inputs = (parties, parties[:index] + [neighbour] + parties[index + 1:], parties)
    algorithm = ADMMSharing(rho=rho, lam=lam, epochs=epochs, labels=labels, record_messages=True)
    direction = np.eye(1, target.data.shape[0], row)[0]
    stats_ = np.empty((3, n))
    claims = []
    for i, child in enumerate(np.random.SeedSequence(s).spawn(n)):
        for j, (which, run_seed) in enumerate(zip(inputs, _run_seeds(int(child.generate_state(1)[0]), b))):
            res = solve(which, algorithm=algorithm, privacy=mech, seed=run_seed, accountant="pld")
            sent = [m.payload for m in res.messages if m.direction == "up" and m.sender == target.name]
            stats_[j, i] = transcript_statistic(np.stack(sent)[:, None, :], direction)[0]
            if i == 0:
                claims.append((res.privacy["worst"]["pld"], res.privacy["target_delta"]))
    eps_claim, delta_claim = max(claims)
    details = {"mechanism": "SharingGaussian", "mode": "release", "broken": b, "epochs": epochs, "party": target.name,
               "row": row, "rho": rho, "lam": lam, "seed": s}
    return two_statistics(stats_[0], stats_[1], stats_[2], delta=delta_claim, alpha=a, claimed=eps_claim, seed=s,
                           details=details)


__all__ = ["audit_sharing", "audit_sharing_release", "party_release_mean"]
