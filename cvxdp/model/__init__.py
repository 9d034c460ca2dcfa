"""What a party declares and runs locally: its agents, their compiled local problems and the node protocol.

* :mod:`.agent` — :class:`Agent` (objective, feasible set, shared blocks, declared bounds), :class:`Sensitivity`,
  :class:`SmoothObjective`;
* :mod:`.vertical` — :class:`VerticalParty`, a party's feature block for ADMM sharing;
* :mod:`.compiled`, :mod:`.evaluation` — the CVXPY problem canonicalized once, and numpy metrics on it;
* :mod:`.local_solver` — the one local-solver face: projections, exact prox steps, the fallback chain;
* :mod:`.curvature` — the curvature bound ``L_p`` (declared, or measured where the data are);
* :mod:`.feasibility` — distances of a point to the agents' feasible sets;
* :mod:`.central` — the centralized reference solve;
* :mod:`.node` — :class:`Node`, :class:`Release`, :class:`Evaluation`: the party side of the trust boundary.

Nothing here imports the coordinator's code (:mod:`cvxdp.run`, :mod:`cvxdp.families`' servers).
"""

from .agent import Agent, Layout, Sensitivity, SmoothObjective, check_agents
from .feasibility import solution_violation
from .node import EVALUATION_LABEL, Evaluation, Node, Release
from .vertical import VerticalParty

__all__ = ["Agent", "EVALUATION_LABEL", "Evaluation", "Layout", "Node", "Release", "Sensitivity", "SmoothObjective",
           "VerticalParty", "check_agents", "solution_violation"]
