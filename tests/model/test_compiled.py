"""One compile per agent and data (cvxdp.model.compiled) and the compiled exact-ADMM prox step."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import SolverFailedError
from cvxdp.model import ProxSolver, set_verdict
from cvxdp.model.compiled import constraint_data, prox_data
from cvxdp_models.toy import make_agents


def _strictly_convex_agents(seed: int = 0) -> list[cvxdp.Agent]:
    """Two agents with strictly convex objectives (unique prox solutions): an SOC set and an exp-cone objective."""
    rng = np.random.default_rng(seed)
    x = cp.Variable(4, name="x")
    A = rng.normal(size=(6, 4))
    soc = cvxdp.Agent("soc", cp.sum_squares(A @ x - 1.0) + 0.1 * cp.sum_squares(x),
                      [cp.norm(x, 2) <= 1.0, cp.sum(x) <= 0.5, x >= -0.8], shared={"x": x[:3]})
    y = cp.Variable(4, name="y")
    X = rng.normal(size=(10, 4))
    labels = np.sign(rng.normal(size=10))
    logistic = cvxdp.Agent("logistic", cp.sum(cp.logistic(-cp.multiply(labels, X @ y))) / 10
                           + 0.05 * cp.sum_squares(y), [y <= 1.0, y >= -1.0, y[0] + y[1] == 0.2],
                           shared={"x": y[:3]})
    return [soc, logistic]


def test_compiled_prox_matches_the_cvxpy_prox_to_solver_tolerance():
    rng = np.random.default_rng(3)
    for agent in _strictly_convex_agents() + make_agents(agents=3, seed=1):
        agent.check()
        compiled, reference = ProxSolver(agent), ProxSolver(agent, compiled=False)
        tight = ProxSolver(agent, settings={"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12})
        assert compiled.path == "compiled" and reference.path == "cvxpy"
        for rho in (0.5, 3.0):
            for _ in range(3):
                target = rng.normal(size=agent.layout.shared_indices.size)
                u, report = compiled.solve(target, rho)
                ref, _ = reference.solve(target, rho)
                assert report.solver == "CLARABEL" and not report.fallbacks
                # both stop at Clarabel's default gap 1e-8; near an active SOC / exp cone that leaves ~1e-5
                np.testing.assert_allclose(u, ref, atol=1e-4, rtol=0)
                np.testing.assert_allclose(u, tight.solve(target, rho)[0], atol=5e-5, rtol=0)
                assert agent.violation(u) <= 1e-7


def test_compiled_prox_on_power_zones_reaches_the_same_optimal_value():
    from cvxdp.config.build import build_instance, load_case

    case = load_case("case14_3zones")
    case.model["objective"] = "cost"
    case.model.pop("penalty", None)
    rng = np.random.default_rng(0)
    for agent in build_instance(case).agents:
        agent.check()
        sidx = agent.layout.shared_indices
        compiled, reference = ProxSolver(agent), ProxSolver(agent, compiled=False)
        target = 0.3 * rng.normal(size=sidx.size)
        u, ref = compiled.solve(target, 3.0)[0], reference.solve(target, 3.0)[0]
        # the minimizer is not unique (buses with no cost), the optimal value is
        value_u, value_ref = (agent.objective_value(v) + 1.5 * np.sum((v[sidx] - target) ** 2) for v in (u, ref))
        assert value_u == pytest.approx(value_ref, rel=1e-7)
        assert agent.violation(u) <= 1e-7


def test_prox_is_set_up_once_per_rho_and_only_then(monkeypatch):
    import clarabel

    agent = _strictly_convex_agents()[0]
    agent.check()
    prox = ProxSolver(agent)
    setups = {"n": 0}
    original = clarabel.DefaultSolver

    def counting(*args, **kwargs):
        setups["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(clarabel, "DefaultSolver", counting)
    target = np.ones(3)
    for rho in (1.0, 1.0, 1.0, 2.0, 2.0, 1.0):
        prox.solve(target, rho)
    assert setups["n"] == 3  # 1.0, then 2.0, then 1.0 again


def test_prox_fallback_is_recorded_and_total_failure_names_the_agent(monkeypatch):
    agents = make_agents(agents=3, seed=2)
    monkeypatch.setattr(ProxSolver, "_clarabel", lambda self, t, rho: (None, "NumericalError"))
    result = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=3), seed=0)
    assert (result.history["fallbacks"] == len(agents)).all()
    assert set(result.agent_history["fallbacks"]) == {"CLARABEL:NumericalError"}
    assert set(result.agent_history["solver"]) == {"ECOS"}

    monkeypatch.setattr(ProxSolver, "_cvxpy", lambda self, name, t, rho: (None, "solver_error"))
    with pytest.raises(SolverFailedError, match=r"agent0.*exact local step in round 1.*CLARABEL:NumericalError"):
        cvxdp.solve(make_agents(agents=3, seed=2), algorithm=cvxdp.ADMM(rho=1.0, rounds=3), seed=0)


def test_exact_admm_resumes_bit_for_bit(tmp_path):
    def run(checkpoint=None, stop_at=None):
        def callback(t, row):
            if t == stop_at:
                raise KeyboardInterrupt
        return cvxdp.solve(make_agents(agents=3, seed=4), algorithm=cvxdp.ADMM(rho=1.0, rounds=16), seed=7,
                           checkpoint=checkpoint, callback=callback)

    reference = run()
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, stop_at=9)
    resumed = run(tmp_path)  # a fresh live solver, set up with q = 0, gives the same bits
    timing = ["wall_time", "solver_time"]
    pd.testing.assert_frame_equal(reference.history.drop(columns=timing), resumed.history.drop(columns=timing))
    assert all((reference.solution[k] == resumed.solution[k]).all() for k in reference.solution)


@pytest.mark.parametrize("algorithm", [lambda rho: cvxdp.LinearizedADMM(rho=rho, eta=2.0, rounds=3),
                                       lambda rho: cvxdp.ADMM(rho=rho, rounds=3)], ids=["linearized", "exact"])
def test_one_compile_per_agent_and_none_when_the_agents_run_again(count_compiles, algorithm):
    from cvxdp.model.local_solver import declared_box

    agents = make_agents(agents=3, seed=6)  # every agent has a box, two have more: conic projections
    cvxdp.solve(agents, algorithm=algorithm(1.0), seed=0)
    # feasibility, boundedness, projection, start (and the exact prox step): one compile per agent; LinearizedADMM
    # compiles nothing for the agent whose set is a declared box (a clip built from its constraint objects)
    boxes = sum(declared_box(a) is not None for a in agents)
    assert boxes == 1
    expected = len(agents) if algorithm(1.0).exact else len(agents) - boxes
    assert count_compiles["n"] == expected
    cvxdp.solve(agents, algorithm=algorithm(2.0), seed=1)
    assert count_compiles["n"] == expected  # same agents and data, new rho: nothing is compiled again


def test_changed_data_is_compiled_again(count_compiles):
    x = cp.Variable(2)
    lo = cp.Parameter(2, value=np.zeros(2))
    agent = cvxdp.Agent("a", cp.sum_squares(x - 3), [x >= lo, cp.norm(x, 2) <= 2], shared={"x": x})
    first = constraint_data(agent)
    assert constraint_data(agent) is first and count_compiles["n"] == 1
    lo.value = np.array([0.5, -1.0])
    second = constraint_data(agent)
    assert second is not first and count_compiles["n"] == 2
    assert not np.array_equal(first.b, second.b)


def test_feasibility_and_boundedness_come_from_the_compiled_data(count_compiles):
    x = cp.Variable(3)
    empty = cvxdp.Agent("empty", cp.sum(x), [cp.norm(x, 2) <= 1, x[0] >= 2], shared={"x": x})
    open_set = cvxdp.Agent("open", cp.sum(x), [cp.norm(x[:2], 2) <= 1, x[2] >= 0], shared={"x": x})
    ball = cvxdp.Agent("ball", cp.sum(x), [cp.norm(x, 2) <= 1], shared={"x": x})
    assert set_verdict(empty).infeasible is True
    assert set_verdict(open_set).unbounded is True and set_verdict(open_set).infeasible is False
    assert set_verdict(ball).unbounded is False and set_verdict(ball).infeasible is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ball.check_feasible()
    assert count_compiles["n"] == 3  # one per agent, the checks included


def test_prox_data_yields_the_constraint_rows_from_the_same_compile(count_compiles):
    from cvxdp.model.compiled import _prox_pair

    for agent in _strictly_convex_agents() + make_agents(agents=3, seed=1):
        before = count_compiles["n"]
        pair = _prox_pair(agent)
        assert pair.compiles == 1 and count_compiles["n"] - before == 1
        W = constraint_data(agent)  # W_p compiled on its own: the very same rows
        assert (W.A != pair.constraints.A).nnz == 0 and np.array_equal(W.b, pair.constraints.b)
        assert W.dims == pair.constraints.dims and np.array_equal(W.cols, pair.constraints.cols)
    assert prox_data(_strictly_convex_agents()[1]).dims.exp > 0  # the objective's exponential cones


def test_the_objective_domain_rows_do_not_restrict_the_projection():
    from cvxdp.model import compile_projection
    from cvxdp.model.compiled import _prox_pair, prox_constraint_data

    x = cp.Variable(3)
    # log(x + 2) needs x >= -2 (an exponential-cone row on u): the projection onto the ball must not see it
    agent = cvxdp.Agent("log", -cp.sum(cp.log(x + 2)) + cp.sum_squares(x), [cp.norm(x, 2) <= 5],
                        shared={"x": x})
    pair = _prox_pair(agent)
    assert pair.compiles == 1 and pair.full.dims.exp == 3 and pair.constraints.dims.exp == 0
    proj = compile_projection(agent, exact=True)
    assert proj.data is prox_constraint_data(agent)
    v = np.array([-4.0, 0.0, 0.0])
    u, _ = proj.project(v, np.ones(3))
    np.testing.assert_allclose(u, v, atol=1e-6)  # inside the ball, outside the objective's domain


def test_an_ambiguous_split_compiles_the_constraints_on_their_own(count_compiles):
    from cvxdp.model.compiled import _prox_pair

    z = cp.Variable(3)
    # CVXPY canonicalizes the shared subexpression norm(z) once, for the objective and the constraint alike
    agent = cvxdp.Agent("cse", cp.norm(z, 2) + cp.sum(z), [cp.norm(z, 2) <= 1], shared={"x": z})
    pair = _prox_pair(agent)
    assert pair.compiles == 2 and count_compiles["n"] == 2
    assert pair.constraints is constraint_data(agent) and pair.constraints.dims.soc == (4,)
    result = cvxdp.solve([agent], algorithm=cvxdp.ADMM(rho=1.0, rounds=30), seed=0)
    np.testing.assert_allclose(result.solution["x"], -np.ones(3) / np.sqrt(3), atol=1e-4)
    assert count_compiles["n"] == 2  # and the run reuses both


def test_study_compiles_each_model_once(tmp_path, count_compiles):
    from cvxdp.studies.grid import run_study

    study = tmp_path / "study.toml"
    study.write_text(f"""
[study]
name = "compile_count"
case = "{(_cases() / 'case14_3zones.toml').as_posix()}"
mechanisms = ["ObjG", "OutG"]
epsilons = [1.0, 10.0]
local_updates = [1]
seeds = [0, 1]
rounds = 2
""")
    from cvxdp.model.compiled import COMPILE_COUNT

    before = COMPILE_COUNT["n"]
    # one process (workers=1) counts here; on several, each worker compiles once for all its cells
    summary = run_study(study, tmp_path / "out", progress=False, workers=1)
    assert summary["computed"] == 9  # 8 private cells + the non-private baseline
    assert COMPILE_COUNT["n"] - before == 3  # three zones, compiled once for the whole study
    # besides them CVXPY canonicalizes at most the template's centralized reference, once per study
    assert count_compiles["n"] - 3 <= 1


def _cases():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "cases"


def test_the_cache_does_not_keep_agents_alive():
    import gc
    import weakref

    from cvxdp.model import compiled

    agents = make_agents(agents=3, seed=9)
    cvxdp.solve(agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=2), seed=0)
    assert all(agent in compiled._CACHE for agent in agents)
    refs = [weakref.ref(agent) for agent in agents]
    del agents
    gc.collect()
    assert all(ref() is None for ref in refs)
