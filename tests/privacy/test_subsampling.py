"""Subsampled local updates (issue 39, item 3): the mechanisms' ``sampling_rate``, its events, plans and checks."""

from __future__ import annotations

import dp_accounting
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, InvalidParameterError
from cvxdp.privacy import NoisePlan, PrivacyLedger, calibrate_to_total, make_mechanism
from cvxdp.privacy.accounting import event_from_dict, event_to_dict, group_events
from cvxdp_models.logistic.multiclass import MulticlassLogistic

Q, C = 0.1, 1.0


def _mech(name: str = "ObjG", **kw):
    return make_mechanism(name, epsilon=1.0, delta=1e-5, calibrate="total", sampling_rate=Q, clip_norm=C, **kw)


def _model(n: int = 30, total: int = 100, seed: int = 0) -> MulticlassLogistic:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    return MulticlassLogistic(X, rng.integers(0, 3, n), classes=3, total=total, bound=1.0, name="a", clip=1.0)


def test_the_plan_is_a_poisson_sampled_gaussian_at_the_declared_rate():
    agent = _model().agent()
    plan = _mech().noise_plan(agent, min_weight=1.0, separable=True, steps=40, accountant="pld")
    event = plan.dp_event()
    assert isinstance(event, dp_accounting.PoissonSampledDpEvent) and event.sampling_probability == Q
    assert isinstance(event.event, dp_accounting.GaussianDpEvent)
    assert plan.sensitivity == pytest.approx(C / (Q * 100))  # C / (q N), add/remove one record
    assert "Poisson sample of rate 0.1" in plan.relation and plan.clip_norm == C
    # amplification: less noise (relative to the sensitivity) than the same budget without sampling
    full = calibrate_to_total("gaussian", 1.0, 1.0, 1e-5, 40, "pld")
    assert plan.noise_multiplier < 0.5 * full
    # the coordinator sees the declaration only: the same plan from it
    public = _mech().noise_plan(agent.declaration(), min_weight=1.0, separable=True, steps=40, accountant="pld")
    assert public == plan


def test_each_subsampled_step_claims_its_share_of_the_delta_and_the_epsilon_at_it():
    """Per step: delta / steps, and the PLD epsilon of one Poisson-sampled Gaussian call at that delta."""
    steps = 40
    plan = _mech().noise_plan(_model().agent(), min_weight=1.0, separable=True, steps=steps, accountant="pld")
    assert plan.delta == pytest.approx(1e-5 / steps)
    event = dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(plan.scale / plan.sensitivity))
    accountant = dp_accounting.pld.PLDAccountant()
    accountant.compose(event)
    assert plan.epsilon == pytest.approx(accountant.get_epsilon(1e-5 / steps), rel=1e-3)


def test_the_ledger_states_the_rate_and_composes_to_the_total():
    plan = _mech().noise_plan(_model().agent(), min_weight=1.0, separable=True, steps=40, accountant="pld")
    ledger = PrivacyLedger(["a"], target_delta=1e-5)
    ledger.record("a", plan, 40)
    assert ledger.spent("a", "pld")[0] <= 1.0 * (1 + 1e-9)
    assert ledger.spent("a", "pld")[0] > 0.99  # the calibration is tight
    saved = ledger.to_dict()
    row = saved["agents"]["a"][0]
    assert row["event"]["type"] == "poisson" and row["event"]["sampling_probability"] == Q
    assert row["event"]["event"]["type"] == "gaussian"
    assert PrivacyLedger.from_dict(saved) == ledger
    assert event_from_dict(event_to_dict(plan.dp_event())) == plan.dp_event()
    assert NoisePlan.from_dict(plan.to_dict()) == plan
    # events at different rates never merge
    other = dp_accounting.PoissonSampledDpEvent(0.2, plan.dp_event().event)
    assert len(group_events([(plan.dp_event(), 1), (other, 1)])) == 2


@pytest.mark.parametrize("kw, match", [
    ({"noise": "laplace"}, None),
    ({"calibrate": "step"}, "calibrate=\"total\""),
    ({"clip_norm": None}, "clip_norm"),
    ({"sensitivity": "paper"}, "sensitivity=\"exact\""),
])
def test_invalid_subsampled_mechanisms_are_refused(kw, match):
    params = {"epsilon": 1.0, "delta": 1e-5, "calibrate": "total", "sampling_rate": Q, "clip_norm": C, **kw}
    name = "ObjL" if params.pop("noise", None) == "laplace" else "ObjG"
    with pytest.raises(InvalidParameterError, match=match or "Gaussian noise"):
        make_mechanism(name, **params)


def test_clip_norm_without_sampling_and_out_of_range_rates_are_refused():
    with pytest.raises(InvalidParameterError, match="clip_norm"):
        make_mechanism("ObjG", epsilon=1.0, delta=1e-5, clip_norm=1.0)
    for q in (0.0, 1.0, 1.5):
        with pytest.raises(InvalidParameterError, match="sampling_rate"):
            make_mechanism("ObjG", epsilon=1.0, delta=1e-5, calibrate="total", sampling_rate=q, clip_norm=1.0)


def test_basic_accounting_and_agents_without_per_example_gradients_are_refused():
    agent = _model().agent()
    with pytest.raises(InvalidParameterError, match="rdp.*pld"):
        _mech().noise_plan(agent, min_weight=1.0, separable=True, steps=4, accountant="basic")
    agent.per_example = None
    with pytest.raises(DeclarationError, match="per_example"):
        _mech().noise_plan(agent, min_weight=1.0, separable=True, steps=4, accountant="pld")
    replace = MulticlassLogistic(np.eye(2), np.array([0, 1]), classes=2, total=2, bound=1.0, name="r", clip=1.0,
                                 relation="replace").agent()
    with pytest.raises(DeclarationError, match="add/remove one record"):
        _mech().noise_plan(replace, min_weight=1.0, separable=True, steps=4, accountant="pld")


def test_per_example_gradients_clip_and_sum():
    m = _model()
    u = np.random.default_rng(1).normal(size=12)
    every = np.arange(len(m.y))
    # no clipping: the full gradient times the normaliser
    np.testing.assert_allclose(m.clipped_sum(u, every, 1e9) / m.total, m.gradient(u), rtol=1e-10, atol=1e-12)
    # each clipped per-example gradient has norm at most the clip
    for i in range(5):
        assert np.linalg.norm(m.clipped_sum(u, np.array([i]), 0.05)) <= 0.05 * (1 + 1e-12)
    # the Poisson sample comes from the caller's generator: same state, same sample; rate q on average
    pe = m.per_example()
    a = pe.gradient(u, np.random.default_rng(3), 0.5, 1.0)
    b = pe.gradient(u, np.random.default_rng(3), 0.5, 1.0)
    np.testing.assert_array_equal(a, b)
    sizes = [cvxdp.model.poisson_sample(np.random.default_rng(s), 1000, 0.1).size for s in range(20)]
    assert 80 < np.mean(sizes) < 120
    assert len(set(sizes)) > 5  # a random size (binomial, sd 9.5), not a fixed batch of q n records
    rng = np.random.default_rng(4)
    assert not np.array_equal(cvxdp.model.poisson_sample(rng, 1000, 0.1), cvxdp.model.poisson_sample(rng, 1000, 0.1))
    # every record's inclusion rate and the sample's spread: tests/model/test_agent.py


def test_a_subsampled_run_records_its_events_and_meets_the_budget():
    parts = [(_model(seed=s).X, _model(seed=s).y) for s in range(3)]
    agents = [MulticlassLogistic(X, y, classes=3, total=90, bound=1.0, name=f"a{i}", clip=1.0).agent()
              for i, (X, y) in enumerate(parts)]
    res = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=0.1, eta=1.0, rounds=2), privacy=_mech(), seed=0)
    assert res.privacy["worst"]["pld"] <= 1.0 * (1 + 1e-9)
    for name in ("a0", "a1", "a2"):
        (event, _, count), = res.ledger.entries(name)
        assert isinstance(event, dp_accounting.PoissonSampledDpEvent) and event.sampling_probability == Q
        assert count == 2
    again = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=0.1, eta=1.0, rounds=2), privacy=_mech(), seed=0)
    np.testing.assert_array_equal(res.solution["theta"], again.solution["theta"])  # seeded: same samples and noise


def test_total_epsilon_of_a_sampled_calibration_is_its_budget_and_more_without_sampling():
    from cvxdp.privacy import calibrate_to_total, total_epsilon

    scale = calibrate_to_total("gaussian", 1.0, 1.0, 1e-5, 400, "pld", sampling_rate=0.1)
    eps, delta = total_epsilon("gaussian", scale, 1.0, 400, 1e-5, "pld", sampling_rate=0.1)
    assert 0.99 < eps <= 1.0 and delta == 1e-5
    assert total_epsilon("gaussian", scale, 1.0, 400, 1e-5, "pld")[0] > 10.0  # the same noise on full batches
    assert total_epsilon("gaussian", scale, 1.0, 400, 1e-5, "pld", sampling_rate=1.0)[0] > 10.0
    with pytest.raises(InvalidParameterError, match="no amplification by sampling"):
        total_epsilon("gaussian", scale, 1.0, 400, 1e-5, "basic", sampling_rate=0.1)
    with pytest.raises(InvalidParameterError, match="'sampling_rate' parameter of total_epsilon"):
        total_epsilon("gaussian", scale, 1.0, 400, 1e-5, "pld", sampling_rate=0.0)
