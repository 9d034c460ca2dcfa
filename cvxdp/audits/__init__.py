"""Empirical privacy audits: lower bounds on a mechanism's epsilon from neighbouring runs (Clopper-Pearson), beside
its claim, with broken twins that a sound audit must catch. They drive whole runs, so they sit above the engine.

* :mod:`.release` — Laplace/Gaussian mechanisms: bare noise, one local update through :func:`cvxdp.solve`, a
  node's whole release, one-shot input perturbation (issue 39);
* :mod:`.gamma` — the graph family's Gamma-norm mechanism;
* :mod:`.sharing` — the sharing family's releases.
"""

from ..privacy import make_mechanism
from .release import AuditResult, audit_input_perturbation, audit_local_update, audit_mechanism, audit_release

__all__ = ["AuditResult", "audit_input_perturbation", "audit_local_update", "audit_mechanism", "audit_release", "make_mechanism"]
