"""Exact ADMM's consensus polishing: what each round adds, what the run returns, save/load, release, resume."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.errors import InvalidParameterError
from cvxdp.families.consensus.server import copies_mean
from cvxdp_models.toy import make_agents

POLISH_COLUMNS = ("polished", "polished_objective", "wall_time", "solver_time")


def _agents(n: int = 2):
    """Two agents: the mean of their copies is feasible for both in every round (boxes, a ball)."""
    return make_agents(agents=n, dim=3, samples=10, seed=1)


def _every_round(**kwargs) -> cvxdp.ADMM:
    """Exact ADMM that polishes in every round (its default waits for the copies to agree: see the last test)."""
    algo = cvxdp.ADMM(**kwargs)
    algo.polish_below = None
    return algo


def _copies_mean(result, agents):
    """The mean of the agents' final shared copies, per key (from their local vectors)."""
    keys = sorted({k for a in agents for k in a.layout.shared})
    sizes = {k: next(len(a.layout.shared[k]) for a in agents if k in a.layout.shared) for k in keys}
    offsets = dict(zip(keys, np.cumsum([0] + [sizes[k] for k in keys])[:-1]))
    gidx = [np.concatenate([offsets[k] + np.arange(sizes[k]) for k in sorted(a.layout.shared)]) for a in agents]
    mean = copies_mean([result.local[a.name][a.layout.shared_indices] for a in agents], gidx, sum(sizes.values()))
    return {k: mean[offsets[k]:offsets[k] + sizes[k]] for k in keys}


def test_polishing_leaves_the_iterates_unchanged():
    agents = _agents()
    on = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=6), seed=0)
    off = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=6, polish=False), seed=0)
    cols = [c for c in off.history.columns if c not in POLISH_COLUMNS]
    pd.testing.assert_frame_equal(on.history[cols], off.history[cols], check_exact=True)
    assert all(np.array_equal(on.local[n], off.local[n]) for n in off.local)
    assert off.polished is None and "polished" not in off.history and "polished_objective" not in off.history
    assert on.config["algorithm"]["polish"] is True and off.config["algorithm"]["polish"] is False


def test_the_polished_point_is_feasible_agrees_and_fixes_the_previous_rounds_mean():
    agents = _agents()
    result = cvxdp.solve(agents, algorithm=_every_round(rounds=5), seed=0)
    polished = result.polished
    assert polished is not None and polished["round"] == 5  # feasible in every round
    assert result.history["polished"].tolist() == [1.0] * 5
    # the shared block is the mean of the copies released in round 4
    before = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=4, polish=False), seed=0)
    expected = _copies_mean(before, agents)
    assert set(polished["solution"]) == set(expected)
    for key, value in expected.items():
        assert np.allclose(polished["solution"][key], value, atol=1e-12)
    total = 0.0
    for agent in agents:
        u = polished["local"][agent.name]
        for key, idx in agent.layout.shared.items():
            assert np.allclose(u[idx], polished["solution"][key], atol=1e-7)  # every copy equals the mean
        assert agent.violation(u) < 1e-7
        total += agent.objective_value(u)
    last = result.history.iloc[-1]
    assert last["polished_objective"] == pytest.approx(total, rel=1e-9)
    summary = result.summary()
    assert summary["polished_round"] == 5 and summary["polished_objective"] == pytest.approx(total, rel=1e-9)


def test_after_infeasible_rounds_the_run_returns_the_last_complete_polish():
    """The third toy agent's ``sum(x) <= 0.5`` excludes the mean in rounds 3-5: the run returns round 2's point,
    which the agents kept (the same as a run that stops after round 2)."""
    agents = _agents(3)
    result = cvxdp.solve(agents, algorithm=_every_round(rounds=5), seed=0)
    h = result.history
    assert h["polished"].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert h["polished_objective"].iloc[:2].notna().all() and h["polished_objective"].iloc[2:].isna().all()
    short = cvxdp.solve(agents, algorithm=_every_round(rounds=2), seed=0)
    assert result.polished["round"] == short.polished["round"] == 2
    for part in ("solution", "local"):
        assert all(np.array_equal(result.polished[part][k], v) for k, v in short.polished[part].items())
    assert result.summary()["polished_objective"] == pytest.approx(h["polished_objective"].iloc[1])


def test_the_polished_point_saves_loads_and_stays_out_of_the_public_view(tmp_path):
    result = cvxdp.solve(_agents(), algorithm=_every_round(rounds=3), seed=0)
    loaded = cvxdp.load_result(result.save(tmp_path / "full"))
    assert loaded.polished["round"] == 3
    for part in ("solution", "local"):
        assert set(loaded.polished[part]) == set(result.polished[part])
        assert all(np.array_equal(loaded.polished[part][k], v) for k, v in result.polished[part].items())
    public = cvxdp.load_result(result.save(tmp_path / "public", public=True))
    assert public.polished["local"] == {}  # the agents' polished solutions hold their private coordinates
    assert all(np.array_equal(public.polished["solution"][k], v) for k, v in result.polished["solution"].items())
    assert "polished" in public.history and "polished_objective" not in public.history


def test_a_resumed_run_returns_the_uninterrupted_polished_point(tmp_path):
    agents = _agents()
    algo = _every_round(rounds=6)
    full = cvxdp.solve(agents, algorithm=algo, seed=0)

    class Stop(Exception):
        pass

    def interrupt(t, row):
        if t == 4:
            raise Stop

    with pytest.raises(Stop):
        cvxdp.solve(agents, algorithm=algo, seed=0, checkpoint=tmp_path, callback=interrupt)
    resumed = cvxdp.solve(agents, algorithm=algo, seed=0, checkpoint=tmp_path)
    assert resumed.polished["round"] == full.polished["round"] == 6
    assert all(np.array_equal(resumed.polished["local"][n], full.polished["local"][n]) for n in full.polished["local"])
    assert np.array_equal(resumed.history["polished_objective"], full.history["polished_objective"])
    with pytest.raises(cvxdp.errors.CvxdpError, match="another configuration"):  # polishing is part of the problem
        cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=6, polish=False), seed=0, checkpoint=tmp_path)


def test_polish_must_be_a_bool():
    with pytest.raises(InvalidParameterError, match=r"The 'polish' parameter of ADMM must be a bool\. Got 'yes'"):
        cvxdp.solve(_agents(), algorithm=cvxdp.ADMM(rounds=2, polish="yes"))


def _coupled_agents():
    """A's ``a + b == 1`` and B's ``a == b`` hold at the mean of their copies only at exact consensus: a polish
    that fails until the copies agree to the solver's tolerance (what case1354pegase's boundary buses do)."""
    import cvxpy as cp

    a1, b1, a2, b2 = (cp.Variable() for _ in range(4))
    box = lambda *v: [cp.abs(x) <= 5 for x in v]  # noqa: E731
    return [cvxdp.Agent("A", cp.square(a1 - 1) + cp.square(b1), [a1 + b1 == 1, *box(a1, b1)], shared={"a": a1, "b": b1}),
            cvxdp.Agent("B", cp.square(a2) + cp.square(b2 - 1), [a2 == b2, *box(a2, b2)], shared={"a": a2, "b": b2})]


def test_polish_gap_backs_off_after_the_patience_and_is_capped():
    algo = cvxdp.ADMM()
    assert [algo.polish_gap(f) for f in range(14)] == [1] * 8 + [2, 4, 8, 8, 8, 8]


def test_a_polish_that_keeps_failing_is_attempted_less_often():
    result = cvxdp.solve(_coupled_agents(), algorithm=_every_round(rho=100.0, rounds=40), seed=0)
    h = result.history
    attempted = h["round"][h["polished"].notna()].tolist()
    assert attempted == [*range(1, 9), 10, 14, 22, 30, 38]
    assert (h["polished"].dropna() == 0.0).all() and h["polished_objective"].isna().all()
    assert result.polished is None and "polished_round" not in result.summary()
    assert h["mismatch"].iloc[-1] < 1e-4  # the iterate converges all the same


def test_by_default_a_round_polishes_once_the_copies_agree_ten_times_better_than_in_round_one():
    """The gate reads the released mismatch only: no polish (NaN) until the round after the mismatch fell to a
    tenth of round 1's; from then on the same polished points as a run that polishes in every round."""
    agents = _agents()
    gated = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rounds=12), seed=0).history
    every = cvxdp.solve(agents, algorithm=_every_round(rounds=12), seed=0).history
    mismatch = gated["mismatch"].to_numpy()
    below = mismatch <= 0.1 * mismatch[0]
    first = int(np.argmax(below)) + 2  # the round after the first round whose copies agree well enough
    assert below.any() and 2 < first <= 12
    assert gated["polished"].iloc[:first - 1].isna().all()
    assert gated["polished"].iloc[first - 1] == every["polished"].iloc[first - 1] == 1.0
    attempted = gated["polished"].notna().to_numpy()
    assert np.array_equal(attempted[1:], below[:-1])  # round t polishes iff round t-1's copies agreed
    same = gated["polished_objective"].notna()
    assert np.array_equal(gated["polished_objective"][same], every["polished_objective"][same])
