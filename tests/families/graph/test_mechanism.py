"""Gamma-norm noise, the papers' bounds (26) and (32), the ledger, the parameter condition and the audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import cvxdp
from cvxdp.audits.gamma import audit_gamma_mechanism
from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.families.graph.mechanism import (
    ERMConstants,
    PenaltyPerturbation,
    alpha_for_bound,
    bound_26,
    bound_32,
    check_bound_condition,
    erm_constants,
    gamma_norm_logpdf,
    madmm_step_epsilon,
    mradmm_step_epsilon,
    privacy_curve_26,
    privacy_curve_32,
    sample_gamma_norm,
)


# --------------------------------------------------------------------------- the noise
def test_gamma_norm_noise_has_gamma_norm_and_uniform_direction():
    rng = np.random.default_rng(0)
    alpha, d = 2.5, 4
    draws = np.array([sample_gamma_norm(rng, alpha, d) for _ in range(20_000)])
    norms = np.linalg.norm(draws, axis=1)

    assert stats.kstest(norms, stats.gamma(a=d, scale=1 / alpha).cdf).pvalue > 1e-3
    directions = draws / norms[:, None]
    assert np.all(np.abs(directions.mean(axis=0)) < 0.03)  # uniform on the sphere: mean zero
    assert np.allclose(np.cov(directions.T), np.eye(d) / d, atol=0.01)


def test_sampling_is_reproducible_from_the_generator():
    """The same generator state gives the same draw, and the draw comes from that generator: it advances it (dim + 1
    variates), other states give other draws (a sampler with a generator of its own would replay its noise)."""
    rng = np.random.default_rng(7)
    a = sample_gamma_norm(rng, 1.0, 3)
    b = sample_gamma_norm(np.random.default_rng(7), 1.0, 3)

    assert np.array_equal(a, b)
    assert not np.array_equal(sample_gamma_norm(rng, 1.0, 3), a)  # the next draw of the same generator
    assert not np.array_equal(sample_gamma_norm(np.random.default_rng(8), 1.0, 3), a)
    replay = np.random.default_rng(7)
    direction = replay.standard_normal(3)
    expected = direction / np.linalg.norm(direction) * replay.gamma(shape=3, scale=1.0)
    np.testing.assert_allclose(a, expected, rtol=1e-12)  # the direction first, then the norm, both from rng


@pytest.mark.parametrize("d", [1, 2])
def test_logpdf_is_normalised(d):
    alpha = 1.7
    if d == 1:
        total = 2 * math.exp(gamma_norm_logpdf(np.array([0.0]), alpha)) / alpha
    else:
        r = np.linspace(0, 40, 4001)
        dens = np.exp([gamma_norm_logpdf(np.array([x, 0.0]), alpha) for x in r])
        total = np.trapezoid(2 * np.pi * r * dens, r)
    assert total == pytest.approx(1.0, rel=1e-3)


# --------------------------------------------------------------------------- the papers' bounds, by hand
C, C1 = 2.0, 0.25
ALPHA = np.array([[1.0, 2.0], [3.0, 4.0]])
ETA = np.array([[0.5, 1.0], [1.0, 2.0]])
V = np.array([1.0, 2.0])
B = np.array([10.0, 20.0])


def test_bound_26_as_written():
    # node 0: 2(0.35 + 1)/(0.5*1*10) + 2(0.35 + 2)/(1*1*10) = 0.54 + 0.47; node 1: 6.7/40 + 8.7/80
    node0 = 2 * (1.4 * 0.25 + 1) / (0.5 * 1 * 10) + 2 * (1.4 * 0.25 + 2) / (1 * 1 * 10)
    node1 = 2 * (1.4 * 0.25 + 3) / (1 * 2 * 20) + 2 * (1.4 * 0.25 + 4) / (2 * 2 * 20)
    assert node0 == pytest.approx(1.01) and node1 == pytest.approx(0.27625)

    assert bound_26(C, C1, ALPHA, ETA, V, B) == pytest.approx(1.01, rel=1e-15)
    assert privacy_curve_26(C, C1, ALPHA, ETA, V, B) == pytest.approx([0.54, 1.01], rel=1e-15)
    assert madmm_step_epsilon(C, C1, 3.0, 1.0, 2.0, 20.0) == pytest.approx(0.1675, rel=1e-15)


def test_bound_32_as_written():
    rho, N = 0.4, 2  # rho/N = 0.2
    node0 = 2 * 2 / 10 * (0.35 / (0.2 + 2 * 0.5 * 1) + 1) + 2 * 2 / 10 * (0.35 / (0.2 + 2 * 1 * 1) + 2)
    node1 = 2 * 2 / 20 * (0.35 / (0.2 + 2 * 1 * 2) + 3) + 2 * 2 / 20 * (0.35 / (0.2 + 2 * 2 * 2) + 4)
    assert node0 == pytest.approx(0.4 * (0.35 / 1.2 + 1) + 0.4 * (0.35 / 2.2 + 2))
    assert node1 == pytest.approx(1.4252032520325203)

    assert bound_32(C, C1, rho, N, ALPHA, ETA, V, B) == pytest.approx(node1, rel=1e-15)
    # P(t) sums k = 1..floor((t+1)/2): t = 1, 2 after one odd iteration; t = 3, 4 after two
    first = max(0.4 * (0.35 / 1.2 + 1), 0.2 * (0.35 / 4.2 + 3))
    assert privacy_curve_32(C, C1, rho, N, ALPHA, ETA, V, B) == pytest.approx([first, first, node1, node1])
    assert mradmm_step_epsilon(C, C1, 1.0, 0.5, 1.0, 10.0, 0.2) == pytest.approx(0.4 * (0.35 / 1.2 + 1))


def test_alpha_for_bound_inverts_an_affine_bound():
    # node 0: 1 + 2 alpha, node 1: 0.5 + 3 alpha -> max = 10 at alpha = min(4.5, 3.1666) = 19/6
    alpha = alpha_for_bound(10.0, [[(0.5, 1.0), (0.5, 1.0)], [(0.5, 3.0)]])
    assert alpha == pytest.approx(19 / 6)
    with pytest.raises(InvalidParameterError, match="below the noise-free part"):
        alpha_for_bound(0.1, [[(1.0, 1.0)]])


def test_parameter_condition_error_names_the_node_and_numbers():
    ok = ERMConstants(C=10.0, B=100, reg=0.02)
    bad = ERMConstants(C=1000.0, B=10, reg=0.02)
    check_bound_condition([ok], [0.5], [2.0], ["a"])  # 0.5 < 10 * (0.02 + 2) holds

    with pytest.raises(InvalidParameterError, match=r"2 c1 < B_i/C \(rho/N \+ 2 theta V_i\).*node 'b'.*= 0.0004\."):
        check_bound_condition([ok, bad], [0.5, 0.01], [2.0, 1.0], ["a", "b"])


# --------------------------------------------------------------------------- the mechanism and the ledger
def test_penalty_perturbation_validation_is_uniform():
    with pytest.raises(InvalidParameterError,
                       match=r"The 'alpha' parameter of PenaltyPerturbation must be a float in \(0, inf\), a list of them "
                             r"\(one per node\) or a \{node: value\} mapping. Got -1 instead."):
        PenaltyPerturbation(alpha=-1).validate()
    with pytest.raises(InvalidParameterError, match="'growth' parameter of PenaltyPerturbation"):
        PenaltyPerturbation(alpha=1.0, growth=0).validate()
    pp = PenaltyPerturbation(alpha={"a": 1.0, "b": 2.0}, growth=1.5)
    assert pp.validate() is pp
    assert pp.alphas(["a", "b"]).tolist() == [1.0, 2.0]
    assert pp.alpha_at(pp.alphas(["a", "b"]), 3).tolist() == [2.25, 4.5]
    with pytest.raises(InvalidParameterError, match="missing 'c'"):
        pp.alphas(["a", "b", "c"])


def test_graph_ledgers_saved_before_the_one_ledger_are_converted():
    """A graph run's ledger in the old per-iteration format (one pure-epsilon claim per iteration, 0 for a recycled
    one) loads as the one PrivacyLedger with the same totals."""
    from cvxdp.privacy import ledger_from_dict

    old = {"format": "cvxdp-gamma-ledger/1", "target_delta": 1e-6, "bound": "(32)",
           "notes": [{"reason": "a note", "voids": False}],
           "agents": {"a": [[t, 0.1 if t % 2 else 0.0] for t in range(1, 41)],
                      "b": [[t, 0.2 if t % 2 else 0.0] for t in range(1, 41)]}}
    ledger = ledger_from_dict(old)
    summary = ledger.summary()

    assert ledger.spent("b", "basic") == (pytest.approx(4.0), 0.0)
    assert ledger.steps("a") == 20 and ledger.free_steps("a") == 20
    assert summary["worst"]["agent"] == "b" and summary["worst"]["basic"][0] == pytest.approx(4.0)
    assert summary["worst"]["pld"] <= summary["worst"]["rdp"] <= 4.0 + 1e-12  # both tighter than basic here
    assert summary["worst"]["pld"] < 4.0
    assert summary["notes"] == [{"reason": "a note", "voids": False}]
    assert ledger_from_dict(ledger.to_dict()) == ledger
    assert ledger.would_exceed("b", cvxdp.privacy.accounting.pure_epsilon_event(0.2), 1, (4.1, 0.0), "basic")
    assert not ledger.would_exceed("a", cvxdp.privacy.accounting.pure_epsilon_event(0.2), 1, (4.1, 0.0), "basic")


def test_erm_constants_are_required_for_private_runs():
    agent = cvxdp.Agent("x", cvxdp_objective(), [], shared={"f": _F})
    with pytest.raises(DeclarationError, match="ERM constants"):
        erm_constants(agent)


_F = None


def cvxdp_objective():
    import cvxpy as cp

    global _F
    _F = cp.Variable(2)
    return cp.sum_squares(_F)


# --------------------------------------------------------------------------- audit (cvxdp.audits.release)
def test_audit_honest_gamma_mechanism_is_not_refuted():
    result = audit_gamma_mechanism(alpha=2.0, B=5, trials=100_000, seed=1)

    assert result.claimed == pytest.approx(madmm_step_epsilon(1.0, 0.0, 2.0, 0.5, 2, 5))  # 0.4
    assert not result.violated
    assert result.epsilon_lower > 0.25  # the audit has power: the claim is nearly tight in one dimension


@pytest.mark.parametrize("broken", ["double-alpha", "unscaled"])
def test_audit_catches_the_broken_twins(broken):
    result = audit_gamma_mechanism(alpha=2.0, B=5, trials=100_000, seed=1, broken=broken)

    assert result.violated, (result.epsilon_lower, result.claimed)


def test_audit_in_higher_dimension_is_not_refuted():
    assert not audit_gamma_mechanism(alpha=2.0, B=5, dim=3, trials=30_000, seed=2).violated


def test_the_audited_release_is_what_solve_computes():
    """The audit's closed form is the first PP update of cvxdp.solve (same noise draw, linear loss)."""
    import cvxpy as cp

    from cvxdp import SmoothObjective
    from cvxdp.families.graph.mechanism import attach_erm_constants

    C_, B_, reg, eta, alpha, d = 1.0, 5, 0.1, 0.5, 2.0, 3
    rng = np.random.default_rng(0)
    agents, lins = [], []
    for i in range(2):
        lin = C_ / B_ * rng.normal(size=d)  # C/B sum_n y_n x_n
        f = cp.Variable(d, name="f")
        oracle = SmoothObjective(lambda u, lin=lin: float(-lin @ u + 0.5 * reg * u @ u),
                                 lambda u, lin=lin: -lin + reg * u, lambda u: reg * np.eye(d))
        agent = cvxdp.Agent(f"n{i}", -(lin @ f) + 0.5 * reg * cp.sum_squares(f), [], shared={"f": f},
                            gradient=oracle)
        agents.append(attach_erm_constants(agent, ERMConstants(C=C_, B=B_, reg=reg, c1=0.0)))
        lins.append(lin)
    result = cvxdp.solve(agents, algorithm=cvxdp.MADMM(graph="complete", eta=eta, theta=eta, rounds=1,
                                                       init_scale=0.0),
                         privacy=PenaltyPerturbation(alpha=alpha), seed=11)
    for i, child in enumerate(np.random.SeedSequence(11).spawn(2)):
        eps = sample_gamma_norm(np.random.default_rng(child), alpha, d)
        V = 1.0
        expected = (lins[i] - 2 * eta * V * eps) / (reg + 2 * eta * V)  # lambda(0) = 0, f(0) = 0
        assert result.local[f"n{i}"] == pytest.approx(expected, abs=1e-10)
    assert result.privacy["paper_bound"] == pytest.approx(madmm_step_epsilon(C_, 0.0, alpha, eta, 1.0, B_))
