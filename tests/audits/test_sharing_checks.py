"""The sharing audits at their edges (cvxdp/audits/sharing.py), each checked against an independent computation.

* :func:`party_release_mean` is the x-update (6): the paper's subproblem solved with CVXPY here, and the second
  and third uplink messages of a noiseless :func:`cvxdp.solve` run recomputed from the downlink they answered.
* :func:`audit_sharing` projects each release on the unit direction of the mean difference (the first coordinate
  when the means coincide) and draws every trial from one generator in chunks: its result equals an unchunked
  computation with the same generator, also when the chunk loop runs several chunks.
* :func:`audit_sharing_release` reduces exactly the target party's uplink messages of the runs on D, on D' (the
  target's row replaced, the other parties unchanged) and of the reference run, with the documented seeds; the
  claim is the runs' own ledger. Its arguments are checked by name with their ranges, and its documented defaults
  are those of the signature (row 0, epochs 3, rho 1.0, lam 0.1, trials 400, seed 0).

Instances are tiny (a few samples, small noise so that a few trials give a positive bound, whose threshold then
reads the exact values) and seeded; the whole file runs in a few seconds.
"""

from __future__ import annotations

import inspect
import re
import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.audits.sharing import audit_sharing, audit_sharing_release, party_release_mean
from cvxdp.audits.statistics import empirical_epsilon, two_statistics
from cvxdp.errors import InvalidParameterError, SolverFailedError
from cvxdp.families.sharing import party_plan
from cvxdp_models.vertical import synthetic_parties

OWNER = "audit_sharing_release"
RHO, LAM = 1.0, 0.1


# --------------------------------------------------------------------------- party_release_mean: the x-update (6)
def paper_x_update(D, y, s, rho, lam, bound, extra=lambda x: ()):
    """Hu et al.'s (6) as written: ``argmin lam R(x) + y^T D x + rho/2 ||D x + s||^2`` over the ball (and
    ``extra(x)`` constraints), ``R = ||x||^2 / 2``; returns ``D x``."""
    x = cp.Variable(D.shape[1])
    objective = lam * 0.5 * cp.sum_squares(x) + y @ (D @ x) + rho / 2 * cp.sum_squares(D @ x + s)
    problem = cp.Problem(cp.Minimize(objective), [cp.norm(x, 2) <= bound, *extra(x)])
    problem.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)  # tight: a reference
    return D @ x.value


@pytest.mark.parametrize("bound", [10.0, 0.05])  # the ball inactive, then active
def test_party_release_mean_is_the_papers_x_update(bound):
    rng = np.random.default_rng(7)
    D = rng.normal(size=(5, 2))
    y, s = rng.normal(size=5), rng.normal(size=5)
    party = cvxdp.VerticalParty("m", D, bound=bound)
    got = party_release_mean(party, y=y, s=s, rho=0.7, lam=0.3)
    assert got == pytest.approx(paper_x_update(D, y, s, 0.7, 0.3, bound), abs=1e-6)


def test_party_release_mean_with_constraints_solves_with_the_given_solvers_and_names_round_0():
    rng = np.random.default_rng(8)
    D = rng.normal(size=(4, 2))
    y, s = rng.normal(size=4), rng.normal(size=4)
    x = cp.Variable(2)
    party = cvxdp.VerticalParty("c", D, x, bound=1.0, constraints=[x >= 0.1])
    got = party_release_mean(party, y=y, s=s, rho=RHO, lam=LAM)
    assert got == pytest.approx(paper_x_update(D, y, s, RHO, LAM, 1.0, lambda v: [v >= 0.1]), abs=1e-5)
    # outside any run: a failure of every solver names epoch 0 (the round loop counts epochs from 1)
    with pytest.raises(SolverFailedError, match="in epoch 0 ") as err:
        party_release_mean(party, y=y, s=s, rho=RHO, lam=LAM, solvers=("NO_SUCH_SOLVER",))
    assert err.value.round == 0 and err.value.agent == "c"


def test_party_release_mean_is_what_a_party_sends_in_the_round_loop():
    parties, labels = synthetic_parties(6, 2, 3, seed=1, bound=0.4)
    alg = cvxdp.ADMMSharing(rho=RHO, lam=LAM, epochs=3, labels=labels, record_messages=True)
    res = cvxdp.solve(parties, algorithm=alg, seed=0)  # noiseless: the uplink is D_m x_m exactly
    checked = 0
    for party in parties:
        def msg(epoch, direction, kind, name=party.name):
            (m,) = [m for m in res.messages if m.epoch == epoch and m.direction == direction and m.kind == kind
                    and name in (m.sender, m.receiver)]
            return m.payload
        for epoch in (2, 3):
            # s_m = sum_{k != m} q_k - z = (the broadcast residual) - (the party's own last uplink)
            s = msg(epoch, "down", "residual") - msg(epoch - 1, "up", "prediction")
            y = msg(epoch, "down", "dual")
            assert np.linalg.norm(s) > 0.1 and np.linalg.norm(y) > 0.01  # both inputs matter
            got = party_release_mean(party, y=y, s=s, rho=RHO, lam=LAM)
            assert got == pytest.approx(msg(epoch, "up", "prediction"), abs=1e-9)
            checked += 1
    assert checked == 6


def test_party_release_mean_takes_its_inputs_by_keyword_only():
    party = cvxdp.VerticalParty("m", np.eye(2), bound=1.0)
    with pytest.raises(TypeError):
        party_release_mean(party, np.zeros(2), np.ones(2), RHO, LAM)


# --------------------------------------------------------------------------- audit_sharing: one release
def pair(n=3, scale=0.5):
    """A party (N = n samples, 1 feature) and a neighbour with its first row scaled by ``scale``."""
    D = np.zeros((n, 1))
    D[0, 0] = 1.0
    D_prime = D.copy()
    D_prime[0, 0] = scale
    s = np.zeros(n)
    s[0] = 0.5
    return cvxdp.VerticalParty("m", D, bound=1.0), D_prime, np.zeros(n), s


def reference(party, neighbour, mech, *, y, s, trials, seed, alpha=0.05, direction=None):
    """audit_sharing's projection statistic drawn unchunked: one ``plan.sample`` of every trial at once."""
    plan, _ = party_plan(mech, party, rho=RHO, lam=LAM, b1=float(party.bound), parties=2)
    mean = party_release_mean(party, y=y, s=s, rho=RHO, lam=LAM)
    other = cvxdp.VerticalParty(party.name, neighbour, bound=party.bound)
    mean_prime = party_release_mean(other, y=y, s=s, rho=RHO, lam=LAM)
    u = direction if direction is not None else (mean - mean_prime) / np.linalg.norm(mean - mean_prime)

    def sampler(center):
        return lambda rng, n: (center + plan.sample(rng, n * len(center)).reshape(n, len(center))) @ u

    return empirical_epsilon(sampler(mean), sampler(mean_prime), trials=trials, delta=plan.delta, alpha=alpha,
                             rng=np.random.default_rng(seed), claimed=plan.epsilon)


def same_bound(res, ref):
    assert ref.epsilon_lower > 0 and ref.best_threshold is not None  # the threshold reads the exact draws
    assert res.epsilon_lower == pytest.approx(ref.epsilon_lower, rel=1e-12)
    assert res.best_threshold == pytest.approx(ref.best_threshold, rel=1e-12)
    assert res.counts == ref.counts and res.trials == ref.trials and res.claimed == ref.claimed


def test_audit_sharing_projects_on_the_unit_mean_difference_with_one_stream_of_draws():
    party, D_prime, y, s = pair()
    mech = cvxdp.SharingGaussian(sigma=0.05)
    res = audit_sharing(party, D_prime, mech, y=y, s=s, rho=RHO, lam=LAM, parties=2, trials=400, seed=3)
    assert 0.05 < res.details["realised_shift"] < 0.5  # not 1: a scaled direction would move the threshold
    same_bound(res, reference(party, D_prime, mech, y=y, s=s, trials=400, seed=3))


def test_audit_sharing_draws_every_trial_over_several_chunks():
    # 2_000_000 // 100_001 = 19 releases per chunk: 50 trials are drawn in chunks of 19, 19 and 12
    party, D_prime, y, s = pair(100_001)
    mech = cvxdp.SharingGaussian(sigma=0.005)
    res = audit_sharing(party, D_prime, mech, y=y, s=s, rho=RHO, lam=LAM, parties=2, trials=50, seed=5)
    same_bound(res, reference(party, D_prime, mech, y=y, s=s, trials=50, seed=5))


def test_audit_sharing_draws_one_release_per_chunk_beyond_two_million_samples():
    party, D_prime, y, s = pair(2_000_001)
    res = audit_sharing(party, D_prime, cvxdp.SharingGaussian(sigma=0.5), y=y, s=s, rho=RHO, lam=LAM, parties=2,
                        trials=2, seed=0)
    assert res.trials == 2 and res.details["realised_shift"] > 0
    # the unit vectors of the identical-neighbour fallback and of the coordinate statistic are one row, never an
    # N x N identity (29 TiB at this N: a MemoryError before the fix)
    res = audit_sharing(party, party.data.copy(), cvxdp.SharingGaussian(sigma=0.5), y=y, s=s, rho=RHO, lam=LAM,
                        parties=2, trials=2, seed=0)
    assert res.details["realised_shift"] == 0.0
    res = audit_sharing(party, D_prime, cvxdp.SharingGaussian(sigma=0.5), y=y, s=s, rho=RHO, lam=LAM, parties=2,
                        trials=2, seed=0, statistic="coordinate")
    assert res.statistic == "coordinate"


def test_audit_sharing_with_an_identical_neighbour_projects_on_the_first_coordinate():
    party, _, y, s = pair(1)
    mech = cvxdp.SharingGaussian(sigma=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no 0/0 direction
        res = audit_sharing(party, party.data.copy(), mech, y=y, s=s, rho=RHO, lam=LAM, parties=2, trials=200,
                            seed=1)
    assert res.details["realised_shift"] == 0.0 and res.details["shift_over_sensitivity"] == 0.0
    assert res.epsilon_lower == 0.0 and not res.violated
    # two samples whose means differ (0.3 apart): identical neighbours give a positive bound only by chance (at most
    # alpha); seed 947 is one of 4 seeds in 0..1999 where it does at alpha = 0.99 and 20 trials, so the threshold
    # reads the draws along e_0 (any other unit vector draws other values)
    D = np.array([[1.0], [0.3]])
    party = cvxdp.VerticalParty("m", D, bound=1.0)
    kw = dict(y=np.zeros(2), s=np.array([0.5, 0.2]), trials=20, seed=947, alpha=0.99)
    res = audit_sharing(party, D.copy(), mech, rho=RHO, lam=LAM, parties=2, **kw)
    same_bound(res, reference(party, D.copy(), mech, direction=np.eye(2)[0], **kw))


def test_audit_sharing_defaults_are_a_million_trials_and_seed_0():
    party, D_prime, y, s = pair(2)
    mech = cvxdp.SharingGaussian(sigma=0.05)
    kw = dict(y=y, s=s, rho=RHO, lam=LAM, parties=2)
    default_seed = audit_sharing(party, D_prime, mech, **kw, trials=300)
    assert default_seed.best_threshold is not None
    assert default_seed.to_dict() == audit_sharing(party, D_prime, mech, **kw, trials=300, seed=0).to_dict()
    assert default_seed.best_threshold != audit_sharing(party, D_prime, mech, **kw, trials=300, seed=1).best_threshold
    assert audit_sharing(party, D_prime, cvxdp.SharingGaussian(sigma=1.0), **kw).trials == 1_000_000


def test_audit_sharing_takes_its_options_by_keyword_only():
    party, D_prime, y, s = pair(2)
    with pytest.raises(TypeError):
        audit_sharing(party, D_prime, cvxdp.SharingGaussian(sigma=1.0), y, s, RHO, LAM, 2)


# --------------------------------------------------------------------------- audit_sharing_release: the uplink
@pytest.fixture(scope="module")
def three():
    return synthetic_parties(6, 2, 3, seed=1)  # 6 samples, 2 features per party: rows and features differ


NARROW = cvxdp.SharingGaussian(epsilon=5.0, delta=1e-5, sensitivity=0.01)  # small noise: few trials suffice


def run_seeds(seed, n):
    """The docstring's seeds: one SeedSequence(seed) spawns a child per trial, each child's first word seeds a
    SeedSequence whose three children's first words seed the runs on D, D' and the reference."""
    out = []
    for child in np.random.SeedSequence(seed).spawn(n):
        base = int(child.generate_state(1)[0])
        out.append([int(c.generate_state(1)[0]) for c in np.random.SeedSequence(base).spawn(3)])
    return out


def test_the_release_audit_reduces_exactly_the_target_partys_uplink(three):
    parties, labels = three
    index, row, n, seed, epochs = 1, 4, 16, 2, 3
    new_row = -parties[index].data[row]
    res = audit_sharing_release(parties, index, new_row, NARROW, labels=labels, row=row, epochs=epochs, trials=n,
                                seed=seed)
    features = parties[index].data.copy()
    features[row] = new_row
    neighbour = cvxdp.VerticalParty(parties[index].name, features, bound=parties[index].bound)
    datasets = ([*parties], [parties[0], neighbour, parties[2]], [*parties])
    alg = cvxdp.ADMMSharing(rho=RHO, lam=LAM, epochs=epochs, labels=labels, record_messages=True)
    stats = np.empty((3, n))
    claims = set()
    for i, seeds in enumerate(run_seeds(seed, n)):
        for j, (data, run_seed) in enumerate(zip(datasets, seeds)):
            run = cvxdp.solve(data, algorithm=alg, privacy=NARROW, seed=run_seed, accountant="pld")
            sent = [m.payload for m in run.messages if m.direction == "up" and m.sender == "p1"]
            assert len(sent) == epochs
            stats[j, i] = sum(q[row] for q in sent)  # the changed sample's prediction, summed over the epochs
            claims.add((run.privacy["worst"]["pld"], run.privacy["target_delta"]))
    (claim,) = claims  # one ledger for every run: the claim read from the first trial is the runs' own
    ref = two_statistics(stats[0], stats[1], stats[2], delta=claim[1], alpha=0.05, claimed=claim[0], seed=seed,
                         details={})
    assert min(ref.details["statistics"].values()) > 0 and ref.best_threshold is not None  # both read the values
    assert res.claimed == claim[0] and res.delta == claim[1]
    assert res.epsilon_lower == pytest.approx(ref.epsilon_lower, rel=1e-12)
    assert res.best_threshold == pytest.approx(ref.best_threshold, rel=1e-12)
    assert res.counts == ref.counts and res.statistic == ref.statistic
    assert res.details["statistics"] == pytest.approx(ref.details["statistics"], rel=1e-12)
    assert {k: v for k, v in res.details.items() if k != "statistics"} == {
        "mechanism": "SharingGaussian", "mode": "release", "broken": "none", "epochs": epochs, "party": "p1",
        "row": row, "rho": RHO, "lam": LAM, "seed": seed}


def test_the_release_audits_documented_defaults(three):
    parties, labels = three
    new_row = -parties[0].data[0]
    default = audit_sharing_release(parties, 0, new_row, NARROW, labels=labels, trials=10)
    explicit = audit_sharing_release(parties, 0, new_row, NARROW, labels=labels, row=0, epochs=3, rho=1.0, lam=0.1,
                                     trials=10, seed=0)
    assert default.to_dict() == explicit.to_dict()
    assert {k: default.details[k] for k in ("row", "epochs", "rho", "lam", "seed")} == \
        {"row": 0, "epochs": 3, "rho": 1.0, "lam": 0.1, "seed": 0}
    # trials: 400 by default (1200 runs: read from the signature rather than run)
    assert inspect.signature(audit_sharing_release).parameters["trials"].default == 400


def test_the_release_audit_takes_its_options_by_keyword_only(three):
    parties, labels = three
    with pytest.raises(TypeError):  # positional options (trials 9 would be refused by name if they were taken)
        audit_sharing_release(parties, 0, parties[0].data[0], NARROW, labels, 0, 3, RHO, LAM, 9)


def message(name, expected, got):
    return re.escape(f"The '{name}' parameter of {OWNER} must be {expected}. Got {got!r} instead.")


def call(three, **kw):
    parties, labels = three
    args = {"index": 0, "neighbour_row": np.zeros(2), "trials": 10, "seed": 0, "alpha": 0.05, "row": 0, **kw}
    return audit_sharing_release(parties, args.pop("index"), args.pop("neighbour_row"), NARROW, labels=labels,
                                 **args)


OUT_OF_RANGE = [("index", v, "an int in [0, 2]") for v in (3, -1, True, 1.0, 7)] + \
    [("row", v, "an int in [0, 5]") for v in (6, -1, True, 2.0, 9)]  # 3 parties; 6 samples, 2 features each


@pytest.mark.parametrize(("name", "value", "expected"), OUT_OF_RANGE)
def test_the_release_audit_refuses_an_index_or_row_out_of_range(three, name, value, expected):
    with pytest.raises(InvalidParameterError, match=message(name, expected, value)):
        call(three, **{name: value}, trials=9)


@pytest.mark.parametrize(("name", "value"), [("index", 0), ("index", 1), ("index", 2), ("row", 0), ("row", 2),
                                             ("row", 5)])
def test_the_release_audit_takes_every_partys_index_and_every_sample_row(three, name, value):
    with pytest.raises(InvalidParameterError, match="'trials' parameter"):  # accepted: the next check refuses
        call(three, **{name: value}, trials=9)


def test_the_release_audit_refuses_a_neighbour_row_of_another_length(three):
    with pytest.raises(InvalidParameterError, match=message("neighbour_row", "an array of shape (2,)", (6,))):
        call(three, neighbour_row=np.zeros(6), trials=9)


def test_the_release_audit_needs_ten_trials_a_seed_from_0_and_alpha_in_0_1(three):
    with pytest.raises(InvalidParameterError, match=message("trials", "an int in [10, inf]", 9)):
        call(three, trials=9)
    with pytest.raises(InvalidParameterError, match=message("alpha", "a float in (0, 1)", 0.0)):
        call(three, trials=10, alpha=0.0)  # 10 trials accepted
    with pytest.raises(InvalidParameterError, match=message("seed", "an int in [0, inf]", -1)):
        call(three, seed=-1)
    with pytest.raises(InvalidParameterError, match=message("alpha", "a float in (0, 1)", 1.0)):
        call(three, seed=0, alpha=1.0)  # seed 0 accepted
    with pytest.raises(InvalidParameterError, match=message("alpha", "a float in (0, 1)", -0.5)):
        call(three, alpha=-0.5)
