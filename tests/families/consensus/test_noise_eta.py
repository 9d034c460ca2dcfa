"""eta that grows with the noise in a private run with eta="auto" (cvxdp.families.consensus.step_sizes, issue 12 item 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cvxdp
from cvxdp.errors import InvalidParameterError
from cvxdp.families.consensus.step_sizes import (
    ALIGNED,
    BURN_IN,
    CAP,
    GROWTH,
    NoiseEta,
    noise_dominated,
    release_noise_std,
)
from cvxdp.schedules import AutoEta
from cvxdp_models.toy import make_agents

OBJG = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6)
OUTG = cvxdp.OutputPerturbation("gaussian", epsilon=1.0, delta=1e-6)
FIXED = AutoEta(noise_growth=1.0)


def _statistics(path: np.ndarray) -> tuple[float, float, int, float]:
    """corr, energy, count and net of a copy's path (rows = rounds), as NoiseEta accumulates them."""
    moves = np.diff(path, axis=0)
    corr = float(sum(a @ b for a, b in zip(moves[1:], moves[:-1])))
    energy = float(sum(m @ m for m in moves[1:]))
    return corr, energy, len(moves) - 1, float(np.linalg.norm(path[-1] - path[0]))


# ------------------------------------------------------------------------------------------ the test
def test_noise_around_a_point_is_detected_and_a_drift_or_the_dynamics_are_not():
    rng = np.random.default_rng(0)
    n, sigma, rounds = 40, 0.1, BURN_IN + 2
    noise_var = n * sigma**2  # from the plan's bound; the released noise is smaller (projection, averaging)
    hovering = 1.0 + 0.8 * sigma * rng.normal(size=(rounds, n))
    assert noise_dominated(*_statistics(hovering), noise_var, remaining=50)
    # the same noise on a drift that the remaining rounds would still carry far: keep eta
    drifting = hovering + np.outer(np.arange(rounds), np.full(n, 0.03))
    assert not noise_dominated(*_statistics(drifting), noise_var, remaining=50)
    # ... but near the end of the run the drift left is smaller than the noise still to come
    assert noise_dominated(*_statistics(drifting), noise_var, remaining=1)
    # an oscillation of the dynamics, ten times the noise: not the noise's doing
    swinging = hovering + np.outer((-1.0) ** np.arange(rounds), np.full(n, 10 * sigma))
    assert not noise_dominated(*_statistics(swinging), noise_var, remaining=50)
    # a steady drift with little noise: its moves are aligned, even on the last round
    steady = np.outer(np.arange(rounds), np.full(n, 0.05)) + 0.1 * sigma * rng.normal(size=(rounds, n))
    corr, energy, count, net = _statistics(steady)
    assert corr > ALIGNED * energy and not noise_dominated(corr, energy, count, net, noise_var, remaining=1)
    # no noise (a non-private run), or too few moves: never
    assert not noise_dominated(*_statistics(swinging), 0.0, remaining=50)
    assert not noise_dominated(*_statistics(hovering[:BURN_IN]), noise_var, remaining=50)


def test_the_multiplier_grows_resets_its_statistics_and_stops_at_the_cap():
    rng = np.random.default_rng(1)
    state = NoiseEta.start(2)
    sigma = 0.1
    copies = [np.ones(30), np.ones(30)]
    grew_at = None
    for t in range(1, 40):
        new = [copies[0] + sigma * rng.normal(size=30), copies[1] + 0.5 * t * np.ones(30)]  # noise / a drift
        state.observe(copies, new, [sigma, sigma], remaining=100)
        copies = [copies[0], new[1]]  # agent 0 hovers around 1, agent 1 drifts
        if grew_at is None and state.scale[0] > 1:
            grew_at = t
            assert state.count[0] == 0 and state.corr[0] == 0.0  # a fresh window after each change
    assert grew_at is not None and grew_at >= BURN_IN + 1
    assert state.scale[1] == 1.0  # the drifting agent keeps its eta
    assert math.log(state.scale[0], GROWTH) == pytest.approx(round(math.log(state.scale[0], GROWTH)))
    state.scale[0] = CAP
    state.observe(copies, [copies[0] + sigma, copies[1]], [sigma, sigma], remaining=100)
    assert state.scale[0] <= CAP


def test_release_noise_std_of_each_placement():
    assert release_noise_std(2.0, "gaussian", "output", 4.0) == 2.0
    assert release_noise_std(2.0, "gaussian", "objective", 4.0) == 0.5
    assert release_noise_std(2.0, "laplace", "objective", 4.0) == pytest.approx(math.sqrt(2) / 2)


def test_noise_growth_is_validated_like_every_parameter():
    with pytest.raises(InvalidParameterError, match=r"'noise_growth' parameter of AutoEta must be a float in \[1"):
        AutoEta(noise_growth=0.5)


# ------------------------------------------------------------------------------------------ in a run
@pytest.mark.parametrize("mechanism", [OBJG, OUTG], ids=["ObjG", "OutG"])
def test_a_private_auto_run_grows_eta_and_ends_closer_to_the_optimum(mechanism):
    agents = make_agents(seed=5)
    grown, fixed = [], []
    for seed in range(3):
        a = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=60), privacy=mechanism, seed=seed)
        b = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=60, eta=FIXED), privacy=mechanism, seed=seed)
        chosen = a.config["eta_per_agent"]
        assert all(v["final_eta"] == v["eta"] * v["noise_growth"] for v in chosen.values())
        assert max(v["noise_growth"] for v in chosen.values()) >= GROWTH
        assert a.history["eta"].is_monotonic_increasing and a.history["eta"].iloc[-1] > a.history["eta"].iloc[0]
        assert b.history["eta"].nunique() == 1 and "noise_growth" not in next(iter(b.config["eta_per_agent"].values()))
        # the growth reads released values only: the privacy spent is the fixed run's
        assert a.privacy["worst"] == b.privacy["worst"]
        grown.append(a.history["objective"].iloc[-1])
        fixed.append(b.history["objective"].iloc[-1])
    assert all(g < f for g, f in zip(grown, fixed)), (grown, fixed)


def test_a_non_private_or_explicit_eta_run_does_not_grow():
    agents = make_agents(seed=5)
    plain = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=30), seed=0)
    assert plain.history["eta"].nunique() == 1
    assert "noise_growth" not in next(iter(plain.config["eta_per_agent"].values()))
    explicit = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rounds=30, eta=2.0), privacy=OBJG, seed=0)
    assert explicit.history["eta"].nunique() == 1


def test_a_resumed_private_auto_run_continues_the_growth(tmp_path):
    agents = make_agents(seed=5)
    algo = dict(algorithm=cvxdp.LinearizedADMM(rounds=40), privacy=OBJG, seed=3)
    reference = cvxdp.solve(agents, **algo)

    def interrupt(t, row):
        if t == 17:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cvxdp.solve(agents, checkpoint=tmp_path, callback=interrupt, **algo)
    resumed = cvxdp.solve(agents, checkpoint=tmp_path, **algo)
    assert resumed.history["eta"].tolist() == reference.history["eta"].tolist()
    assert resumed.history["objective"].tolist() == reference.history["objective"].tolist()
    assert resumed.config["eta_per_agent"] == reference.config["eta_per_agent"]
