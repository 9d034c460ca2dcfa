"""What a party declares and runs locally: its agents, their compiled local problems and the node protocol.

* :mod:`.agent` — :class:`Agent` (objective, feasible set, shared blocks, declared bounds), :class:`SmoothObjective`
  and the agents' structural checks;
* :mod:`.declaration` — what a party declares, public by construction: :class:`Sensitivity`, :class:`PerExample`
  (with the party's Poisson sample), :class:`Declaration`, and the checks across declarations;
* :mod:`.probe` — :func:`cvxdp.check_declaration`: a declaration probed against sampled points and neighbours;
* :mod:`.vertical` — :class:`VerticalParty`, a party's feature block for ADMM sharing;
* :mod:`.compiled`, :mod:`.evaluation` — the CVXPY problem canonicalized once, and numpy metrics on it;
* :mod:`.local_solver` — the one local-solver face: projections, exact prox steps, the fallback chain;
* :mod:`.local_prox` — :class:`LocalProx`, the graph family's exact primal update (Newton, L-BFGS or CVXPY);
* :mod:`.curvature` — the curvature bound ``L_p`` (declared, or measured where the data are);
* :mod:`.central` — the whole problem: the centralized reference and a point's distance to the agents' sets;
* :mod:`.node` — :class:`Node`, :class:`Release`, :class:`Evaluation`: the party side of the trust boundary.

Nothing here imports the coordinator's code (:mod:`cvxdp.run`, the families' servers).
"""

from .agent import Agent, Layout, SmoothObjective, check_agents, checked_agents
from .central import (
    CentralResult,
    SolverFallbackWarning,
    solution_violation,
    solve_central,
    solve_with_fallback,
)
from .compiled import set_verdict
from .curvature import Curvature, lipschitz_constants
from .declaration import (
    Declaration,
    PerExample,
    Sensitivity,
    check_declarations,
    check_public_initial,
    poisson_sample,
)
from .evaluation import compiled_metrics
from .local_prox import LocalProx
from .local_solver import DEFAULT_SOLVERS, PartyUpdate, ProxSolver, SolveReport, compile_projection
from .node import EVALUATION_LABEL, Evaluation, Node, Release
from .vertical import RELATION, VerticalParty, check_labels, check_parties

__all__ = ["Agent", "Declaration", "check_declarations", "CentralResult", "Curvature", "DEFAULT_SOLVERS", "EVALUATION_LABEL", "Evaluation", "Layout", "PerExample", "poisson_sample",
           "LocalProx", "Node", "PartyUpdate", "ProxSolver", "RELATION", "Release", "Sensitivity", "SmoothObjective",
           "SolveReport", "SolverFallbackWarning", "VerticalParty", "check_agents", "checked_agents", "check_labels", "check_parties",
           "check_public_initial", "compile_projection", "compiled_metrics", "lipschitz_constants", "set_verdict",
           "solution_violation", "solve_central", "solve_with_fallback"]
