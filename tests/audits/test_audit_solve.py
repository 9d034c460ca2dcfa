"""Audits of every mechanism, bare and through a whole ``cvxdp.solve`` round, and of their broken twins.

Through-solve: one agent, ``f(x; d) = 0.5 (x - d)^2`` on a box, ``d' = d + Delta``, one round with one local
update; 20,000 replicas per input packed as coordinates. Claims: epsilon = 1 per step (Gaussian delta =
1e-3, large enough for 20,000 samples to resolve a halved sensitivity). Across seeds 0-5 the lower bounds
were (correct max / half-sensitivity min / reused-seed min): ObjL 0.95 / 1.89 / 8.0, ObjG 0.68 / 1.42 / 8.0,
OutL 0.94 / 1.86 / 8.0, OutG 0.67 / 1.51 / 8.0.
"""

from __future__ import annotations

import json

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.audits.release import BROKEN, AuditResult, audit_local_update, audit_mechanism
from cvxdp.errors import InvalidParameterError
from cvxdp.privacy import make_mechanism

NAMES = ["ObjL", "ObjG", "OutL", "OutG"]
SEED = 2024
SOLVE_TRIALS = 20_000
BARE_TRIALS = 200_000


def mech(name, epsilon=1.0):
    return make_mechanism(name, epsilon=epsilon, delta=1e-3 if name.endswith("G") else None)


# ------------------------------------------------------------------ through cvxdp.solve
@pytest.mark.parametrize("name", NAMES)
def test_one_local_update_through_solve_passes_the_audit(name):
    res = audit_local_update(mech(name), trials=SOLVE_TRIALS, seed=SEED)
    assert isinstance(res, AuditResult) and res.claimed == pytest.approx(1.0)
    assert res.delta == (1e-3 if name.endswith("G") else 0.0)
    assert not res.violated and res.epsilon_lower <= res.claimed
    assert res.epsilon_lower > (0.85 if name.endswith("L") else 0.4)  # the audit is not vacuous
    d = res.details
    assert d["mode"] == "solve" and d["broken"] == "none" and d["mechanism"] == name
    assert len(set(d["run_seeds"])) == 3 and d["boundary_fraction"] > 0  # the box is active now and then
    assert res.trials == SOLVE_TRIALS and json.loads(json.dumps(res.to_dict()))["violated"] is False


@pytest.mark.parametrize("name", NAMES)
def test_through_solve_catches_half_sensitivity(name):
    res = audit_local_update(mech(name), trials=SOLVE_TRIALS, seed=SEED, broken="half-sensitivity")
    assert res.violated and res.epsilon_lower > 1.2 * res.claimed
    assert res.details["declared_sensitivity"] == 0.5 and res.statistic == "output"


@pytest.mark.parametrize("name", NAMES)
def test_through_solve_catches_a_reused_seed(name):
    res = audit_local_update(mech(name), trials=SOLVE_TRIALS, seed=SEED, broken="reused-seed")
    assert res.violated and res.epsilon_lower > 5 * res.claimed
    assert res.statistic == "difference" and res.details["run_seeds"] == [SEED] * 3
    # each run on its own is a correct mechanism: only the pairing gives the bug away
    assert res.details["statistics"]["output"] <= res.claimed


def test_packed_replicas_are_one_coordinate_runs():
    """Coordinate 0 of a packed run is exactly the one-coordinate run with the same seed."""
    privacy = mech("ObjL")
    algo = cvxdp.LinearizedADMM(rho=1.0, eta=1.0, local_updates=1, rounds=1)
    outs = []
    for n in (1, 500):
        x = cp.Variable(n)
        d = cp.Parameter(n, value=np.full(n, 0.3))
        agent = cvxdp.Agent("audit", 0.5 * cp.sum_squares(x - d), [x >= -2, x <= 2], shared={"x": x},
                            gradient=lambda u, d=d: u - d.value, sensitivity=cvxdp.Sensitivity(l1=1.0, l2=1.0))
        outs.append(cvxdp.solve([agent], algorithm=algo, privacy=privacy, seed=11).local["audit"])
    assert outs[0][0] == outs[1][0]
    assert np.unique(outs[1]).size > 400  # and the other coordinates are fresh draws


# ------------------------------------------------------------------ bare mechanism
@pytest.mark.parametrize("name", NAMES)
def test_bare_mechanism_audits(name):
    m = mech(name)
    ok = audit_mechanism(m, trials=BARE_TRIALS, seed=SEED)
    assert not ok.violated and ok.epsilon_lower > (0.9 if name.endswith("L") else 0.5)
    assert ok.details["mode"] == "mechanism" and ok.claimed == 1.0
    half = audit_mechanism(m, trials=BARE_TRIALS, seed=SEED, broken="half-sensitivity")
    assert half.violated and half.epsilon_lower > 1.4
    reused = audit_mechanism(m, trials=BARE_TRIALS, seed=SEED, broken="reused-seed")
    assert reused.violated and reused.statistic == "difference"


def test_bare_audit_is_reproducible_by_seed():
    a = audit_mechanism(mech("OutL"), trials=50_000, seed=5)
    b = audit_mechanism(mech("OutL"), trials=50_000, seed=5)
    assert a == b


@pytest.mark.parametrize("kwargs,match", [
    ({"broken": "half"}, "'broken' parameter of audit_mechanism must be one of"),
    ({"trials": 5}, "'trials'"),
    ({"sensitivity": 0.0}, "'sensitivity'"),
    ({"seed": -1}, "'seed'"),
    ({"alpha": 1.0}, "'alpha'"),
])
def test_audit_checks_arguments(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        audit_mechanism(mech("ObjL"), **kwargs)


def test_audit_needs_a_mechanism():
    with pytest.raises(InvalidParameterError, match="'mechanism' parameter of audit_local_update"):
        audit_local_update("ObjL", trials=100)
    with pytest.raises(InvalidParameterError, match="'rho'"):
        audit_local_update(mech("ObjL"), trials=100, rho=0.0)
    assert BROKEN == ("none", "half-sensitivity", "reused-seed")
