"""cvxdp: constrained, differentially private, distributed convex optimization on CVXPY.

    import cvxdp
    agent = cvxdp.Agent(name, objective, constraints, shared={key: expr}, sensitivity=cvxdp.Sensitivity(l2=...))
    result = cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(rho=1, eta=1, local_updates=1, rounds=100),
                         privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6), seed=0)
"""

from . import errors, schedules
from .agent import Agent, Sensitivity
from .algorithms import ADMM, DVP, MADMM, MRADMM, RADMM, ADMMSharing, LinearizedADMM, SharingGaussian
from .central import CentralResult, solve_central
from .decentralized import SmoothObjective
from .engine import solve
from .privacy import NoisePlan, ObjectivePerturbation, OutputPerturbation, PrivacyLedger
from .privacy.gamma import ERMConstants, PenaltyPerturbation, attach_erm_constants
from .results import Result, load_result
from .templates import build_model, register_template, template_names
from .vertical import VerticalParty

__version__ = "0.1.0"

__all__ = [
    "DVP", "MADMM", "MRADMM", "PenaltyPerturbation", "RADMM",
    "ADMM", "ADMMSharing", "Agent", "CentralResult", "LinearizedADMM", "NoisePlan", "ObjectivePerturbation", "OutputPerturbation",
    "PrivacyLedger", "Result", "Sensitivity", "SharingGaussian", "VerticalParty", "errors", "load_result",
    "schedules", "solve", "solve_central",
    "ERMConstants", "SmoothObjective", "attach_erm_constants", "build_model", "register_template", "template_names",
]
