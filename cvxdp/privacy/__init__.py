"""Privacy layer of cvxdp: calibration, noise plans, mechanisms, accounting and auditing (SPEC §2.1, §2.2)."""

from .accounting import (
    ACCOUNTANTS,
    PrivacyLedger,
    basic_composition,
    event_from_dict,
    event_to_dict,
    pld_epsilon,
    rdp_epsilon,
)
from .audit import AuditResult, empirical_epsilon
from .calibration import (
    calibrate_to_total,
    gaussian_epsilon,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_scale,
    per_step_scale,
    total_epsilon,
)
from .mechanisms import (
    MECHANISMS,
    ObjectivePerturbation,
    OutputPerturbation,
    make_mechanism,
    mechanism_from_dict,
)
from .noise import NoisePlan

__all__ = [
    "ACCOUNTANTS", "MECHANISMS", "AuditResult", "NoisePlan", "ObjectivePerturbation", "OutputPerturbation",
    "PrivacyLedger", "basic_composition", "calibrate_to_total", "empirical_epsilon", "event_from_dict",
    "event_to_dict", "gaussian_epsilon", "gaussian_sigma_analytic", "gaussian_sigma_classic",
    "laplace_scale", "make_mechanism", "mechanism_from_dict", "per_step_scale", "pld_epsilon",
    "rdp_epsilon", "total_epsilon",
]
