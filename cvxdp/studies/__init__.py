"""Studies: the comparison grids behind the papers' figures, resumable cell by cell, with tables, figures and a report.

* :mod:`.study` — the one study loop: :class:`Study` (declared ``[study]`` keys, hooks, :meth:`Study.run`) and
  the registry of study kinds (:data:`STUDIES`, keyed by ``[study] kind``);
* :mod:`.grid` — the consensus grid (mechanisms x epsilon x J x seeds), :func:`run_study`;
* :mod:`.total` — the equal-total-epsilon studies with one-shot and centralized anchors (issue 39),
  :func:`run_total_study`;
* :mod:`.graph` — the decentralized algorithms' studies, :func:`run_graph_study`;
* :mod:`.sharing` — the ADMM-sharing study, :func:`run_sharing_study`;
* :mod:`.cells` — the one resumable cell runner;
* :mod:`.tables` — markdown tables and the plain sentences for privacy totals that mean nothing.
"""

from .graph import GraphStudy, is_graph_study, run_graph_study
from .grid import GridStudy, run_study
from .sharing import SharingStudy, is_sharing_study, run_sharing_study
from .study import (
                    STUDIES,
                    Study,
                    StudyKey,
                    load_any_study,
                    register_study,
                    run_any_study,
                    study_class,
                    study_kinds,
)
from .tables import ledger_caveats, noise_caveats
from .total import TotalStudy, is_total_study, run_total_study

__all__ = ["GraphStudy", "GridStudy", "STUDIES", "SharingStudy", "Study", "StudyKey", "TotalStudy", "is_graph_study",
           "is_sharing_study", "is_total_study", "ledger_caveats", "load_any_study", "noise_caveats",
           "register_study", "run_any_study", "run_graph_study", "run_sharing_study", "run_study",
           "run_total_study", "study_class", "study_kinds"]
