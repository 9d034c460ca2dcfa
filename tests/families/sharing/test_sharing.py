"""ADMM sharing over vertically partitioned features (Hu et al. 2020; SPEC §5)."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit

import cvxdp
from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.families.sharing.params import (
    AssumptionViolation,
    corollary1,
    lemma1_sensitivity,
    theorem1_epsilon,
    theorem1_sigma,
    z_update,
    z_update_logistic,
    z_update_squared,
)
from cvxdp.model import VerticalParty
from cvxdp.model.local_solver import ball_ridge_solve

SIGMA_DELTA = 1e-5
PAPER = {"sensitivity": "paper", "calibration": "classic", "assumptions": "record"}  # the paper's Lemma 1 / Thm 1


@pytest.fixture(scope="module")
def bc():
    from cvxdp_models.vertical import make_vertical_data

    return make_vertical_data("breast_cancer")


def parties_of(data, bound=60.0):
    from cvxdp_models.vertical import make_parties

    return make_parties(data, bound=bound)


# --------------------------------------------------------------------------- acceptance: convergence
@pytest.mark.parametrize("lam,rho_n,epochs", [(1e-3, 0.25, 100), (1e-2, 0.5, 40)])
def test_nonprivate_sharing_reaches_centralized_optimum(bc, lam, rho_n, epochs):
    from cvxdp_models.vertical import central_optimum, sklearn_baseline

    ref = central_optimum(bc, lam, bound=60.0)  # CVXPY / Clarabel on all features
    res = cvxdp.solve(parties_of(bc), algorithm=cvxdp.ADMMSharing(rho=rho_n / bc.n_samples, lam=lam, epochs=epochs))
    final = float(res.history["objective"].iloc[-1])
    assert (final - ref["objective"]) / ref["objective"] <= 1e-4
    w = np.concatenate([res.local[n] for n in bc.names])
    w_ref = np.concatenate([ref["solution"][n] for n in bc.names])
    assert np.linalg.norm(w - w_ref) <= 2e-2 * np.linalg.norm(w_ref)  # flat directions converge slowest
    # scikit-learn with the matching regularisation (C = 1/(N lam), no intercept) agrees with the reference
    sk = sklearn_baseline(bc.X_train, bc.y_train, bc.X_test, bc.y_test, lam)
    assert abs(sk["train_objective"] - ref["objective"]) <= 1e-6 * ref["objective"]
    assert res.history["test_logloss"].iloc[-1] == pytest.approx(ref["test_logloss"], rel=1e-3)


def test_squared_loss_reaches_ridge_solution(bc):
    X, yv, n, lam = bc.X_train, bc.y_train, bc.n_samples, 1e-2
    w_star = np.linalg.solve(X.T @ X / n + lam * np.eye(X.shape[1]), X.T @ yv / n)
    # the parallel (Jacobi) updates need rho of at least about the loss curvature (1/N here; 0.5/N diverges)
    res = cvxdp.solve(parties_of(bc), algorithm=cvxdp.ADMMSharing(rho=1.5 / n, lam=lam, epochs=600,
                                                                  loss="squared"))
    w = np.concatenate([res.local[k] for k in bc.names])
    assert np.linalg.norm(w - w_star) <= 1e-4 * np.linalg.norm(w_star)
    assert "test_logloss" not in res.history  # the squared loss reports test_loss only
    assert "test_loss" in res.history


def test_tolerance_stop(bc):
    res = cvxdp.solve(parties_of(bc), algorithm=cvxdp.ADMMSharing(rho=0.5 / bc.n_samples, lam=1e-2, epochs=500,
                                                                  tol_primal=1e-4, tol_dual=1e-6))
    assert res.stop_reason == "tolerance"
    assert len(res.history) < 500


# --------------------------------------------------------------------------- the update math
def test_z_update_logistic_solves_each_scalar_problem():
    rng = np.random.default_rng(0)
    n = 200
    v, y = rng.normal(scale=20, size=n), rng.normal(scale=1e-2, size=n)
    labels = rng.choice([-1.0, 1.0], size=n)
    for rho in (1e-5, 1e-2, 10.0):
        z = z_update_logistic(v, y, rho, labels)
        for i in range(0, n, 17):
            def h(t, i=i, rho=rho):
                return -labels[i] / n * expit(-labels[i] * t) - y[i] + rho * (t - v[i])
            ref = optimize.brentq(h, v[i] + (y[i] - 1 / n) / rho - 1, v[i] + (y[i] + 1 / n) / rho + 1, xtol=1e-14)
            assert z[i] == pytest.approx(ref, rel=1e-10, abs=1e-10)


def test_z_update_squared_closed_form():
    rng = np.random.default_rng(1)
    v, y, b = rng.normal(size=10), rng.normal(size=10), rng.normal(size=10)
    z = z_update_squared(v, y, 0.3, b)
    grad = (z - b) / 10 - y - 0.3 * (v - z)
    assert np.allclose(grad, 0.0, atol=1e-14)
    assert np.array_equal(z_update(v, y, 0.3, b, "squared"), z)


@pytest.mark.parametrize("bound", [None, 0.05, 1.0, 100.0])
@pytest.mark.parametrize("lam", [0.0, 0.1])
def test_ball_ridge_solve_matches_cvxpy(bound, lam):
    rng = np.random.default_rng(2)
    D = rng.normal(size=(30, 6))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    g, rho = rng.normal(size=6), 0.7
    e, V = np.linalg.eigh(D.T @ D)
    x = ball_ridge_solve(e, V, g, lam, rho, bound)
    xv = cp.Variable(6)
    cons = [cp.norm(xv, 2) <= bound] if bound is not None else []
    cp.Problem(cp.Minimize(lam / 2 * cp.sum_squares(xv) + g @ xv + rho / 2 * cp.sum_squares(D @ xv)),
               cons).solve(solver=cp.CLARABEL)
    assert np.allclose(x, xv.value, atol=1e-6)
    if bound is not None:
        assert np.linalg.norm(x) <= bound * (1 + 1e-12)


def test_cvxpy_path_matches_closed_form(bc):
    n, lam = bc.n_samples, 1e-3
    alg = cvxdp.ADMMSharing(rho=0.25 / n, lam=lam, epochs=15)
    closed = cvxdp.solve(parties_of(bc), algorithm=alg)
    custom = []
    for i, (name, D) in enumerate(zip(bc.names, bc.train)):
        x = cp.Variable(D.shape[1])
        custom.append(VerticalParty(name, D, x, regularizer=0.5 * cp.sum_squares(x), curvature=1.0, bound=60.0,
                                    constraints=[x <= 1e3], labels=bc.y_train if i == 0 else None))
    assert not custom[0].closed_form and parties_of(bc)[0].closed_form
    compiled = cvxdp.solve(custom, algorithm=alg)
    for name in bc.names:
        assert np.allclose(compiled.local[name], closed.local[name], atol=1e-6)
    assert set(compiled.agent_history["solver"]) <= {"CLARABEL", "ECOS"}
    assert set(closed.agent_history["solver"]) == {"closed-form"}


# --------------------------------------------------------------------------- what leaves a party
@pytest.mark.parametrize("private", [False, True])
def test_only_one_number_per_sample_per_party_is_sent(bc, private):
    parties = parties_of(bc)
    N, M, T = bc.n_samples, len(parties), 6
    privacy = cvxdp.SharingGaussian(sigma=0.5, delta=SIGMA_DELTA) if private else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=0.25 / N, lam=1e-3, epochs=T,
                                                               record_messages=True), privacy=privacy, seed=3)
    up = [m for m in res.messages if m.direction == "up"]
    down = [m for m in res.messages if m.direction == "down"]
    # every message a party sends: one array of N floats, once per epoch, to the centre
    assert len(up) == M * T
    assert all(m.receiver == "centre" and m.kind == "prediction" for m in up)
    assert all(m.payload.shape == (N,) and m.payload.dtype == np.float64 for m in up)
    assert sorted((m.epoch, m.sender) for m in up) == sorted((t, p.name) for t in range(1, T + 1) for p in parties)
    assert all(m.sender == "centre" for m in down)
    assert (res.agent_history["sent_values"] == N).all() and (res.agent_history["sent_arrays"] == 1).all()
    # the uplink is D_m x_m (+ noise) - never x_m or raw features
    last = {m.sender: m.payload for m in up if m.epoch == T}
    for p in parties:
        exact = p.data @ res.local[p.name]
        if private:
            resid = last[p.name] - exact
            assert 0.4 < np.std(resid) < 0.6  # N(0, 0.5^2 I_N)
        else:
            assert np.array_equal(last[p.name], exact)
    # the centre's broadcasts are a function of the uplinks and the labels alone: replay them
    y, z, v = np.zeros(N), np.zeros(N), np.zeros(N)
    rho = 0.25 / N
    for t in range(1, T + 1):
        sent = {m.kind: m.payload for m in down if m.epoch == t and m.receiver == parties[0].name}
        assert np.array_equal(sent["residual"], v - z) and np.array_equal(sent["dual"], y)
        v = np.sum([m.payload for m in up if m.epoch == t], axis=0)
        z_new = z_update(v, y, rho, bc.y_train, "logistic")
        y, z = y + rho * (v - z_new), z_new


def test_party_sees_only_pulled_values(bc):
    """The x-update of a party depends on the others only through the broadcast (sum_k q_k - z, y)."""
    parties = parties_of(bc)
    res = cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=0.25 / bc.n_samples, lam=1e-3, epochs=3,
                                                           record_messages=True))
    down = {(m.epoch, m.kind): m.payload for m in res.messages if m.direction == "down"
            and m.receiver == parties[1].name}
    up = {(m.epoch, m.sender): m.payload for m in res.messages if m.direction == "up"}
    p = parties[1]
    D, rho, lam = p.data, 0.25 / bc.n_samples, 1e-3
    s = down[(3, "residual")] - up[(2, p.name)]  # subtract the cached own contribution
    g = D.T @ (down[(3, "dual")] + rho * s)
    e, V = np.linalg.eigh(D.T @ D)
    x = ball_ridge_solve(e, V, g, lam, rho, p.bound)
    assert np.allclose(D @ x, up[(3, p.name)], atol=1e-12)


# --------------------------------------------------------------------------- seeds
def test_same_seed_same_numbers_and_per_party_generators(bc):
    parties = parties_of(bc)
    alg = cvxdp.ADMMSharing(rho=0.25 / bc.n_samples, lam=1e-3, epochs=4, record_messages=True)
    mech = cvxdp.SharingGaussian(sigma=0.3, delta=SIGMA_DELTA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cvxdp.solve(parties, algorithm=alg, privacy=mech, seed=11)
        b = cvxdp.solve(parties, algorithm=alg, privacy=mech, seed=11)
        c = cvxdp.solve(parties, algorithm=alg, privacy=mech, seed=12)
    assert a.history.drop(columns=["wall_time", "solver_time"]).equals(b.history.drop(columns=["wall_time",
                                                                                              "solver_time"]))
    assert not np.allclose(a.local["party1"], c.local["party1"])
    # epoch 1: x = 0, so each uplink is exactly the party's first N draws of its own generator
    children = np.random.SeedSequence(11).spawn(len(parties))
    for p, child in zip(parties, children):
        first = next(m.payload for m in a.messages if m.direction == "up" and m.sender == p.name and m.epoch == 1)
        assert np.array_equal(first, np.random.default_rng(child).normal(0.0, 0.3, bc.n_samples))


# --------------------------------------------------------------------------- privacy formulas and accounting
def test_corollary1_matches_hand_computed_value():
    # eps' = sqrt(2 T ln(1/delta')) eps + T eps (e^eps - 1) with eps = 0.5, T = 10, delta' = 1e-5:
    # sqrt(20 * 11.512925465) * 0.5 + 5 * 0.6487212707 = 7.587136 + 3.243606 = 10.830742
    eps, dl = corollary1(0.5, 1e-5, 10, 1e-5)
    assert eps == pytest.approx(10.830742000426373, rel=1e-12)
    assert dl == pytest.approx(1.1e-4, rel=1e-12)  # T delta + delta'
    assert corollary1(0.1, 1e-6, 1, 1e-6)[0] == pytest.approx(math.sqrt(2 * math.log(1e6)) * 0.1 + 0.1 * math.expm1(0.1))
    assert corollary1(0.5, 1e-5, 0, 1e-5) == (0.0, 0.0)
    assert corollary1(800.0, 1e-5, 2, 1e-5)[0] == math.inf


def test_lemma1_and_theorem1_hand_computed():
    # C = 3/(d rho) [lam c1 + (1 + M rho) b1] = 3/(15 * 0.5) * (0.1 + 2 * 2) = 1.64
    assert lemma1_sensitivity(15, 0.5, 0.1, 1.0, 2.0, 2) == pytest.approx(1.64, rel=1e-14)
    # sigma = sqrt(2 ln(1.25/1e-5)) * 1.64 / 0.5 = 4.844806 * 3.28
    assert theorem1_sigma(1.64, 0.5, 1e-5) == pytest.approx(15.890961261345675, rel=1e-12)
    assert theorem1_sigma(1.64, 1.0, 1e-5) == pytest.approx(15.890961261345675 / 2, rel=1e-12)  # eps = 1 allowed
    assert theorem1_epsilon(1.64, 15.890961261345675, 1e-5) == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="'epsilon' parameter of theorem1_sigma"):
        theorem1_sigma(1.0, 1.5, 1e-5)


def test_private_run_records_theorem1_noise_and_ledger(bc):
    import dp_accounting

    parties = parties_of(bc, bound=60.0)
    lam, rho, T, eps = 1e-3, 1.0, 5, 0.8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=rho, lam=lam, epochs=T),
                          privacy=cvxdp.SharingGaussian(epsilon=eps, delta=SIGMA_DELTA, **PAPER), seed=0)
    assert res.privacy["guarantee"] is False  # Lemma 1 is a paper preset
    C = 3.0 / (15 * rho) * (lam * 1.0 + (1 + 2 * rho) * 60.0)
    sigma = math.sqrt(2 * math.log(1.25 / SIGMA_DELTA)) * C / eps
    info = res.privacy["mechanism"]["parties"]["party1"]
    assert info["sensitivity"] == pytest.approx(C, rel=1e-12) and info["sigma"] == pytest.approx(sigma, rel=1e-12)
    assert res.history["sigma"].iloc[0] == pytest.approx(sigma, rel=1e-12)
    for name in bc.names:
        (event, claim, count), = res.ledger.entries(name)
        assert count == T and claim == (pytest.approx(eps), SIGMA_DELTA)
        assert isinstance(event, dp_accounting.GaussianDpEvent)
        assert event.noise_multiplier == pytest.approx(sigma / C, rel=1e-12)
    cor = res.privacy["corollary1"]
    assert cor["worst"][0] == pytest.approx(corollary1(eps, SIGMA_DELTA, T, SIGMA_DELTA)[0], rel=1e-12)
    assert cor["worst"][1] == pytest.approx(T * SIGMA_DELTA + SIGMA_DELTA)
    assert res.privacy["target_delta"] == pytest.approx(T * SIGMA_DELTA + SIGMA_DELTA)
    worst = res.privacy["worst"]
    assert worst["basic"][0] == pytest.approx(T * eps)
    assert worst["pld"] <= worst["rdp"] <= cor["worst"][0]  # our accountants are tighter than Corollary 1
    assert res.history["eps_corollary1"].is_monotonic_increasing
    assert res.history["eps_pld"].iloc[-1] == pytest.approx(worst["pld"])


def test_sigma_mode_claim_and_outg_alias(bc):
    parties = parties_of(bc)
    alg = cvxdp.ADMMSharing(rho=1.0, lam=1e-3, epochs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cvxdp.solve(parties, algorithm=alg, privacy=cvxdp.SharingGaussian(
            epsilon=0.5, delta=SIGMA_DELTA, calibration="classic"), seed=0)
        b = cvxdp.solve(parties, algorithm=alg, privacy=cvxdp.OutputPerturbation(
            "gaussian", epsilon=0.5, delta=SIGMA_DELTA, calibration="classic"), seed=0)
        sig = a.privacy["mechanism"]["parties"]["party1"]["sigma"]
        c = cvxdp.solve(parties, algorithm=alg, privacy=cvxdp.SharingGaussian(sigma=sig, delta=SIGMA_DELTA,
                                                                              calibration="classic"))
    assert np.array_equal(a.local["party1"], b.local["party1"])  # OutG is the sharing mechanism
    assert c.privacy["mechanism"]["parties"]["party1"]["eps_step"] == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="privacy"):
        cvxdp.solve(parties, algorithm=alg, privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=0.5,
                                                                                  delta=1e-5))


def test_budget_stops_the_run(bc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(parties_of(bc), algorithm=cvxdp.ADMMSharing(rho=1.0, lam=1e-3, epochs=20),
                          privacy=cvxdp.SharingGaussian(epsilon=0.5, delta=SIGMA_DELTA), budget=(2.0, 1e-3),
                          accountant="basic")
    assert res.stop_reason == "budget" and len(res.history) == 4  # 4 x 0.5 = 2.0


# --------------------------------------------------------------------------- assumptions and validation
def test_assumptions_are_checked(bc):
    D1, D2 = bc.train
    y = bc.y_train
    alg = cvxdp.ADMMSharing(rho=1.0, lam=1e-3, epochs=2)
    mech = cvxdp.SharingGaussian(epsilon=0.5, delta=SIGMA_DELTA, **PAPER)
    no_bound = [VerticalParty("a", D1, labels=y), VerticalParty("b", D2)]
    with pytest.raises(DeclarationError, match="bounded feasible set"):
        cvxdp.solve(no_bound, algorithm=alg, privacy=mech)
    big_rows = [VerticalParty("a", 2 * D1, bound=1.0, labels=y), VerticalParty("b", D2, bound=1.0)]
    with pytest.raises(DeclarationError, match="l2 norm 2 > 1"):
        cvxdp.solve(big_rows, algorithm=alg, privacy=mech)
    x = cp.Variable(D1.shape[1])
    custom = [VerticalParty("a", D1, x, regularizer=cp.sum_squares(x), bound=1.0, labels=y),
              VerticalParty("b", D2, bound=1.0)]
    with pytest.raises(DeclarationError, match="curvature"):
        cvxdp.solve(custom, algorithm=alg, privacy=mech)
    cvxdp.solve(no_bound, algorithm=alg)  # the non-private run needs none of them
    # Assumption 1.1 (||y||, ||z|| <= b1) is checked every epoch: record it (opt-out), or raise (default)
    small = parties_of(bc, bound=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(small, algorithm=alg, privacy=mech)
    assert not res.privacy["assumption_1_1"]["held"] and not res.history["assumption_ok"].all()
    assert res.privacy["guarantee"] is False
    assert any("Assumption 1.1" in n["reason"] and n["voids"] for n in res.privacy["notes"])
    with pytest.raises(AssumptionViolation, match="Assumption 1.1"):
        cvxdp.solve(small, algorithm=alg, privacy=cvxdp.SharingGaussian(epsilon=0.5, delta=SIGMA_DELTA,
                                                                        sensitivity="paper"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the worst-case sensitivity needs no assumption on y, z
        res = cvxdp.solve(small, algorithm=alg, privacy=cvxdp.SharingGaussian(
            epsilon=0.5, delta=SIGMA_DELTA, sensitivity="worst_case"))
    C = res.privacy["mechanism"]["parties"]["party1"]["sensitivity"]
    assert C == pytest.approx(2 * math.sqrt(bc.n_samples) * 1.0)


def test_uniform_validation_messages(bc):
    parties = parties_of(bc)
    cases = [
        (cvxdp.ADMMSharing(rho=-1.0), "The 'rho' parameter of ADMMSharing must be a float in (0, inf). Got -1.0"),
        (cvxdp.ADMMSharing(epochs=0), "The 'epochs' parameter of ADMMSharing must be an int in [1, inf]. Got 0"),
        (cvxdp.ADMMSharing(loss="hinge"), "The 'loss' parameter of ADMMSharing must be one of 'logistic', "
                                          "'squared'. Got 'hinge'"),
        (cvxdp.ADMMSharing(labels=np.array([0.0, 1.0])), "The 'labels' parameter of ADMMSharing must be labels in "
                                                         "{-1, +1} for the logistic loss"),
    ]
    for alg, message in cases:
        with pytest.raises(InvalidParameterError) as err:
            cvxdp.solve(parties, algorithm=alg)
        assert str(err.value).startswith(message)
    for mech, message in [
        (cvxdp.SharingGaussian(epsilon=2.0, calibration="classic"),
         "The 'epsilon' parameter of SharingGaussian must be a float in (0, 1]"),
        (cvxdp.SharingGaussian(epsilon=0.5, sigma=1.0), "The 'epsilon' parameter of SharingGaussian must be given"),
        (cvxdp.SharingGaussian(sigma=1.0, sensitivity="exact"), "The 'sensitivity' parameter of SharingGaussian"),
    ]:
        with pytest.raises(InvalidParameterError, match=None) as err:
            cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(epochs=1), privacy=mech)
        assert str(err.value).startswith(message)
    with pytest.raises(DeclarationError, match="samples"):
        cvxdp.solve([parties[0], VerticalParty("short", bc.train[1][:10])], algorithm=cvxdp.ADMMSharing())
    with pytest.raises(InvalidParameterError, match="labels"):
        cvxdp.solve([VerticalParty("a", bc.train[0]), VerticalParty("b", bc.train[1])], algorithm=cvxdp.ADMMSharing())
    with pytest.raises(InvalidParameterError, match="VerticalParty"):
        cvxdp.solve([cvxdp.Agent("x", cp.sum_squares(cp.Variable(2)), shared={})], algorithm=cvxdp.ADMMSharing())


# --------------------------------------------------------------------------- results, checkpoints
def test_result_history_save_load_and_summary(bc, tmp_path):
    res = cvxdp.solve(parties_of(bc), algorithm=cvxdp.ADMMSharing(rho=0.25 / bc.n_samples, lam=1e-3, epochs=5))
    for col in ("round", "epoch", "objective", "test_logloss", "noise_magnitude", "wall_time",
                "consensus_residual"):
        assert col in res.history
    assert list(res.history["epoch"]) == [1, 2, 3, 4, 5]
    assert set(res.solution) == {"z"} and set(res.local) == set(bc.names)  # the parties keep their models
    assert res.values("party1")[res.agents[0].variable].shape == (15,)
    summary = res.summary()
    assert summary["rounds"] == 5 and summary["stop_reason"] == "rounds"
    res.save(tmp_path / "r")
    back = cvxdp.load_result(tmp_path / "r")
    assert np.array_equal(back.local["party2"], res.local["party2"])
    assert back.config["algorithm"]["name"] == "sharing"


def test_checkpoint_resume_equals_uninterrupted_run(bc, tmp_path):
    parties = parties_of(bc)
    alg = cvxdp.ADMMSharing(rho=0.25 / bc.n_samples, lam=1e-3, epochs=8)
    mech = cvxdp.SharingGaussian(sigma=0.2, delta=SIGMA_DELTA)

    class Stop(Exception):
        pass

    def interrupt(t, row):
        if t == 5:
            raise Stop

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = cvxdp.solve(parties, algorithm=alg, privacy=mech, seed=4)
        with pytest.raises(Stop):
            cvxdp.solve(parties, algorithm=alg, privacy=mech, seed=4, checkpoint=tmp_path, callback=interrupt)
        resumed = cvxdp.solve(parties, algorithm=alg, privacy=mech, seed=4, checkpoint=tmp_path)
    assert np.array_equal(resumed.local["party1"], full.local["party1"])
    assert np.allclose(resumed.history["objective"], full.history["objective"], rtol=0, atol=0)
    assert resumed.ledger.steps("party1") == 8


def test_nodes_declare_their_number_of_features_as_work(bc):
    # backends balance workers by NodeSpec.work and RayBackend runs serially below min_variables of it: a party's
    # work is its number of variables, a public shape, as in the consensus and graph families
    from cvxdp.run import SerialBackend

    class Spy(SerialBackend):
        def start(self, specs, agents, seeds):
            self.work = [s.work for s in specs]
            super().start(specs, agents, seeds)

    parties, spy = parties_of(bc), Spy()
    cvxdp.solve(parties, algorithm=cvxdp.ADMMSharing(rho=0.25 / bc.n_samples, lam=1e-3, epochs=1), backend=spy,
                seed=0)
    assert spy.work == [float(p.n_features) for p in parties] == [15.0, 15.0]  # not NodeSpec's default 1.0
