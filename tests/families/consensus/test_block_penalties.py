"""Exact ADMM's over-relaxation, per-block penalties (Agent(rho_scale=...), BlockBalance) and the copies'
mismatch (issue 12, item 1)."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.families.consensus.server import copies_mismatch, penalty_weights, relaxed_targets
from cvxdp.model import ProxSolver
from cvxdp.schedules import BlockBalance


def _agents(scale: dict | None = None, other: dict | None = None, seed: int = 0) -> list[cvxdp.Agent]:
    """Three agents sharing a 3-vector ``v`` (two different scales in it) and a scalar ``s``."""
    rng = np.random.default_rng(seed)
    out = []
    for p in range(3):
        x = cp.Variable(4, name=f"x{p}")
        target = rng.normal(size=4) * np.array([1.0, 1.0, 10.0, 10.0])
        cons = [x >= -20, x <= 20, cp.norm(x[:2], 2) <= 3.0]
        out.append(cvxdp.Agent(f"a{p}", cp.sum_squares(x - target), cons, shared={"v": x[:3], "s": x[3]},
                               rho_scale=(other if p == 2 and other is not None else scale)))
    return out


def test_copies_mismatch_is_the_norm_over_ordered_pairs_of_copies():
    rng = np.random.default_rng(1)
    gidx = [np.array([0, 1, 2]), np.array([1, 2]), np.array([0, 2, 3])]
    shared = [rng.normal(size=len(g)) for g in gidx]
    brute = 0.0
    for k in range(4):
        copies = [ez[list(g).index(k)] for ez, g in zip(shared, gidx) if k in g]
        brute += sum((a - b) ** 2 for a, b in itertools.permutations(copies, 2))
    assert copies_mismatch(shared, gidx, 4) == pytest.approx(np.sqrt(brute), rel=1e-12)
    assert copies_mismatch([np.ones(3), np.ones(2), np.ones(3)], gidx, 4) == 0.0


def test_relaxed_targets_mix_the_consensus_with_the_previous_copy():
    w = np.array([1.0, 2.0, 3.0])
    gidx = [np.array([0, 2]), np.array([1])]
    prev = [np.array([0.0, 1.0]), np.array([4.0])]
    plain = relaxed_targets(w, prev, gidx, 1.0)
    assert [t.tolist() for t in plain] == [[1.0, 3.0], [2.0]]
    over = relaxed_targets(w, prev, gidx, 1.5)
    assert np.allclose(over[0], 1.5 * np.array([1.0, 3.0]) - 0.5 * prev[0])
    assert np.allclose(over[1], [1.5 * 2.0 - 0.5 * 4.0])


@pytest.mark.parametrize("bad", [0.0, 2.0, -1.0, float("nan")])
def test_relaxation_outside_zero_two_is_refused(bad):
    with pytest.raises(InvalidParameterError, match="'relaxation' parameter of ADMM must be 'auto' or a float in"):
        cvxdp.solve(_agents(), algorithm=cvxdp.ADMM(relaxation=bad, rounds=2), seed=0)


@pytest.mark.parametrize("bad", ["1.6", "fast"])
def test_relaxation_string_other_than_auto_is_refused(bad):
    with pytest.raises(InvalidParameterError, match="'relaxation' parameter of ADMM must be 'auto' or a float in"):
        cvxdp.solve(_agents(), algorithm=cvxdp.ADMM(relaxation=bad, rounds=2), seed=0)


def test_auto_relaxation_is_milder_during_the_warmup():
    auto = cvxdp.ADMM()
    assert auto.relaxation == "auto" and auto.describe()["relaxation"] == "auto"
    n = auto.warmup_rounds
    assert [auto.relaxation_at(t) for t in (1, n, n + 1, 100)] == [1.3, 1.3, 1.6, 1.6]
    assert cvxdp.ADMM(relaxation=1.2).relaxation_at(1) == cvxdp.ADMM(relaxation=1.2).relaxation_at(n + 1) == 1.2
    # the engine reads it round by round: during the warm-up "auto" runs exactly as a constant 1.3
    runs = {a: cvxdp.solve(_agents(), algorithm=cvxdp.ADMM(rho=1.0, relaxation=a, rounds=4), seed=0).history
            for a in ("auto", 1.3, 1.6)}
    assert np.array_equal(runs["auto"]["objective"].to_numpy(), runs[1.3]["objective"].to_numpy())
    assert not np.allclose(runs["auto"]["objective"].to_numpy(), runs[1.6]["objective"].to_numpy())


@pytest.mark.parametrize("relaxation", [1.0, 1.6])
def test_over_relaxed_admm_reaches_the_central_optimum(relaxation):
    agents = _agents()
    ref = cvxdp.solve_central(agents)
    res = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rho=1.0, relaxation=relaxation, rounds=400, tol_primal=1e-7,
                                                   tol_dual=1e-7), seed=0)
    assert res.stop_reason == "tolerance"
    assert abs(res.history["objective"].iloc[-1] - ref["objective"]) <= 1e-5 * abs(ref["objective"])
    assert res.history["mismatch"].iloc[-1] < 1e-5
    assert res.config["algorithm"]["relaxation"] == relaxation


def test_rho_scale_declarations_are_checked_naming_the_agent():
    with pytest.raises(DeclarationError, match="'a0'.*'rho_scale' names 'nope'"):
        cvxdp.solve(_agents({"nope": 2.0}), algorithm=cvxdp.ADMM(rounds=2), seed=0)
    with pytest.raises(DeclarationError, match=r"rho_scale\['v'\]' must be a positive float or 3"):
        cvxdp.solve(_agents({"v": [1.0, -1.0, 1.0]}), algorithm=cvxdp.ADMM(rounds=2), seed=0)
    with pytest.raises(DeclarationError, match=r"rho_scale\['v'\]' must be a positive float or 3"):
        cvxdp.solve(_agents({"v": [1.0, 2.0]}), algorithm=cvxdp.ADMM(rounds=2), seed=0)
    with pytest.raises(DeclarationError, match="'a1' and 'a2' declare different rho_scale weights for the "
                                               "shared key 'v'"):
        cvxdp.solve(_agents({"v": 2.0}, other={"v": 3.0}), algorithm=cvxdp.ADMM(rounds=2), seed=0)


def test_declared_weights_cover_every_coordinate_of_their_key():
    agents = _agents({"v": [1.0, 1.0, 100.0]})
    for a in agents:
        a.check()
    weights = penalty_weights(agents, {"s": 0, "v": 1}, 4)
    assert weights.tolist() == [1.0, 1.0, 1.0, 100.0]
    assert penalty_weights(_agents(), {"s": 0, "v": 1}, 4) is None


def test_weights_are_used_by_automatic_rho_only():
    agents = _agents({"v": [1.0, 1.0, 100.0]})
    auto = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=3), seed=0)
    assert auto.config["rho_scale"] == {"v": [1.0, 1.0, 100.0]}
    assert set(auto.config["rho_blocks"]) == {"1", "100"}
    explicit = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=3), seed=0)
    assert "rho_scale" not in explicit.config and "rho_blocks" not in explicit.config
    plain = cvxdp.solve(_agents(), algorithm=cvxdp.ADMM(rho=1.0, rounds=3), seed=0)
    pd_equal = np.allclose(explicit.history["objective"], plain.history["objective"], rtol=0, atol=0)
    assert pd_equal  # an explicit rho penalizes every coordinate alike: the declaration changes nothing
    ladmm = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=3), seed=0)
    assert "rho_scale" not in ladmm.config


def test_weighted_automatic_admm_reaches_the_central_optimum():
    agents = _agents({"v": [1.0, 1.0, 100.0], "s": 100.0})
    ref = cvxdp.solve_central(agents)
    res = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=400, tol_primal=1e-7, tol_dual=1e-7), seed=0)
    assert abs(res.history["objective"].iloc[-1] - ref["objective"]) <= 1e-5 * abs(ref["objective"])
    for key in ("v", "s"):
        assert np.allclose(res.solution[key], ref["solution"][key], atol=1e-4)


def test_block_balance_moves_only_the_unbalanced_block():
    declared = np.array([1.0, 1.0, 10.0, 10.0])
    weights = declared.copy()
    gidx = [np.arange(4), np.arange(4)]
    w, w_prev = np.ones(4), np.ones(4)
    w_prev[:2] -= 1e-3  # block "1": small dual residual; block "10": none at all (skipped)
    shared = [np.array([1.5, 1.5, 1.0, 1.0]), np.array([0.5, 0.5, 1.0, 1.0])]  # block "1" disagrees
    duals = [np.ones(4), -np.ones(4)]
    bb = BlockBalance(target=1.0, mu=3.0, max_step=10.0, adapt_rounds=5, warmup=0)
    out = bb.update(2, weights, declared, rho=1.0, w=w, w_prev=w_prev, shared=shared, duals=duals, gidx=gidx)
    assert out[0] == out[1] == pytest.approx(10.0)  # large primal residual: the weight grows (capped 10x)
    assert out[2:].tolist() == [10.0, 10.0]
    late = bb.update(6, weights, declared, rho=1.0, w=w, w_prev=w_prev, shared=shared, duals=duals, gidx=gidx)
    assert late is weights  # frozen after adapt_rounds


def test_block_balance_keeps_each_weight_within_span_of_its_declared_value():
    declared = np.array([1.0, 1.0, 10.0, 10.0])
    gidx = [np.arange(4), np.arange(4)]
    w, w_prev = np.ones(4), np.ones(4)
    w_prev[:2] -= 1e-3
    w_prev[2:] -= 1.0  # block "10": a large dual residual, copies that nearly agree -> its weight would shrink 10x
    shared = [np.array([1.5, 1.5, 1.0 + 1e-6, 1.0 + 1e-6]), np.array([0.5, 0.5, 1.0 - 1e-6, 1.0 - 1e-6])]
    duals = [np.ones(4), -np.ones(4)]
    kwargs = dict(rho=1.0, w=w, w_prev=w_prev, shared=shared, duals=duals, gidx=gidx)
    free = BlockBalance(target=1.0, span=100.0, warmup=0).update(2, declared.copy(), declared, **kwargs)
    assert free.tolist() == pytest.approx([10.0, 10.0, 1.0, 1.0])  # 10x up and 10x down
    bounded = BlockBalance(target=1.0, span=2.0, warmup=0).update(2, declared.copy(), declared, **kwargs)
    assert bounded.tolist() == pytest.approx([2.0, 2.0, 5.0, 5.0])  # within [declared / 2, declared * 2]


def test_block_balance_only_lowers_weights_before_warmup():
    declared = np.array([1.0, 1.0, 10.0, 10.0])
    gidx = [np.arange(4), np.arange(4)]
    w, w_prev = np.ones(4), np.ones(4)
    w_prev[:2] -= 1e-3
    w_prev[2:] -= 1.0  # block "1" asks for a larger weight, block "10" for a smaller one (as above)
    shared = [np.array([1.5, 1.5, 1.0 + 1e-6, 1.0 + 1e-6]), np.array([0.5, 0.5, 1.0 - 1e-6, 1.0 - 1e-6])]
    duals = [np.ones(4), -np.ones(4)]
    kwargs = dict(rho=1.0, w=w, w_prev=w_prev, shared=shared, duals=duals, gidx=gidx)
    bb = BlockBalance(target=1.0, warmup=5)
    early = bb.update(4, declared.copy(), declared, **kwargs)
    assert early.tolist() == pytest.approx([1.0, 1.0, 1.0, 1.0])  # the lowering goes through, the raise waits
    on_time = bb.update(5, declared.copy(), declared, **kwargs)
    assert on_time.tolist() == pytest.approx([10.0, 10.0, 1.0, 1.0])
    assert BlockBalance().warmup == 15 == cvxdp.ADMM.warmup_rounds  # exact ADMM's defaults share the warm-up


def test_block_balance_parameters_are_validated():
    with pytest.raises(InvalidParameterError, match="'mu' parameter of BlockBalance"):
        BlockBalance(mu=0.5)
    with pytest.raises(InvalidParameterError, match="'span' parameter of BlockBalance"):
        BlockBalance(span=0.5)
    with pytest.raises(InvalidParameterError, match="'warmup' parameter of BlockBalance"):
        BlockBalance(warmup=-1)


def test_prox_step_with_one_penalty_per_coordinate_matches_cvxpy():
    agent = _agents()[1]
    agent.check()
    rho = np.array([1.0, 5.0, 100.0, 0.5])
    target = np.array([0.3, -2.0, 4.0, 1.0])
    compiled, reference = ProxSolver(agent), ProxSolver(agent, compiled=False)
    u, _ = compiled.solve(target, rho)
    v, _ = reference.solve(target, rho)
    sidx = agent.layout.shared_indices

    def value(z):  # the weighted prox objective both solved
        return agent.objective_value(z) + float(np.sum(rho / 2 * (z[sidx] - target) ** 2))

    assert value(u) == pytest.approx(value(v), rel=1e-7)  # the same optimum, to solver tolerance
    assert np.allclose(u, v, atol=1e-4)
    # a scalar rho is the same as that value on every coordinate
    assert np.allclose(compiled.solve(target, 2.0)[0], compiled.solve(target, np.full(4, 2.0))[0], atol=1e-9)


def test_case_files_set_the_relaxation():
    from cvxdp.config.build import make_algorithm
    from cvxdp.errors import ConfigError

    algorithm = make_algorithm({"name": "admm", "relaxation": 1.2})
    assert algorithm.relaxation == 1.2
    assert make_algorithm({"name": "admm", "relaxation": "auto"}).relaxation_at(1) == 1.3
    assert make_algorithm({"name": "admm"}).relaxation == "auto"
    with pytest.raises(ConfigError, match=r"\[algorithm\]: The 'relaxation' parameter of ADMM"):  # refused on reading
        make_algorithm({"name": "admm", "relaxation": 3.0, "rounds": 2})
