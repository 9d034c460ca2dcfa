"""Each private run's ledger names the public assumptions it relies on (issue 36, item 4), for every case of the
registry: non-voiding notes starting with ``PUBLIC_ASSUMPTION`` (the guarantee holds under them), recorded by the
family where the assumption is used; non-private runs record none. docs/what-is-public.md lists them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cvxdp
from cvxdp.run.family import FEASIBLE_SETS_PUBLIC, PUBLIC_ASSUMPTION

from .cases import CASES, run_case

#: what each family's notes must name (lower case fragments)
NAMED = {"consensus": ("feasible set w_p", "solution_violation", "initial copy", "gradient sensitivity",
                       "curvature bound", "rho_scale"),
         "graph": ("feasible set w_p", "solution_violation", "erm constants", "sample count b_i"),
         "sharing": ("training labels are public to the centre", "dual_residual", "y_norm", "z_norm",
                     "assumption_1_1", "model bound b")}


def _assumptions(result: cvxdp.Result) -> list[dict]:
    return [n for n in result.privacy["notes"] if n["reason"].startswith(PUBLIC_ASSUMPTION)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_ledger_names_the_public_assumptions_of_the_run(case):
    result = run_case(case)
    notes = _assumptions(result)
    if not CASES[case].private:
        assert notes == []
        return
    assert notes and not any(n["voids"] for n in notes)
    text = " ".join(n["reason"] for n in notes).lower()
    for fragment in NAMED[CASES[case].family]:
        assert fragment in text, (case, fragment)
    if CASES[case].family == "sharing":
        assert "feasible set" not in text  # the sharing family reports no solution_violation
    else:
        assert PUBLIC_ASSUMPTION + FEASIBLE_SETS_PUBLIC in [n["reason"] for n in notes]
    assert "initial point of" not in text  # no agent of these cases declares an initial point
    # the notes travel with the result (summary and saved ledger)
    assert set(result.summary()["privacy_notes"]) >= {n["reason"] for n in notes}
    assert {n["reason"] for n in cvxdp.privacy.ledger_from_dict(result.ledger.to_dict()).notes} >= \
        {n["reason"] for n in notes}


@pytest.mark.parametrize("algorithm", ["ladmm", "madmm"])
def test_a_declared_public_initial_point_is_named(algorithm):
    """An agent that starts from its own declared point: the note names it; the others keep theirs."""
    case = f"{algorithm}-ObjL" if algorithm == "ladmm" else f"{algorithm}-gamma"
    agents, algo, privacy = CASES[case].build()
    first = agents[0]
    first.initial = {var: np.zeros(var.shape) for var in first.layout.variables}
    first.initial_public = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cvxdp.solve(agents, algorithm=algo, privacy=privacy, seed=11)
    text = " ".join(n["reason"] for n in _assumptions(result))
    assert f"initial point of {first.name!r} is public" in text
    if CASES[case].family == "consensus":  # the others start from the projection of 0 onto W_p
        others = ", ".join(repr(a.name) for a in agents[1:])
        assert f"initial copy E_p z_p(0) of {others} is the projection of 0" in text
