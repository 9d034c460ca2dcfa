"""Bad input to solve() and the algorithm/mechanism constructors gets a clear, uniform error."""

from __future__ import annotations

import sys

import cvxpy as cp
import pytest

import cvxdp
from cvxdp.errors import DeclarationError, InvalidParameterError, OptionalDependencyError


def _quiet(agents):
    return cvxdp.LinearizedADMM(rho=1.0, eta=1.0, rounds=2)


@pytest.mark.parametrize("kwargs, match", [
    ({"algorithm": cvxdp.LinearizedADMM(rho=-1.0)},
     r"The 'rho' parameter of LinearizedADMM must be a float in \(0, inf\). Got -1.0 instead."),
    ({"algorithm": cvxdp.LinearizedADMM(local_updates=0)}, "'local_updates' parameter of LinearizedADMM"),
    ({"algorithm": cvxdp.LinearizedADMM(eta=float("nan"))}, "'eta' parameter of LinearizedADMM"),
    ({"algorithm": cvxdp.LinearizedADMM(rounds=0)}, "'rounds' parameter of LinearizedADMM"),
    ({"algorithm": "ladmm"}, "'algorithm' parameter of solve"),
    ({"privacy": cvxdp.ObjectivePerturbation("gaussian", epsilon=0.0, delta=1e-5)}, "'epsilon' parameter"),
    ({"privacy": cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1.5)}, "'delta' parameter"),
    ({"privacy": cvxdp.ObjectivePerturbation("cauchy", epsilon=1.0)}, "'noise' parameter"),
    ({"privacy": "ObjG"}, "'privacy' parameter of solve"),
    ({"accountant": "moments"}, "'accountant' parameter of solve"),
    ({"backend": "dask"}, "'backend' parameter of solve"),
    ({"seed": -3}, "'seed' parameter of solve"),
    ({"budget": (1.0,)}, "'budget' parameter of solve"),
    ({"algorithm": cvxdp.ADMM(rho=1.0), "privacy": cvxdp.ObjectivePerturbation("laplace", epsilon=1.0)},
     "non-private baseline"),
])
def test_bad_parameters(toy_agents, kwargs, match):
    kwargs = {"algorithm": cvxdp.LinearizedADMM(rounds=2), **kwargs}

    with pytest.raises(InvalidParameterError, match=match):
        cvxdp.solve(toy_agents, **kwargs)


def test_no_agents():
    with pytest.raises(InvalidParameterError, match="non-empty list of cvxdp.Agent"):
        cvxdp.solve([])


def test_private_run_without_sensitivity_names_agent():
    x = cp.Variable(2)
    agent = cvxdp.Agent("hospital", cp.sum_squares(x - 1), [x <= 1, x >= -1], shared={"x": x})

    with pytest.raises(DeclarationError, match="hospital"):
        cvxdp.solve([agent], algorithm=cvxdp.LinearizedADMM(rounds=2),
                    privacy=cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-6))


def test_ray_backend_without_extra_says_how_to_install(toy_agents, monkeypatch):
    """Ray is installed where CI runs (the test extra): the import is made to fail as it does without the extra."""
    monkeypatch.setitem(sys.modules, "ray", None)  # ``import ray`` now raises ImportError
    with pytest.raises(OptionalDependencyError, match=r"The 'ray' backend needs the optional extra: "
                                                      r"pip install 'cvxdp\[ray\]'"):
        cvxdp.solve(toy_agents, algorithm=cvxdp.LinearizedADMM(rounds=2), backend="ray")


def test_constructors_only_store_parameters():
    algo = cvxdp.LinearizedADMM(rho=-5.0, local_updates=0)
    mech = cvxdp.ObjectivePerturbation("nonsense", epsilon=-1.0)

    assert algo.rho == -5.0 and algo.local_updates == 0
    assert mech.noise == "nonsense"
