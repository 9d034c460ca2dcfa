"""Presets that say what they are (issue 11): paper presets are flagged in ledger and reports, the sharing
default is sound, a failed assumption voids the claim, penalty perturbation's guarantee is conditional,
and a private run refuses an undeclared initial point."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, PrivacyWarning
from cvxdp.families.sharing.params import AssumptionViolation, lemma1_sensitivity
from cvxdp.privacy import PAPER_PRESET, PrivacyLedger


def _box_agent(name="a", alpha=0.1, initial=None, initial_public=False):
    x = cp.Variable(2, name="x")
    d = cp.Parameter(2, value=np.array([0.3, -0.2]), name=f"d_{name}")
    return cvxdp.Agent(name, 0.5 * cp.sum_squares(x - d), [x <= 1, x >= -1], shared={"x": x},
                       gradient=lambda u: u - d.value, initial=initial, initial_public=initial_public,
                       sensitivity=cvxdp.Sensitivity(l1=2 * alpha, l2=math.sqrt(2) * alpha, alpha=alpha,
                                                     relation="one coordinate of d moves by alpha"))


def test_paper_preset_is_flagged_in_ledger_summary_and_warns(monkeypatch):
    import cvxdp.privacy.accounting as notes

    monkeypatch.setattr(notes, "_WARNED", set())
    alg = cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=3)  # the pre-issue-12 defaults, explicit
    mech = cvxdp.ObjectivePerturbation("laplace", epsilon=1.0, sensitivity="paper")
    with pytest.warns(PrivacyWarning, match="Not a privacy guarantee: paper preset"):
        res = cvxdp.solve([_box_agent()], algorithm=alg, privacy=mech, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: the second run is silent
        cvxdp.solve([_box_agent()], algorithm=alg, privacy=mech, seed=0)
    assert res.privacy["guarantee"] is False
    assert res.privacy["notes"][0]["reason"] == PAPER_PRESET and res.privacy["notes"][0]["voids"]
    summary = res.summary()
    assert summary["guarantee"] is False and "not a privacy guarantee" in summary["privacy_notes"][0]
    again = PrivacyLedger.from_dict(res.ledger.to_dict())
    assert again.guarantee is False and again == res.ledger
    exact = cvxdp.solve([_box_agent()], algorithm=alg, privacy=cvxdp.ObjectivePerturbation(
        "laplace", epsilon=1.0), seed=0)
    assert exact.privacy["guarantee"] is True and not any(n["voids"] for n in exact.privacy["notes"])
    assert all(n["reason"].startswith("Public assumption: ") for n in exact.privacy["notes"])  # issue 36, item 4


def test_paper_preset_true_over_claimed_epsilon_on_case14():
    """The preset's Delta = 2 alpha (ObjPert) / alpha (OutPert) against the model's own relation."""
    pytest.importorskip("pandapower", reason="pandapower is not installed: pip install -e '.[power]'")
    from pathlib import Path

    from cvxdp_models.power.template import build

    zones = [[1, 2, 3, 4, 5], [6, 10, 11, 12, 13], [7, 8, 9, 14]]
    ratios = {}
    for objective, penalty in (("balance", 1.0), ("cost", 25.0)):
        inst = build({"network": "case14", "zones": zones, "objective": objective, "penalty": penalty,
                      "alpha": 0.1}, base_dir=Path("."))
        agent = inst.agents[0]
        for name in ("ObjL", "OutG"):
            mech = cvxdp.privacy.make_mechanism(name, epsilon=1.0, delta=1e-6 if name == "OutG" else None)
            kw = dict(min_weight=1.92, separable=True, steps=1, accountant="pld")
            exact = mech.calibrated_sensitivity(agent, min_weight=1.92, separable=True)
            mech.sensitivity = "paper"
            paper = mech.noise_plan(agent, **kw)
            ratios[(objective, name)] = exact / paper.sensitivity
    # Laplace: epsilon scales with the sensitivity ratio exactly
    assert ratios[("balance", "ObjL")] == pytest.approx(2.0)
    assert ratios[("cost", "ObjL")] == pytest.approx(50.0)
    assert ratios[("balance", "OutG")] == pytest.approx(2 * math.sqrt(2) / 1.92)  # ~1.47


def test_paper_preset_flagged_in_study_report(tmp_path):
    import pandas as pd

    from cvxdp.studies.grid import load_study, write_report

    results = pd.DataFrame([{"cell": "c", "mechanism": "ObjL", "epsilon": 1.0, "local_updates": 1, "seed": 0,
                             "objective": 1.0, "max_violation": 0.0, "eps_basic": 1.0, "delta_basic": 0.0,
                             "eps_rdp": 1.0, "eps_pld": 1.0, "guarantee": False}])
    (tmp_path / "c.toml").write_text('[case]\ntemplate = "toy"\n')
    (tmp_path / "s.toml").write_text('[study]\ncase = "c.toml"\nmechanisms = ["ObjL"]\nepsilons = [1.0]\n')
    study = load_study(tmp_path / "s.toml")
    write_report(results, pd.DataFrame(), tmp_path, study)
    text = (tmp_path / "report.md").read_text()
    assert "Paper preset: reproduces the published figure; not a privacy guarantee for this model" in text
    assert "Seeded runs are for research, not release" in text


# --------------------------------------------------------------------------- sharing
@pytest.fixture(scope="module")
def bc():
    from cvxdp_models.vertical import make_vertical_data

    return make_vertical_data("breast_cancer")


def test_sharing_default_is_sound(bc):
    from cvxdp_models.vertical import make_parties

    mech = cvxdp.SharingGaussian(epsilon=0.5)
    assert mech.sensitivity == "worst_case" and mech.calibration == "analytic" and mech.assumptions == "raise"
    res = cvxdp.solve(make_parties(bc, bound=1.0), algorithm=cvxdp.ADMMSharing(rho=1.0, lam=1e-3, epochs=2),
                      privacy=mech, seed=0)
    C = res.privacy["mechanism"]["parties"]["party1"]["sensitivity"]
    assert C == pytest.approx(2 * math.sqrt(bc.n_samples) * 1.0)
    assert res.privacy["guarantee"] is True


def test_sharing_lemma1_is_flagged_and_a_failed_assumption_voids_the_claim(bc):
    from cvxdp_models.vertical import make_parties

    alg = cvxdp.ADMMSharing(rho=1.0, lam=1e-3, epochs=2)
    small = make_parties(bc, bound=1.0)
    paper = dict(epsilon=0.5, delta=1e-5, sensitivity="paper", calibration="classic")
    with pytest.raises(AssumptionViolation, match="Assumption 1.1"):  # error by default
        cvxdp.solve(small, algorithm=alg, privacy=cvxdp.SharingGaussian(**paper), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(small, algorithm=alg, privacy=cvxdp.SharingGaussian(**paper, assumptions="record"),
                          seed=0)
    reasons = [n["reason"] for n in res.privacy["notes"]]
    assert res.privacy["guarantee"] is False
    assert any("Assumption 1.1" in r for r in reasons) and any("Lemma 1" in r for r in reasons)
    assert any("Corollary 1" in r for r in reasons)
    assert lemma1_sensitivity(15, 1.0, 1e-3, 1.0, 1.0, 2) > 0


# --------------------------------------------------------------------------- PP and initial points
def test_penalty_perturbation_guarantee_is_conditional_on_the_solver_tolerance():
    from cvxdp_models.erm import make_erm

    inst = make_erm({"nodes": 3, "max_samples": 90})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cvxdp.solve(inst.agents, algorithm=cvxdp.MADMM("ring", rounds=2),
                          privacy=cvxdp.PenaltyPerturbation(alpha=2.0), seed=0)
    note, *assumed = res.privacy["notes"]  # then the public assumptions (issue 36, item 4)
    assert all(n["reason"].startswith("Public assumption: ") and not n["voids"] for n in assumed)
    assert not note["voids"] and res.privacy["guarantee"] is True  # conditional, not void
    assert "assumes the exact minimiser" in note["reason"] and "newton" in note["reason"]
    assert "1e-11" in note["reason"]


def test_private_run_refuses_an_undeclared_initial_point():
    x0 = {}
    agent = _box_agent()
    x0[agent.layout.variables[0]] = np.array([0.2, 0.1])
    agent.initial = x0
    mech = cvxdp.ObjectivePerturbation("laplace", epsilon=1.0)
    with pytest.raises(DeclarationError, match="Agent 'a': a private run needs a public starting point"):
        cvxdp.solve([agent], algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=2), privacy=mech, seed=0)
    cvxdp.solve([agent], algorithm=cvxdp.LinearizedADMM(rounds=2), seed=0)  # non-private: fine
    agent.initial_public = True
    res = cvxdp.solve([agent], algorithm=cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=2), privacy=mech, seed=0)
    assert res.privacy["guarantee"] is True
