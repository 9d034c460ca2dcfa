"""Studies: the comparison grids behind the papers' figures, resumable cell by cell, with tables, figures and a report.

* :mod:`.grid` — the consensus grid (mechanisms x epsilon x J x seeds), :func:`run_study`;
* :mod:`.total` — the equal-total-epsilon studies with one-shot and centralized anchors (issue 39),
  :func:`run_total_study`;
* :mod:`.graph` — the decentralized algorithms' studies, :func:`run_graph_study`;
* :mod:`.sharing` — the ADMM-sharing study, :func:`run_sharing_study`;
* :mod:`.cells` — the one resumable cell runner;
* :mod:`.tables` — markdown tables and the plain sentences for privacy totals that mean nothing.
"""

from .graph import is_graph_study, run_graph_study
from .grid import run_study
from .sharing import is_sharing_study, run_sharing_study
from .tables import ledger_caveats, noise_caveats
from .total import is_total_study, run_total_study

__all__ = ["is_graph_study", "is_sharing_study", "is_total_study", "run_total_study", "ledger_caveats", "noise_caveats", "run_graph_study",
           "run_sharing_study", "run_study"]
