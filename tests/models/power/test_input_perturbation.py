"""One-shot input perturbation of the power template's loads (issue 39): what it perturbs, what it restores, what
it spends, and an audit through the template's own code path that catches a broken twin."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")

import cvxdp_models.power.template as power  # noqa: E402
from cvxdp.audits.release import audit_input_perturbation  # noqa: E402
from cvxdp.errors import ConfigError  # noqa: E402
from cvxdp.privacy import InputPerturbation  # noqa: E402

ZONES = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]
ALPHA = 0.1


@pytest.fixture(scope="module")
def zone_model():
    inst = power.build({"network": "case14", "zones": ZONES, "objective": "cost", "penalty": 100.0,
                        "alpha": ALPHA}, base_dir=Path("."))
    return inst.perturbed_inputs.__self__  # the ZoneModel behind the hook


def _loads(zm):
    return [np.concatenate([m.pd.value, m.qd.value]) for m in zm.models]


def test_the_loads_are_perturbed_inside_the_block_and_restored_after(zone_model):
    before = _loads(zone_model)
    mech = InputPerturbation("laplace", 1.0)
    with zone_model.perturbed_loads(mech, seed=3) as releases:
        inside = _loads(zone_model)
        grad = zone_model.agents[0].gradient(np.zeros(zone_model.models[0].layout.size))
    assert all(not np.allclose(a, b) for a, b in zip(before, inside))
    assert all(np.array_equal(a, b) for a, b in zip(before, _loads(zone_model)))
    # the gradient read the perturbed loads: it differs from the one at the true loads
    assert not np.allclose(grad, zone_model.agents[0].gradient(np.zeros(zone_model.models[0].layout.size)))
    assert set(releases) == {"zone1", "zone2", "zone3"}
    r = releases["zone1"]
    assert r.sensitivity == pytest.approx(2 * ALPHA) and r.scale == pytest.approx(2 * ALPHA / 1.0)
    assert (r.epsilon, r.delta) == (1.0, 0.0)


def test_the_same_seed_gives_the_same_noise_and_zones_get_different_streams(zone_model):
    mech = InputPerturbation("gaussian", 1.0, 1e-5)
    with zone_model.perturbed_loads(mech, seed=7):
        a = _loads(zone_model)
    with zone_model.perturbed_loads(mech, seed=7):
        b = _loads(zone_model)
    with zone_model.perturbed_loads(mech, seed=8):
        c = _loads(zone_model)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.allclose(a[0], c[0])
    true = _loads(zone_model)
    noise = [x - t for x, t in zip(a, true)]
    assert not np.allclose(noise[0][:3], noise[1][:3])


def test_the_block_installs_the_noisy_loads_of_the_same_seed(zone_model):
    mech = InputPerturbation("laplace", 2.0)
    noisy = zone_model.noisy_loads(mech, seed=5)
    with zone_model.perturbed_loads(mech, seed=5):
        inside = _loads(zone_model)
    assert all(np.array_equal(noisy[f"zone{p}"][0], inside[p - 1]) for p in (1, 2, 3))


def test_the_loads_are_restored_when_the_block_raises(zone_model):
    before = _loads(zone_model)
    with pytest.raises(RuntimeError), zone_model.perturbed_loads(InputPerturbation("laplace", 1.0), seed=0):
        raise RuntimeError("stop")
    assert all(np.array_equal(a, b) for a, b in zip(before, _loads(zone_model)))


def test_the_sensitivity_is_one_bus_moving_by_alpha_in_p_and_q():
    assert power.input_sensitivity(0.1) == pytest.approx((0.2, math.sqrt(2) * 0.1))


def test_exact_balance_has_no_loads_in_the_objective_to_perturb():
    inst = power.build({"network": "case14", "zones": ZONES, "objective": "cost"}, base_dir=Path("."))
    with pytest.raises(ConfigError, match="penalty > 0"), inst.perturbed_inputs(InputPerturbation("laplace", 1.0)):
        pass


# --------------------------------------------------------------------------- audit through the template's path
def _template_release(zm, mech):
    """One release of zone 1's loads through the template's ZoneModel.noisy_loads (what perturbed_loads uses)."""
    def release(v, rng):
        return zm.noisy_loads(mech, seed=int(rng.integers(2**63)), loads={"zone1": v})["zone1"][0]
    return release


def _audit(zm, mech, trials=10_000):
    x = np.concatenate([zm.models[0].pd.value, zm.models[0].qd.value])
    xp = x.copy()
    n = len(zm.models[0].pd.value)
    xp[1] += ALPHA  # bus 2's active and reactive loads move by alpha: a neighbour under the declared relation
    xp[n + 1] += ALPHA
    l1, l2 = power.input_sensitivity(ALPHA)
    return audit_input_perturbation(mech, x, xp, l1=l1, l2=l2, release=_template_release(zm, mech), trials=trials,
                                    seed=2024)


def test_the_honest_laplace_release_passes_its_audit(zone_model):
    res = _audit(zone_model, InputPerturbation("laplace", 1.0))
    assert not res.violated and res.epsilon_lower > 0.5  # tight enough that a doubled epsilon shows


def test_a_release_calibrated_to_one_coordinate_is_caught(zone_model, monkeypatch):
    """Broken twin: the template counts only the active load of the changed bus (Delta_1 = alpha, not 2 alpha),
    so the noise is half what the relation needs; the ledger still claims epsilon = 1."""
    monkeypatch.setattr(power, "input_sensitivity", lambda alpha: (alpha, alpha))
    mech = InputPerturbation("laplace", 1.0)
    res = _audit(zone_model, mech)
    assert res.claimed == 1.0 and res.violated and res.epsilon_lower > 1.2


def test_the_honest_gaussian_release_passes_its_audit(zone_model):
    """Measured (seeds 2024 / 0 / 1): 0.32 / 0.28 / 0.31 against the claim 1.0. At this size noise drawn at half its
    scale reaches only 0.84 / 0.83 / 0.89 (not refuted): tests/audits/test_release.py audits that twin with 50,000
    releases at epsilon 2, where it is refuted, and tests/privacy/test_input.py checks the drawn spread."""
    res = _audit(zone_model, InputPerturbation("gaussian", 1.0, 1e-5))
    assert res.claimed == 1.0 and not res.violated and res.epsilon_lower > 0.2  # the audit sees the release
