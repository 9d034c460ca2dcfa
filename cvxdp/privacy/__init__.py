"""Privacy layer of cvxdp: calibration, noise plans, mechanisms, accounting and auditing (SPEC §2.1, §2.2).

Noise comes from numpy by default (fast, same-seed reproducible, research-grade); ``noise_source="opendp"``
selects OpenDP's vetted samplers (:mod:`cvxdp.privacy.noise`, ``pip install 'cvxdp[secure]'``).

The audits drive whole runs (they sit above the round loop), so they are not re-exported here: import them from
:mod:`cvxdp.audits.release` (``audit_release``, ``audit_mechanism``, ``audit_local_update``, ``AuditResult``).
"""

from .accounting import (
    ACCOUNTANTS,
    COROLLARY1_NOTE,
    LEMMA1_PRESET,
    MIN_PLD_MULTIPLIER,
    PAPER_PRESET,
    BudgetGuard,
    PrivacyLedger,
    PureEpsilonDpEvent,
    basic_composition,
    event_from_dict,
    event_to_dict,
    ledger_from_dict,
    pld_epsilon,
    pure_epsilon_event,
    rdp_epsilon,
)
from .calibration import (
    InputPerturbation,
    InputRelease,
    calibrate_to_total,
    gaussian_epsilon,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_scale,
    per_step_scale,
    step_epsilon,
    total_epsilon,
)
from .distributions import Gaussian, Laplace, Noise
from .mechanisms import (
    MECHANISMS,
    ObjectivePerturbation,
    OutputPerturbation,
    Perturbation,
    make_mechanism,
    mechanism_from_dict,
    mechanisms,
)
from .noise import NOISE_SOURCES, NoisePlan, check_plan_matches, plan_mismatch

__all__ = [
    "ACCOUNTANTS", "BudgetGuard", "Gaussian", "Laplace", "Noise", "InputPerturbation", "InputRelease", "COROLLARY1_NOTE", "LEMMA1_PRESET", "MIN_PLD_MULTIPLIER", "PAPER_PRESET", "Perturbation",
    "ledger_from_dict", "pure_epsilon_event", "MECHANISMS", "NOISE_SOURCES", "NoisePlan", "ObjectivePerturbation",
    "OutputPerturbation", "PrivacyLedger", "PureEpsilonDpEvent",
    "basic_composition",
    "calibrate_to_total", "check_plan_matches", "plan_mismatch", "event_from_dict",
    "event_to_dict", "gaussian_epsilon", "gaussian_sigma_analytic", "gaussian_sigma_classic",
    "laplace_scale", "make_mechanism", "mechanism_from_dict", "mechanisms", "per_step_scale", "pld_epsilon",
    "rdp_epsilon", "step_epsilon", "total_epsilon",
]
