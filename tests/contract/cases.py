"""The contract suite's cases, generated from the registries (shared by the test modules of tests/contract).

Every algorithm of :data:`cvxdp.families.ALGORITHMS` with every mechanism its class accepts (``cls.accepts(name)``
over the catalog's names, "none" included), built from case-file tables the way ``cvxdp run`` builds them, plus the sharing family's Gaussian
preset. Each family's tiny problem also has a *neighbouring* variant (``build(neighbour=True)``): the same public
declarations (shapes, declared bounds, ERM constants, the sharing labels), other private data.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

import cvxdp
from cvxdp.config.build import make_algorithm, make_privacy
from cvxdp.families import ALGORITHMS, MECHANISMS, family_class
from cvxdp.families.graph.mechanism import ERMConstants
from cvxdp.model import DEFAULT_SOLVERS, Declaration, Release
from cvxdp.run import Backend, root_seed_sequence, run_loop
from cvxdp.run.backends import method_name

ROUNDS = 4
TIMING = ("wall_time", "solver_time", "compute_time")


def _consensus_data(neighbour: bool = False):
    from cvxdp_models.toy import make_agents

    return make_agents(agents=3, dim=3, samples=10, seed=2 if neighbour else 1), None


def _graph_data(neighbour: bool = False):
    from cvxdp_models.erm import make_erm

    model = {"nodes": 3, "C": 10.0, "rho": 1.0, "max_samples": 60, "data_seed": 1 if neighbour else 0}
    return make_erm(model).agents, None


def _sharing_data(neighbour: bool = False):
    from cvxdp_models.vertical import synthetic_parties

    parties, labels = synthetic_parties(12, 2, 2, seed=0)
    if neighbour:  # other features, the same labels (public to the centre)
        parties = synthetic_parties(12, 2, 2, seed=1)[0]
    return parties, labels


#: each family's tiny problem: (neighbour=False) -> (agents, the labels a sharing centre holds); neighbour=True: the
#: same public declarations, other private data
DATA = {"consensus": _consensus_data, "graph": _graph_data, "sharing": _sharing_data}
#: the one array a node of each family releases
RELEASE_KEY = {"consensus": "ez", "graph": "f", "sharing": "q"}
#: the tiny problems' step sizes per algorithm (every other parameter: its default)
STEPS = {"ladmm": {"rho": 1.0, "eta": 4.0, "local_updates": 2}, "admm": {"rho": 1.0},
         "madmm": {"graph": "complete"}, "dvp": {"graph": "complete"}, "radmm": {"graph": "complete"},
         "mradmm": {"graph": "complete"}, "sharing": {"rho": 1.0, "lam": 0.1}}
#: each mechanism's parameters here
NOISE = {"ObjL": {"epsilon": 1.0}, "ObjG": {"epsilon": 1.0, "delta": 1e-6}, "OutL": {"epsilon": 1.0},
         "OutG": {"epsilon": 1.0, "delta": 1e-5}, "gamma": {"alpha": 3.0}}


@dataclass(frozen=True)
class Case:
    algorithm: str        # case-file name of the algorithm
    mechanism: str        # case-file name of the mechanism ("none": non-private)
    preset: Any = None    # a mechanism object instead of the table (the sharing preset)

    @property
    def family(self) -> str:
        return ALGORITHMS[self.algorithm].family

    @property
    def release_key(self) -> str:
        return RELEASE_KEY[self.family]

    @property
    def private(self) -> bool:
        return self.mechanism != "none"

    @property
    def bits(self) -> tuple[str, ...]:
        """Non-private only: one-value arrays that also leave a node (exact ADMM's polish bit: 0 or 1)."""
        return ("polished",) if self.algorithm == "admm" else ()

    def tables(self) -> tuple[dict, dict]:
        return ({"name": self.algorithm, "rounds": ROUNDS, **STEPS[self.algorithm]},
                {"mechanism": self.mechanism, **NOISE.get(self.mechanism, {})})

    def build(self, neighbour: bool = False) -> tuple[Any, Any, Any]:
        agents, labels = DATA[self.family](neighbour)
        algorithm_table, privacy_table = self.tables()
        algorithm = make_algorithm(algorithm_table)
        if labels is not None:
            algorithm.labels = labels
        return agents, algorithm, self.preset() if self.preset else make_privacy(privacy_table)


#: every (algorithm, mechanism) pair the algorithm accepts; the others are refused (test_families.py checks how)
CASES = {f"{name}-{mech}": Case(name, mech) for name, cls in ALGORITHMS.items() for mech in ("none", *MECHANISMS)
         if cls.accepts(mech)}
REFUSED = [Case(name, mech) for name, cls in ALGORITHMS.items() for mech in MECHANISMS if not cls.accepts(mech)]
CASES["sharing-preset"] = Case("sharing", "preset", lambda: cvxdp.SharingGaussian(sigma=0.3, delta=1e-5))
#: one case per family keeps Ray's resume, budget and evaluation contracts (the others: serial, same numbers on Ray)
ON_RAY = ("ladmm-ObjG", "mradmm-gamma", "sharing-OutG")
CASE_BACKENDS = [pytest.param(c, "serial", id=f"serial-{c}") for c in sorted(CASES)] + [
    pytest.param(c, "ray", id=f"ray-{c}", marks=pytest.mark.ray) for c in ON_RAY]


def run_case(case: str, backend: Any = "serial", *, neighbour: bool = False, **kwargs: Any) -> cvxdp.Result:
    """``cvxdp.solve`` on the case's tiny problem (seed 11 unless given; warnings silenced)."""
    agents, algorithm, privacy = CASES[case].build(neighbour)
    kwargs.setdefault("seed", 11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cvxdp.solve(agents, algorithm=algorithm, privacy=privacy, backend=backend, **kwargs)


def numbers(result: cvxdp.Result) -> pd.DataFrame:
    frame = result.history.drop(columns=[c for c in TIMING if c in result.history.columns])
    return frame.select_dtypes(include="number").reset_index(drop=True)


def same(a: cvxdp.Result, b: cvxdp.Result) -> None:
    pd.testing.assert_frame_equal(numbers(a), numbers(b), check_exact=True)
    assert a.solution.keys() == b.solution.keys()
    for k in a.solution:
        np.testing.assert_array_equal(a.solution[k], b.solution[k])


# --------------------------------------------------------------------------- replaying the public view
class ReplayBackend(Backend):
    """Nodes that are recordings: the declarations and releases a coordinator received, and nothing else.

    ``Node.declare`` answers the recorded declarations and ``Node.step`` of round t the recorded releases of round t;
    any other question (an evaluation, a local solution, a polished point, a state) fails the test, since the public
    view may not need it.
    """

    def __init__(self, declared: list[Any], releases: list[list[Release]]) -> None:
        self.declared, self.releases = list(declared), [list(r) for r in releases]
        self.names: list[str] = []

    def start(self, specs: Any, agents: Any, seeds: Any) -> None:
        assert agents is None and seeds is None  # a replay holds no party's data or entropy
        self.names = [s.name for s in specs]

    def call(self, method: Any, args: Any = None, *, round: int | None = None) -> list[Any]:
        name = method_name(method)
        if name == "declare":
            return list(self.declared)
        if name == "step":
            assert round is not None and len(args) == len(self.names)
            return list(self.releases[round - 1])
        raise AssertionError(f"Replaying the public view asked the nodes for {name!r} (round {round}): the public "
                             "view must follow from the declarations and the releases alone.")


def replay(case: str, declarations: list[Declaration], declared: list[Any], releases: list[list[Release]],
           *, seed: int | None = 11) -> cvxdp.Result:
    """The coordinator's side of ``case`` run again on recordings only: the family built from the agents' public
    declarations (through their wire form), the case's public tables, and a :class:`ReplayBackend`."""
    _, algorithm, privacy = CASES[case].build()  # the case's public configuration (and the sharing labels)
    algorithm.validate()
    wire = [Declaration.from_dict(d.to_dict(), {"ERMConstants": lambda x: ERMConstants(**x)}) for d in declarations]
    family = family_class(algorithm)(algorithm, wire, privacy=privacy, accountant="pld", budget=None,
                                     solvers=DEFAULT_SOLVERS, target_delta=None)
    base = {"algorithm": algorithm.describe(), "privacy": privacy.describe() if privacy is not None else None,
            "accountant": "pld", "budget": None, "backend": "SerialBackend", "solvers": list(DEFAULT_SOLVERS),
            "agents": family.names}
    seed, root = root_seed_sequence(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_loop(family, backend=ReplayBackend(declared, releases), agents=None, root=root, seed=seed,
                        base_config=base, evaluate=False)
