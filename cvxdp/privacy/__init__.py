"""Privacy layer of cvxdp: calibration, noise plans, mechanisms, accounting and auditing (SPEC §2.1, §2.2).

Noise comes from numpy by default (fast, same-seed reproducible, research-grade); ``noise_source="opendp"``
selects OpenDP's vetted samplers (:mod:`cvxdp.privacy.secure`, ``pip install 'cvxdp[secure]'``).

The audits drive whole runs (they sit above the round loop), so they are not re-exported here: import them from
:mod:`cvxdp.audits.release` (``audit_release``, ``audit_mechanism``, ``audit_local_update``, ``AuditResult``).
"""

from .accounting import (
    ACCOUNTANTS,
    PrivacyLedger,
    PureEpsilonDpEvent,
    basic_composition,
    event_from_dict,
    event_to_dict,
    pld_epsilon,
    rdp_epsilon,
)
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
from .secure import NOISE_SOURCES

__all__ = [
    "ACCOUNTANTS", "MECHANISMS", "NOISE_SOURCES", "NoisePlan", "ObjectivePerturbation",
    "OutputPerturbation", "PrivacyLedger", "PureEpsilonDpEvent",
    "basic_composition",
    "calibrate_to_total", "event_from_dict",
    "event_to_dict", "gaussian_epsilon", "gaussian_sigma_analytic", "gaussian_sigma_classic",
    "laplace_scale", "make_mechanism", "mechanism_from_dict", "per_step_scale", "pld_epsilon",
    "rdp_epsilon", "total_epsilon",
]
