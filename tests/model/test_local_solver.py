"""The compiled local subproblem: accuracy, box detection, fallback chain and failure reports."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import SolverFailedError
from cvxdp.model import compile_projection
from cvxdp.model.local_solver import BoxProjection, ConicProjection

# the reference solves ask Clarabel for a 1e-11 gap, which it sometimes reports as "inaccurate"
pytestmark = pytest.mark.filterwarnings("ignore:Solution may be inaccurate")


def soc_agent():
    x = cp.Variable(5)
    y = cp.Variable((2, 3))
    return cvxdp.Agent("soc", cp.sum_squares(x) + cp.sum(y), [cp.norm(x) <= 1, y >= 0, y <= 2, x[0] + y[0, 1] == 0.5],
                       shared={"k": x[1:3], "m": y[:, 0]})


def reference_projection(agent, v, c):
    u = agent.u_expression()
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum(cp.multiply(c, cp.square(u - v)))), agent.constraints)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11)
    return agent.layout.flatten({var: var.value for var in agent.layout.variables})


def test_compiled_projection_matches_a_fresh_cvxpy_solve():
    agent = soc_agent()
    proj = compile_projection(agent)
    rng = np.random.default_rng(0)

    assert isinstance(proj, ConicProjection)
    for _ in range(3):
        v, c = 2 * rng.normal(size=agent.layout.size), rng.uniform(0.5, 2.0, size=agent.layout.size)
        u, report = proj.project(v, c)
        ref = reference_projection(agent, v, c)
        assert report.solver == "CLARABEL"
        assert agent.violation(u) <= 1e-9

        def dist(z, c=c, v=v):
            return 0.5 * np.sum(c * (z - v) ** 2)

        assert dist(u) <= dist(ref) + 1e-9  # as close as a solve at 1e-11 gap
        # a duality gap g bounds the distance to the optimum by sqrt(2 g / min c); Clarabel runs at g = 1e-10
        assert np.max(np.abs(u - ref)) < np.sqrt(2e-10 / c.min()) + 1e-6


def test_box_sets_are_projected_in_closed_form():
    z = cp.Variable(4)
    agent = cvxdp.Agent("box", cp.sum_squares(z), [z <= 1, z >= -np.arange(4), z[2] == 0.3], shared={"z": z})

    proj = compile_projection(agent)
    u, report = proj.project(np.array([5.0, -5.0, 0.0, -1.0]), np.ones(4))

    assert isinstance(proj, BoxProjection)
    assert report.solver == "closed-form"
    assert np.allclose(u, [1.0, -1.0, 0.3, -1.0])


def test_clarabel_failure_falls_back_to_ecos_and_is_recorded(monkeypatch):
    agent = soc_agent()
    monkeypatch.setattr(ConicProjection, "_clarabel", lambda self, v, c: (None, "InsufficientProgress"))
    rng = np.random.default_rng(1)
    v, c = rng.normal(size=agent.layout.size), np.ones(agent.layout.size)

    u, report = compile_projection(agent).project(v, c)

    assert report.solver == "ECOS"
    assert report.fallbacks == ["CLARABEL:InsufficientProgress"]
    assert np.max(np.abs(u - reference_projection(agent, v, c))) < 1e-6


def test_fallbacks_appear_in_the_history(monkeypatch, toy_agents):
    calls = {"n": 0}
    original = ConicProjection._clarabel

    def flaky(self, v, c):
        calls["n"] += 1
        return (None, "NumericalError") if calls["n"] == 3 else original(self, v, c)

    monkeypatch.setattr(ConicProjection, "_clarabel", flaky)

    result = cvxdp.solve(toy_agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=2.0, rounds=5))

    assert result.history["fallbacks"].sum() == 1
    assert (result.agent_history["fallbacks"] == "CLARABEL:NumericalError").sum() == 1


def test_every_solver_failing_names_agent_round_and_status(monkeypatch, toy_agents):
    original = ConicProjection._clarabel
    calls = {"n": 0}

    def broken_after_setup(self, v, c):  # the two conic agents' initial points solve, round 1 fails
        calls["n"] += 1
        return original(self, v, c) if calls["n"] <= 2 else (None, "MaxIterations")

    monkeypatch.setattr(ConicProjection, "_clarabel", broken_after_setup)
    monkeypatch.setattr(ConicProjection, "_cvxpy", lambda self, name, v, c: (None, "solver_error"))

    with pytest.raises(SolverFailedError, match=r"Agent 'agent1'.*round 1.*CLARABEL:MaxIterations") as info:
        cvxdp.solve(toy_agents, algorithm=cvxdp.LinearizedADMM(rounds=3))

    assert info.value.agent == "agent1" and info.value.round == 1


class _Answer:
    """A real Clarabel solution with its status (and optionally its primal residual) replaced."""

    def __init__(self, sol, status, r_prim=None):
        self._sol, self.status = sol, status
        self.r_prim = sol.r_prim if r_prim is None else r_prim

    def __getattr__(self, name):
        return getattr(self._sol, name)


def _degrade_first_solves(monkeypatch, n, status, r_prim=None):
    """The first ``n`` Clarabel solves report ``status`` (their iterates are the real, converged ones)."""
    import clarabel

    real = clarabel.DefaultSolver
    count = {"n": 0}

    class Solver:
        def __init__(self, *args):
            self._solver = real(*args)

        def update(self, **kwargs):
            self._solver.update(**kwargs)

        def solve(self):
            sol = self._solver.solve()
            count["n"] += 1
            return _Answer(sol, status, r_prim) if count["n"] <= n else sol

    monkeypatch.setattr(clarabel, "DefaultSolver", Solver)


def _point(agent):
    rng = np.random.default_rng(0)
    return 2 * rng.normal(size=agent.layout.size), rng.uniform(0.5, 2.0, size=agent.layout.size)


def test_almost_solved_within_the_loose_tolerance_is_accepted_and_labelled(monkeypatch):
    import clarabel

    agent = soc_agent()
    v, c = _point(agent)
    reference, report = compile_projection(agent).project(v, c)
    assert report.solver == "CLARABEL"
    _degrade_first_solves(monkeypatch, 1, clarabel.SolverStatus.AlmostSolved)
    u, report = compile_projection(soc_agent()).project(v, c)
    assert report.solver == "CLARABEL(AlmostSolved)" and report.fallbacks == []
    np.testing.assert_allclose(u, reference, atol=1e-7)


def test_a_failed_clarabel_solve_is_retried_and_recorded(monkeypatch):
    import clarabel

    agent = soc_agent()
    v, c = _point(agent)
    reference, _ = compile_projection(agent).project(v, c)
    # a primal residual above LOOSE_PRIMAL: not accepted, retried on a fresh solver set up with the actual q
    _degrade_first_solves(monkeypatch, 1, clarabel.SolverStatus.InsufficientProgress, r_prim=1e-3)
    u, report = compile_projection(soc_agent()).project(v, c)
    assert report.solver == "CLARABEL(retry)" and report.fallbacks == ["CLARABEL:InsufficientProgress"]
    np.testing.assert_allclose(u, reference, atol=2e-5)  # both at a gap <= 1e-10: sqrt(2 gap / min c) apart


def test_the_first_retry_is_the_same_settings_set_up_with_the_actual_q(monkeypatch):
    # the live solver was set up with q = 0 (its equilibration is that of q = 0); the first retry keeps the
    # settings, sets up with the round's q, and has at least 500 iterations; the robust settings come after
    import clarabel

    agent = soc_agent()
    v, c = _point(agent)
    proj = compile_projection(agent)
    proj.project(v, c)  # the live solver exists
    made = []
    real = clarabel.DefaultSolver

    def spy(P, q, A, b, cones, settings):
        made.append((np.asarray(q).copy(), settings))
        return real(P, q, A, b, cones, settings)

    _degrade_first_solves(monkeypatch, 1, clarabel.SolverStatus.NumericalError, r_prim=1.0)
    degraded = clarabel.DefaultSolver
    monkeypatch.setattr(clarabel, "DefaultSolver", lambda *args: (spy(*args), degraded(*args))[1])
    proj._live._solver = None  # set up again, through the spy
    u, report = proj.project(v + 1.0, c)
    assert report.solver == "CLARABEL(retry)" and report.fallbacks == ["CLARABEL:NumericalError"]
    (setup_q, live), (retry_q, first_retry) = made
    assert not np.any(setup_q) and np.any(retry_q)
    assert first_retry.max_iter >= 500
    for name in ("equilibrate_enable", "iterative_refinement_max_iter", "static_regularization_constant",
                 "tol_gap_rel", "presolve_enable"):
        assert getattr(first_retry, name) == getattr(live, name), name


def test_the_second_retry_records_both_failures(monkeypatch):
    import clarabel

    agent = soc_agent()
    v, c = _point(agent)
    reference, _ = compile_projection(agent).project(v, c)
    _degrade_first_solves(monkeypatch, 2, clarabel.SolverStatus.NumericalError, r_prim=1.0)
    u, report = compile_projection(soc_agent()).project(v, c)
    assert report.solver == "CLARABEL(retry2)"
    assert report.fallbacks == ["CLARABEL:NumericalError", "CLARABEL retry:NumericalError"]
    np.testing.assert_allclose(u, reference, atol=2e-5)


def test_a_real_stalled_solve_goes_through_the_retry():
    agent = soc_agent()
    v, c = _point(agent)
    reference, _ = compile_projection(agent).project(v, c)
    # two iterations cannot solve it; each retry has at least 500
    u, report = ConicProjection(agent, compile_projection(agent).data, settings={"max_iter": 2}).project(v, c)
    assert report.solver == "CLARABEL(retry)" and report.fallbacks == ["CLARABEL:MaxIterations"]
    np.testing.assert_allclose(u, reference, atol=2e-5)  # both at a gap <= 1e-10: sqrt(2 gap / min c) apart


def test_clarabel_and_ecos_failures_are_recorded_when_a_later_solver_succeeds(monkeypatch):
    import clarabel

    x = cp.Variable(3)
    agent = cvxdp.Agent("qp", cp.sum_squares(x), [x >= -1, x <= 1, cp.sum(x) <= 1], shared={"x": x})
    from cvxdp.model.local_solver import ROBUST_SETTINGS

    # the live solver and every retry fail
    _degrade_first_solves(monkeypatch, 1 + len(ROBUST_SETTINGS), clarabel.SolverStatus.NumericalError, r_prim=1.0)

    def broken_ecos(self, *args, **kwargs):
        if kwargs.get("solver") == "ECOS":
            raise cp.SolverError("ECOS broke")
        return real_solve(self, *args, **kwargs)

    real_solve = cp.Problem.solve
    monkeypatch.setattr(cp.Problem, "solve", broken_ecos)
    proj = compile_projection(agent)
    v = np.array([2.0, 0.5, -3.0])
    u, report = proj.project(v, np.ones(3))
    assert report.solver == "OSQP"
    assert report.fallbacks == ["CLARABEL:NumericalError" + "; retry NumericalError" * len(ROBUST_SETTINGS),
                                "ECOS:error (SolverError)"]
    np.testing.assert_allclose(u, [1.0, 0.5, -1.0], atol=1e-4)


# ---------------------------------------------------------------- consensus polishing (exact ADMM)
def _reference_polish(agent, target):
    shared = agent.u_expression()[agent.layout.shared_indices]
    prob = cp.Problem(cp.Minimize(agent.objective), [*agent.constraints, shared == target])
    prob.solve(solver=cp.CLARABEL)
    return prob


@pytest.mark.parametrize("compiled", [True, False])
def test_polish_fixes_the_shared_block_and_minimizes_the_objective(compiled):
    from cvxdp.model import ProxSolver

    agent = soc_agent()
    prox = ProxSolver(agent, compiled=compiled)
    assert prox.path == ("compiled" if compiled else "cvxpy")
    target = np.array([0.2, -0.1, 0.5, 1.5])  # (k: x[1:3], m: y[:, 0]) inside W
    for _ in range(2):  # the second call only updates b on the compiled path
        u, report = prox.polish(target)
        assert u is not None and report.solver in ("CLARABEL", "ECOS")
        assert np.allclose(u[agent.layout.shared_indices], target, atol=1e-7)
        assert agent.violation(u) < 1e-7
        ref = _reference_polish(agent, target)
        assert agent.objective_value(u) == pytest.approx(ref.value, abs=1e-6)


@pytest.mark.parametrize("compiled", [True, False])
def test_polish_reports_an_infeasible_shared_block_as_none(compiled):
    from cvxdp.model import ProxSolver

    agent = soc_agent()
    prox = ProxSolver(agent, compiled=compiled)
    u, report = prox.polish(np.array([0.2, -0.1, 0.5, 3.0]))  # y[1, 0] = 3 > 2
    assert u is None
    assert report.solver != "none"  # a solver answered: infeasible, not a failure
    feasible, _ = prox.polish(np.array([0.2, -0.1, 0.5, 1.0]))  # the live solver is still usable afterwards
    assert feasible is not None and np.allclose(feasible[agent.layout.shared_indices], [0.2, -0.1, 0.5, 1.0])


# ---------------------------------------------------------------------------------- a box read off its declaration
def _box_agents():
    """Boxes declared every way the closed-form path reads: both sides, slices, arrays, equalities, parameters,
    repeated bounds on a coordinate, a matrix variable, a coordinate left free; and sets that are not boxes."""
    x, y, z = cp.Variable(4, name="x"), cp.Variable((2, 3), name="y"), cp.Variable(2, name="z")
    ub = cp.Parameter(4, value=np.array([0.5, 1.0, 2.0, 0.25]))
    box = cvxdp.Agent("box", cp.sum_squares(x - 1) + cp.sum(y) + cp.sum(z),
                      [x <= ub, -1 <= x, x[1:3] >= np.array([-0.3, 0.1]), x[0] <= 0.4, y >= -2.0, y[:, 1] <= 3.0,
                       y[0, 2] == 0.7, 0.0 <= z[0]], shared={"x": x, "y": y[:, 0]})
    w = cp.Variable(3, name="w")
    scaled = cvxdp.Agent("scaled", cp.sum_squares(w), [2 * w <= 1, w >= -1], shared={"w": w})
    coupled = cvxdp.Agent("coupled", cp.sum_squares(w), [w[0] <= w[1], w >= -1, w <= 1], shared={"w": w})
    ball = cvxdp.Agent("ball", cp.sum_squares(w), [cp.norm(w) <= 1], shared={"w": w})
    s = cp.Variable(3, name="s", nonneg=True)
    signed = cvxdp.Agent("signed", cp.sum_squares(s), [s <= 1], shared={"s": s})
    return box, [scaled, coupled, ball, signed]


def test_a_declared_box_is_a_clip_with_the_compiled_bounds_and_no_compile(count_compiles):
    from cvxdp.model.compiled import constraint_data
    from cvxdp.model.local_solver import _box_bounds, declared_box

    box, others = _box_agents()
    fast = compile_projection(box)
    assert isinstance(fast, BoxProjection) and count_compiles["n"] == 0  # nothing canonicalized
    compiled = compile_projection(box, closed_form=False)
    assert isinstance(compiled, BoxProjection) and count_compiles["n"] == 1
    # the very same bounds, bit for bit (inf where a coordinate is free)
    assert np.array_equal(fast.lo, compiled.lo) and np.array_equal(fast.hi, compiled.hi)
    assert np.isinf(fast.hi[box.layout.offsets[2] + 1])  # z[1] is free
    rng = np.random.default_rng(3)
    for _ in range(5):
        v, c = 3 * rng.normal(size=box.layout.size), rng.uniform(0.5, 2.0, size=box.layout.size)
        assert np.array_equal(fast.project(v, c)[0], compiled.project(v, c)[0])
    for agent in others:  # not a box as declared: the compiled path decides (a clip for 2 w <= 1 as well)
        assert declared_box(agent) is None
    assert _box_bounds(constraint_data(others[0])) is not None


def test_box_agents_built_without_canonicalization_replay_the_compiled_run_bit_for_bit(count_compiles):
    from functools import partial

    from cvxdp.families.consensus import node as node_module

    def run(closed_form: bool):
        rng = np.random.default_rng(11)
        agents = []
        for p in range(3):
            x = cp.Variable(3, name=f"x{p}")
            A, b = rng.normal(size=(6, 3)), rng.normal(size=6)
            agents.append(cvxdp.Agent(f"a{p}", cp.sum_squares(A @ x - b) / 6, [x <= 0.5, x >= -0.5 - 0.1 * p],
                                      shared={"x": x}))
        before = count_compiles["n"]
        original = node_module.compile_projection
        if not closed_form:
            node_module.compile_projection = partial(original, closed_form=False)
        try:
            result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, rounds=15), seed=0)
        finally:
            node_module.compile_projection = original
        return result, count_compiles["n"] - before

    fast, fast_compiles = run(True)
    compiled, compiled_compiles = run(False)
    assert fast_compiles == 0 and compiled_compiles == 3
    columns = ["objective", "consensus_residual", "primal_residual", "dual_residual", "max_violation"]
    assert fast.history[columns].equals(compiled.history[columns])
    assert all(np.array_equal(fast.solution[k], compiled.solution[k]) for k in compiled.solution)
    assert all(np.array_equal(fast.local[k], compiled.local[k]) for k in compiled.local)


def test_a_run_without_evaluation_builds_no_metrics(monkeypatch):
    from cvxdp.families.consensus import node as node_module

    built = []
    original = node_module.compiled_metrics
    monkeypatch.setattr(node_module, "compiled_metrics", lambda agent: built.append(agent.name) or original(agent))
    x = cp.Variable(2, name="x")
    agents = [cvxdp.Agent(f"a{p}", cp.sum_squares(x - p), [x <= 1, x >= -1], shared={"x": x}) for p in range(2)]
    cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, rounds=2), seed=0, evaluate=False)
    assert built == []  # built on first use only
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=4.0, rounds=2), seed=0)
    assert sorted(set(built)) == ["a0", "a1"] and np.isfinite(result.history["objective"]).all()


def test_a_uniform_box_clips_to_two_numbers_with_the_arrays_result():
    rng = np.random.default_rng(0)
    lo, hi = np.full(30, -0.25), np.full(30, 0.5)
    uniform, varied = BoxProjection(lo, hi), BoxProjection(lo, np.linspace(0.1, 0.9, 30))
    assert uniform._bounds == (-0.25, 0.5) and varied._bounds[1] is not None and np.ndim(varied._bounds[1]) == 1
    v = rng.normal(size=30)
    v[4] = np.nan
    assert np.array_equal(uniform.project(v, np.ones(30))[0], np.clip(v, lo, hi), equal_nan=True)
