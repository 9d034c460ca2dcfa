"""R-ADMM and MR-ADMM: convergence, the recycled even step (no data read, no privacy spent), bound (32)."""

from __future__ import annotations

import numpy as np
import pytest

import cvxdp
from cvxdp import SmoothObjective
from cvxdp.errors import InvalidParameterError
from cvxdp.families.graph.mechanism import bound_32, privacy_curve_32, privacy_plan
from cvxdp.families.graph.node import recycled_step
from cvxdp.families.graph.topology import check_graph
from cvxdp_models.erm import make_erm


def _gaps(inst, ref, result):
    opt = ref["objective"]
    f_bar = np.asarray(result.solution["f"])
    return (abs(result.history["objective"].iloc[-1] - opt) / opt,
            (sum(nd.value(f_bar) for nd in inst.nodes) - opt) / opt)


# --------------------------------------------------------------------------- convergence
@pytest.mark.parametrize("algo", [cvxdp.RADMM(graph="random", eta=0.5, gamma=0.5, rounds=200),
                                  cvxdp.MRADMM(graph="random", eta=0.5, q=1.002, gamma=0.5, rounds=200)],
                         ids=["radmm", "mradmm"])
def test_converges_on_a_random_5_node_graph(erm5, algo):
    inst, ref = erm5
    gap_nodes, gap_mean = _gaps(inst, ref, cvxdp.solve(inst.agents, algorithm=algo, seed=0))

    assert gap_nodes <= 1e-4 and gap_mean <= 1e-4


@pytest.mark.parametrize("algo", [cvxdp.RADMM(graph="random", eta=0.1, gamma=0.5, rounds=160),
                                  cvxdp.MRADMM(graph="random", eta=0.1, q=1.001, gamma=0.5, rounds=160)],
                         ids=["radmm", "mradmm"])
def test_converges_on_a_random_20_node_graph(erm20, algo):
    inst, ref = erm20
    gap_nodes, gap_mean = _gaps(inst, ref, cvxdp.solve(inst.agents, algorithm=algo, seed=1))

    assert gap_nodes <= 1e-4 and gap_mean <= 1e-4


def test_iterations_alternate_exact_and_recycled(erm5):
    inst, _ = erm5
    hist = cvxdp.solve(inst.agents, algorithm=cvxdp.RADMM(rounds=6)).history

    assert list(hist["iteration"]) == ["exact", "recycled"] * 3


# --------------------------------------------------------------------------- the even step
def test_recycled_step_is_eq_16():
    f, g, lam, dis = np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([0.1, 0.2]), np.array([0.3, -0.4])
    eta, V, gamma = 2.0, 3.0, 0.5

    expected = f - (g + 2 * lam + eta * dis) / (2 * eta * V + gamma)
    assert recycled_step(f, g, lam, eta, dis, V, gamma) == pytest.approx(expected, rel=1e-15)


def test_even_iterate_equals_eq_16_with_the_true_gradient(erm5):
    """f(2) from the run equals (16) evaluated with grad O(f(1)) computed directly from the data."""
    inst, _ = erm5
    names = [a.name for a in inst.agents]
    kw = {"graph": "random", "eta": [0.5, 0.6, 0.7, 0.8, 0.9], "gamma": 0.3}
    one = cvxdp.solve(inst.agents, algorithm=cvxdp.RADMM(rounds=1, **kw), seed=0)
    two = cvxdp.solve(inst.agents, algorithm=cvxdp.RADMM(rounds=2, **kw), seed=0)
    topo = check_graph(cvxdp.RADMM(**kw).build_graph(names), names)
    F1 = np.array([one.local[n] for n in names])
    eta = np.array(kw["eta"])
    for i, (n, nd) in enumerate(zip(names, inst.nodes)):
        nb = list(topo.neighbors[i])
        dis = topo.degrees[i] * F1[i] - F1[nb].sum(axis=0)
        lam1 = 0.5 * eta[i] * dis  # lambda(0) = 0, eq. (15)
        f2 = F1[i] - (nd.gradient(F1[i]) + 2 * lam1 + eta[i] * dis) / (2 * eta[i] * topo.degrees[i] + 0.3)
        assert two.local[n] == pytest.approx(f2, abs=1e-9)


def _counting(inst):
    """Agents whose value/gradient/Hessian count their calls (the data are read only through them)."""
    counts = {"grad": 0, "hess": 0}

    def wrap(fn, key):
        def inner(u):
            counts[key] += 1
            return fn(u)
        return inner

    agents = []
    for nd in inst.nodes:
        a = nd.agent()
        a.gradient = SmoothObjective(nd.value, wrap(nd.gradient, "grad"), wrap(nd.hessian, "hess"))
        agents.append(a)
    return agents, counts


@pytest.mark.parametrize("privacy", [None, cvxdp.PenaltyPerturbation(alpha=3.0)], ids=["non-private", "private"])
def test_even_iterations_compute_no_gradient(erm5, privacy):
    inst, _ = erm5
    agents, counts = _counting(inst)
    per_iteration, last = [], [0]

    def callback(t, row):
        total = counts["grad"] + counts["hess"]
        per_iteration.append(total - last[0])
        last[0] = total

    cvxdp.solve(agents, algorithm=cvxdp.MRADMM(q=1.01, rounds=10), privacy=privacy, callback=callback, seed=0)

    assert all(c > 0 for c in per_iteration[0::2])  # odd: the exact update reads the data
    assert per_iteration[1::2] == [0] * 5            # even: nothing


@pytest.mark.parametrize("privacy", [None, cvxdp.PenaltyPerturbation(alpha=3.0)], ids=["non-private", "private"])
def test_poisoning_the_data_during_even_iterations_changes_nothing(erm5, privacy):
    """The data are replaced by garbage after every odd iteration and restored after every even one: the
    iterates (and all that the odd iterations compute) are exactly those of the clean run."""
    inst, _ = erm5
    algo = cvxdp.MRADMM(eta=0.8, q=1.01, gamma=0.5, rounds=12)
    clean = cvxdp.solve(inst.agents, algorithm=algo, privacy=privacy, seed=4)
    saved = [nd.A.value.copy() for nd in inst.nodes]
    garbage = np.random.default_rng(0)

    def poison(t, row):
        for nd, value in zip(inst.nodes, saved):
            nd.A.value = garbage.normal(size=value.shape) if t % 2 else value

    try:
        dirty = cvxdp.solve(inst.agents, algorithm=algo, privacy=privacy, seed=4, callback=poison)
    finally:
        for nd, value in zip(inst.nodes, saved):
            nd.A.value = value
    odd = clean.history["iteration"] == "exact"

    assert all(np.array_equal(clean.local[n], dirty.local[n]) for n in clean.local)
    assert np.array_equal(clean.history["objective"][odd], dirty.history["objective"][odd])
    assert np.array_equal(clean.history["max_deviation"], dirty.history["max_deviation"])
    assert not np.array_equal(clean.history["objective"][~odd], dirty.history["objective"][~odd])  # it did poison


# --------------------------------------------------------------------------- privacy: ledger = (32)
def test_private_mradmm_ledger_is_bound_32_and_spends_nothing_on_even_iterations(erm5):
    inst, _ = erm5
    names = [a.name for a in inst.agents]
    T, eta_hat, q, alpha1 = 11, [1.0, 0.9, 1.1, 1.0, 0.8], [1.04, 1.02, 1.03, 1.04, 1.01], [1.0, 2.0, 1.5, 1.0, 2.5]
    algo = cvxdp.MRADMM(graph="random", graph_seed=2, eta=eta_hat, q=q, gamma=0.5, rounds=T)
    result = cvxdp.solve(inst.agents, algorithm=algo, privacy=cvxdp.PenaltyPerturbation(alpha=alpha1), seed=0)
    topo = check_graph(algo.build_graph(names), names)
    K = (T + 1) // 2
    k = np.arange(1, K + 1)
    eta_odd = np.array(eta_hat)[:, None] * np.array(q)[:, None] ** k  # eta_i(2k-1) = eta_hat_i q_i^k
    alpha = np.repeat(np.array(alpha1)[:, None], K, axis=1)
    B = [nd.B for nd in inst.nodes]
    rho, N = 1.0, 5

    assert result.privacy["paper_bound"] == pytest.approx(bound_32(10.0, 0.25, rho, N, alpha, eta_odd,
                                                                   topo.degrees, B), rel=1e-12)
    assert result.history["bound_P"].to_numpy() == pytest.approx(
        privacy_curve_32(10.0, 0.25, rho, N, alpha, eta_odd, topo.degrees, B, T), rel=1e-12)
    steps = result.agent_history  # the per-iteration claim of every node (released by the plan)
    assert (steps.loc[steps["round"] % 2 == 0, "epsilon"] == 0.0).all()
    assert (steps.loc[steps["round"] % 2 == 1, "epsilon"] > 0).all()
    for n in names:  # one PrivacyLedger: pure-epsilon events on odd iterations, no-op events on recycled ones
        assert result.ledger.steps(n) == K and result.ledger.free_steps(n) == T // 2
    assert result.privacy["worst"]["free_steps"] == T // 2 and result.privacy["worst"]["steps"] == K
    assert result.history["noise_magnitude"][result.history["iteration"] == "recycled"].isna().all()
    plan = privacy_plan(algo, inst.agents, cvxdp.PenaltyPerturbation(alpha=alpha1))
    assert plan.sum().max() == pytest.approx(result.privacy["paper_bound"], rel=1e-12)


def test_mradmm_condition_uses_eta_1_and_validation(erm5):
    big_c = make_erm({"nodes": 5, "C": 500.0, "rho": 0.01, "max_samples": 300})
    with pytest.raises(InvalidParameterError, match=r"2 eta_i\(1\) V_i"):
        cvxdp.solve(big_c.agents, algorithm=cvxdp.MRADMM(eta=0.01, q=1.0),
                    privacy=cvxdp.PenaltyPerturbation(alpha=1.0))
    inst, _ = erm5
    with pytest.raises(InvalidParameterError,
                       match=r"The 'gamma' parameter of RADMM must be a float in \[0, inf\). Got -1 instead."):
        cvxdp.solve(inst.agents, algorithm=cvxdp.RADMM(gamma=-1))
    algo = cvxdp.RADMM()
    algo.q = 1.1
    with pytest.raises(InvalidParameterError, match="'q' parameter of RADMM"):
        cvxdp.solve(inst.agents, algorithm=algo)
