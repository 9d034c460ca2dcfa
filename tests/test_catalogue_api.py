"""Catalogue of bad inputs and faults, part 1: the Python API (declarations, checkpoints, saved results).

Every case asserts the error class and that the message names what was wrong (the agent, the parameter,
the file, the changed component), or that a run refused to resume. Parts 2 and 3:
tests/models/test_catalogue_data.py (data files) and tests/cli/test_catalogue_cli.py (CLI, config files,
output directories, faults).
"""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.errors import CorruptFileError, CvxdpError, DeclarationError, InvalidParameterError, OutputError
from cvxdp.run import load_result
from cvxdp_models.toy import make_agents

ALGO = dict(rho=1.0, eta=2.0, rounds=3)


def _solve(agents, checkpoint=None, rounds=3, **kw):
    return cvxdp.solve(agents, algorithm=cvxdp.LinearizedADMM(**{**ALGO, "rounds": rounds}), seed=1,
                       checkpoint=checkpoint, **kw)


# --------------------------------------------------------------------------- declarations
def _pair(objective_a=None, constraints_a=None, *, shared_b="x", gradient=None, value=None):
    """Agents 'zoneA' and 'zoneB' sharing key "x" (zoneA's parts can be replaced)."""
    x, y = cp.Variable(2, name="xa"), cp.Variable(2, name="xb")
    a = cvxdp.Agent("zoneA", objective_a(x) if objective_a else cp.sum_squares(x - 0.5),
                    constraints_a(x) if constraints_a else [x <= 1, x >= -1], shared={"x": x},
                    gradient=gradient, value=value)
    b = cvxdp.Agent("zoneB", cp.sum_squares(y + 0.5), [y <= 1, y >= -1], shared={shared_b: y})
    return [a, b]


def _integer():
    n = cp.Variable(2, integer=True, name="units")
    x = cp.Variable(2, name="xa")
    return [cvxdp.Agent("zoneA", cp.sum_squares(x) + cp.sum(n), [x <= 1, x >= -1, n >= 0, n <= 3],
                        shared={"x": x}), _pair()[1]]


def _boolean():
    n = cp.Variable(2, boolean=True, name="on")
    x = cp.Variable(2, name="xa")
    return [cvxdp.Agent("zoneA", cp.sum_squares(x) + cp.sum(n), [x <= 1, x >= -1], shared={"x": x}), _pair()[1]]


def _complex_variable():
    x = cp.Variable(2, complex=True, name="v")
    return [cvxdp.Agent("zoneA", cp.sum_squares(cp.abs(x)), [cp.abs(x) <= 1], shared={"x": x}), _pair()[1]]


def _complex_parameter():
    d = cp.Parameter(2, complex=True, name="phasor", value=np.array([1 + 1j, 2.0]))
    return _pair(lambda x: cp.sum_squares(cp.abs(x - d)))


DECLARATIONS = [
    ("integer variable", _integer, ["zoneA", "'units'", "integer"]),
    ("boolean variable", _boolean, ["zoneA", "'on'", "boolean"]),
    ("complex variable", _complex_variable, ["zoneA", "'v'", "complex"]),
    ("complex parameter", _complex_parameter, ["zoneA", "'phasor'", "complex"]),
    ("complex constant", lambda: _pair(lambda x: cp.sum_squares(cp.abs(x - np.array([1j, 0])))),
     ["zoneA", "complex"]),
    ("inf constant in objective", lambda: _pair(lambda x: cp.sum_squares(x - np.array([np.inf, 0.0]))),
     ["zoneA", "objective", "infinite"]),
    ("nan constant in a constraint", lambda: _pair(None, lambda x: [x <= np.array([1.0, np.nan]), x >= -1]),
     ["zoneA", "constraint 0", "NaN"]),
    ("inf parameter", lambda: _pair(lambda x: cp.sum_squares(x - cp.Parameter(2, value=[np.inf, 0], name="d"))),
     ["zoneA", "'d'", "infinite"]),
]


@pytest.mark.parametrize("what, build, words", DECLARATIONS, ids=[d[0] for d in DECLARATIONS])
def test_declaration_is_refused_naming_agent_and_what(what, build, words):
    agents = build()

    with pytest.raises(DeclarationError) as info:
        _solve(agents)

    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_agents_without_a_common_key_are_warned_about_by_name():
    agents = _pair(shared_b="y")

    with pytest.warns(UserWarning, match="share no key") as record:
        _solve(agents)

    message = str(record[0].message)
    assert "'zoneA'" in message and "'zoneB'" in message


@pytest.mark.parametrize("callable_name, bad", [("gradient", np.nan), ("gradient", np.inf), ("value", np.nan)])
def test_non_finite_user_callable_is_named_with_agent_and_round(callable_name, bad):
    calls = {"n": 0}

    def gradient(u):
        calls["n"] += 1
        return 2 * (u - 0.5) if calls["n"] < 3 else np.full_like(u, bad)

    def value(u):
        calls["n"] += 1
        return float(np.sum((u - 0.5) ** 2)) if calls["n"] < 2 else bad

    agents = _pair(gradient=gradient if callable_name == "gradient" else None,
                   value=value if callable_name == "value" else None)

    with pytest.raises(DeclarationError) as info:
        _solve(agents)

    message = str(info.value)
    assert "zoneA" in message and f"'{callable_name}' callable" in message and "round " in message


def test_vertical_party_with_complex_features_is_refused():
    with pytest.raises(InvalidParameterError, match="'features' parameter of VerticalParty must be a 2-D array of real"):
        cvxdp.VerticalParty("bank", np.ones((4, 2)) * (1 + 1j))


def test_vertical_party_with_an_integer_variable_is_refused():
    party = cvxdp.VerticalParty("bank", np.ones((4, 2)), cp.Variable(2, integer=True, name="w"))

    with pytest.raises(DeclarationError, match="'bank'.*'w'.*integer"):
        party.check()


# --------------------------------------------------------------------------- checkpoints
def _constant_agents(shift: float):
    """Data held as CVXPY constants (not Parameters)."""
    out = []
    for p in range(2):
        x = cp.Variable(3, name=f"x{p}")
        target = np.arange(3.0) * (p + 1) + (shift if p == 1 else 0.0)
        out.append(cvxdp.Agent(f"zone{p + 1}", cp.sum_squares(x - target), [x <= 5, x >= -5], shared={"x": x}))
    return out


def _toy_changed(kind: str):
    agents = make_agents(seed=5)
    if kind == "parameter":
        param = agents[2].problem.parameters()[0]
        param.value = param.value + 0.01
    return agents


CHANGES = [
    ("constant data", lambda: _constant_agents(0.0), lambda: _constant_agents(0.25), {}, ["'zone2'", "problem data"]),
    ("parameter data", lambda: make_agents(seed=5), lambda: _toy_changed("parameter"), {}, ["'agent2'"]),
    ("algorithm rho", lambda: make_agents(seed=5), lambda: make_agents(seed=5), {"rho": 2.0}, ["'algorithm.rho"]),
    ("structure (bound)", lambda: make_agents(seed=5), lambda: make_agents(seed=5, bound=0.9), {},
     ["'agent0'", "'agent1'"]),
]


@pytest.mark.parametrize("what, first, second, algo, words", CHANGES, ids=[c[0] for c in CHANGES])
def test_checkpoint_of_a_changed_run_is_refused_naming_the_change(tmp_path, what, first, second, algo, words):
    _solve(first(), checkpoint=tmp_path)

    with pytest.raises(CvxdpError) as info:
        cvxdp.solve(second(), algorithm=cvxdp.LinearizedADMM(**{**ALGO, **algo}), seed=1, checkpoint=tmp_path)

    message = str(info.value)
    assert "another configuration or other data" in message and "checkpoint.pkl" in message
    for word in words:
        assert word in message, (word, message)


def test_checkpoint_of_the_same_model_rebuilt_is_accepted(tmp_path):
    first = _solve(_constant_agents(0.0), checkpoint=tmp_path, rounds=2)
    again = _solve(_constant_agents(0.0), checkpoint=tmp_path, rounds=2)  # resumes at the end: same answer

    assert np.array_equal(first.solution["x"], again.solution["x"])


def _write(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def _truncated_checkpoint(tmp_path: Path) -> None:
    _solve(make_agents(seed=5), checkpoint=tmp_path)
    data = (tmp_path / "checkpoint.pkl").read_bytes()
    (tmp_path / "checkpoint.pkl").write_bytes(data[: len(data) // 2])


BAD_CHECKPOINTS = [
    ("garbage", lambda d: _write(d / "checkpoint.pkl", b"this is not a pickle\x00\x01"), CorruptFileError,
     ["corrupt"]),
    ("empty", lambda d: _write(d / "checkpoint.pkl", b""), CorruptFileError, ["empty"]),
    ("truncated", _truncated_checkpoint, CorruptFileError, ["truncated"]),
    ("foreign pickle", lambda d: _write(d / "checkpoint.pkl", pickle.dumps([1, 2, 3])), CorruptFileError,
     ["not a cvxdp checkpoint"]),
    ("older format", lambda d: _write(d / "checkpoint.pkl", pickle.dumps({"fingerprint": "abc"})), CvxdpError,
     ["older cvxdp"]),
]


@pytest.mark.parametrize("what, make, exc, words", BAD_CHECKPOINTS, ids=[b[0] for b in BAD_CHECKPOINTS])
def test_unusable_checkpoint_gets_one_line_naming_file_and_what_to_do(tmp_path, what, make, exc, words):
    make(tmp_path)

    with pytest.raises(exc) as info:
        _solve(make_agents(seed=5), checkpoint=tmp_path)

    message = str(info.value)
    assert "checkpoint.pkl" in message and "delete it" in message and "\n" not in message
    for word in words:
        assert word in message


def test_checkpoint_pointing_at_an_existing_regular_file_is_refused(tmp_path):
    target = _write(tmp_path / "notes.txt", b"my notes")

    with pytest.raises(InvalidParameterError, match="'checkpoint' parameter of solve must be a directory"):
        _solve(make_agents(seed=5), checkpoint=target)

    assert target.read_bytes() == b"my notes"


# --------------------------------------------------------------------------- saved results
@pytest.fixture(scope="module")
def result():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _solve(make_agents(seed=5))


def test_save_never_clobbers_a_saved_result(tmp_path, result):
    result.save(tmp_path / "r")
    before = (tmp_path / "r" / "history.csv").read_bytes()

    with pytest.raises(OutputError, match="already holds a saved cvxdp result; pass overwrite=True"):
        result.save(tmp_path / "r")

    assert (tmp_path / "r" / "history.csv").read_bytes() == before
    result.save(tmp_path / "r", overwrite=True)  # only when asked
    assert load_result(tmp_path / "r").stop_reason == result.stop_reason


def test_save_onto_an_existing_regular_file_is_refused(tmp_path, result):
    target = _write(tmp_path / "result", b"keep me")

    with pytest.raises(OutputError, match="existing regular file"):
        result.save(target)

    assert target.read_bytes() == b"keep me"


def _damage(name: str, how: str):
    def apply(path: Path) -> None:
        file = path / name
        if how == "missing":
            file.unlink()
        elif how == "truncated":
            file.write_bytes(file.read_bytes()[: max(1, file.stat().st_size // 3)])
        elif how == "garbage":
            file.write_bytes(b"\x00\xffnot what you expect")
        elif how == "foreign":
            file.write_text(json.dumps({"hello": "world"}))
    return apply


BAD_RESULTS = [
    ("history.csv", "missing", "history.csv is missing"),
    ("agent_history.csv", "missing", "agent_history.csv is missing"),
    ("arrays.npz", "missing", "arrays.npz is missing"),
    ("arrays.npz", "truncated", "arrays.npz"),
    ("arrays.npz", "garbage", "arrays.npz"),
    ("result.json", "truncated", "result.json"),
    ("result.json", "garbage", "result.json"),
    ("result.json", "foreign", "not a cvxdp result"),
]


@pytest.mark.parametrize("name, how, words", BAD_RESULTS, ids=[f"{n}-{h}" for n, h, _ in BAD_RESULTS])
def test_damaged_result_directory_gets_one_line_naming_the_file(tmp_path, result, name, how, words):
    result.save(tmp_path)
    _damage(name, how)(tmp_path)

    with pytest.raises(CorruptFileError) as info:
        load_result(tmp_path)

    message = str(info.value)
    assert words in message and str(tmp_path) in message and "Delete the directory" in message


def test_loading_a_directory_without_a_result_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="result.json is missing"):
        load_result(tmp_path)


# --------------------------------------------------------------------------- solution outside the sets
def test_noise_dominated_solution_outside_the_sets_is_warned_and_recorded(tmp_path):
    mech = cvxdp.OutputPerturbation("gaussian", epsilon=1e-9, delta=1e-6)

    with pytest.warns(UserWarning, match="outside the feasible set") as caught:
        res = cvxdp.solve(make_agents(seed=5), algorithm=cvxdp.LinearizedADMM(**ALGO), privacy=mech, seed=3)
    # the warning points at the caller of cvxdp.solve, not inside the engine
    assert {w.filename for w in caught if "outside the feasible set" in str(w.message)} == {__file__}

    violation = res.solution_violation
    assert violation["max"] > 1.0 and violation["agent"] in violation["per_agent"]
    assert res.summary()["solution_violation"] == violation["max"]
    res.save(tmp_path)
    assert load_result(tmp_path).solution_violation["max"] == violation["max"]


def test_converged_solution_inside_the_sets_records_zero():
    x = [cp.Variable(2, name=f"x{p}") for p in range(2)]
    agents = [cvxdp.Agent(f"a{p}", cp.sum_squares(x[p] - 0.2), [x[p] <= 1, x[p] >= -1], shared={"x": x[p]})
              for p in range(2)]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _solve(agents, rounds=20)

    assert res.solution_violation["max"] == 0.0
