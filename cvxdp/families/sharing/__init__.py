"""The sharing family (SPEC §5): DP ADMM sharing over vertically partitioned features (Hu et al.).

``params.py`` (ADMMSharing, SharingGaussian and the paper's sensitivity and composition), ``node.py`` (a party),
``server.py`` (the centre).
"""

from .params import ADMMSharing, SharingGaussian, as_mechanism, party_plan
from .server import SharingFamily

__all__ = ["ADMMSharing", "SharingFamily", "SharingGaussian", "as_mechanism", "party_plan"]
