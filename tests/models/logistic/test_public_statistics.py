"""Issue 36: the logistic template's preprocessing uses public statistics only, its declared sample count is the
loaded one, and labels outside a data set's classes are refused.

1. Standardizing with the pooled mean and sd of all agents' data (the digits case until issue 36) made agent 0's
   data depend on agent 1's samples: one sample added at agent 1 moved agent 0's gradient by 1.25x its declared
   sensitivity. Public statistics ("range", "public", "none") leave agent 0 bit-identical; "pooled" agents
   declare no sensitivity, so a private run is refused.
2. A ``total_samples`` that is not the loaded count warns, and a private run is refused.
3. FEMNIST, MNIST and LIBSVM labels outside the classes are refused, naming the file and the record.
"""

from __future__ import annotations

import json
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cvxdp
from cvxdp.config.files import load_toml
from cvxdp.errors import ConfigError, DeclarationError
from cvxdp_models.logistic import data as D
from cvxdp_models.logistic.multiclass import multiclass_agents, multiclass_sensitivity
from cvxdp_models.logistic.template import build, settings

HERE = Path(".")
CASES = Path(__file__).resolve().parents[3] / "cases"
DIGITS_CASE = load_toml(CASES / "digits_fl.toml")["model"]
PREPROCESSING = ("standardize", "center", "scale", "clip", "bound", "kind", "dtype")
OBJG = cvxdp.ObjectivePerturbation("gaussian", epsilon=1.0, delta=1e-5)


def write_leaf(directory: Path, train: dict[str, tuple[np.ndarray, list]], test: dict | None = None) -> Path:
    for part, users in (("train", train), ("test", test or {})):
        blob = {"users": list(users), "num_samples": [len(y) for _, y in users.values()],
                "user_data": {u: {"x": np.asarray(X).tolist(), "y": list(y)} for u, (X, y) in users.items()}}
        (directory / part).mkdir(parents=True, exist_ok=True)
        (directory / part / f"shard_{part}.json").write_text(json.dumps(blob))
    return directory


def writers(seed: int = 0) -> dict[str, tuple[np.ndarray, list]]:
    rng = np.random.default_rng(seed)
    return {u: (rng.uniform(0, 1, (n, 784)), rng.integers(0, 10, n).tolist())
            for u, n in (("w0", 6), ("w1", 5), ("w2", 4))}


def quietly(model: dict, base_dir: Path = HERE):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(model, base_dir=base_dir)


def box_points(shape: tuple[int, int], bound: float, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n = shape[0] * shape[1]
    return [np.zeros(n), rng.uniform(-bound, bound, n)] + [bound * rng.choice([-1.0, 1.0], n) for _ in range(3)]


# ----------------------------------------------------------------------------- 1. standardization
@pytest.mark.parametrize("preprocessing", [
    {k: DIGITS_CASE[k] for k in PREPROCESSING if k in DIGITS_CASE},  # the shipped digits case (fails before #36)
    {"standardize": "range"}, {"standardize": "none"},
    {"standardize": "public", "center": 0.25, "scale": [2.0] * 784},
], ids=["digits_fl.toml", "range", "none", "public"])
def test_one_sample_added_at_agent1_leaves_agent0_bit_identical(tmp_path, preprocessing):
    """One writer = one agent: the neighbour adds one sample (all ink, a label nobody else has) at agent 1."""
    data = writers()
    X1, y1 = data["w1"]
    neighbour = {**data, "w1": (np.vstack([X1, np.ones(784)]), y1 + [61])}
    n = sum(len(y) for _, y in data.values())
    model = {**preprocessing, "dataset": "femnist", "total_samples": n, "baselines": False}
    a = build({**model, "path": str(write_leaf(tmp_path / "D", data))}, base_dir=HERE)
    b = quietly({**model, "path": str(write_leaf(tmp_path / "D_nb", neighbour))})  # n + 1 != total_samples: warns
    assert b.models[1].X.shape[0] == a.models[1].X.shape[0] + 1
    m, m_nb = a.models[0], b.models[0]
    assert np.array_equal(m.X, m_nb.X) and np.array_equal(m.y, m_nb.y)
    for u in box_points(m.shape, a.info["bound"]):
        assert np.array_equal(m.gradient(u), m_nb.gradient(u))
    assert a.agents[0].sensitivity.l2 is not None and a.info["private_possible"]  # a private configuration
    for part in a.models + [a.pooled]:  # the clip the sensitivity rests on holds after the standardization
        assert np.max(np.linalg.norm(part.X_param.value, axis=1)) <= a.info["clip"] * (1 + 1e-12)


def _digits_neighbours(mode: str) -> tuple[list, list, dict]:
    """The digits case's raw training parts, and the same with one all-ink sample (label 0) added at agent 1,
    both preprocessed with ``standardize = mode`` (the template's own function)."""
    from cvxdp_models.logistic.template import load_dataset, preprocess

    raw = load_dataset(settings({**DIGITS_CASE, "standardize": "none", "clip": 1e9}), HERE)
    parts, X_test = raw["parts"], raw["X_test"]
    X1, y1 = parts[1]
    neighbour = [parts[0], (np.vstack([X1, np.ones(64)]), np.append(y1, 0)), *parts[2:]]
    cfg = settings({**DIGITS_CASE, "standardize": mode})
    return preprocess(parts, X_test, cfg)[0], preprocess(neighbour, X_test, cfg)[0], cfg


@pytest.mark.parametrize("mode", ["range", "pooled"])
def test_digits_case_gradient_shift_of_agent0(mode):
    """Agent 0's gradient change over its declared sensitivity sqrt(2) s_max C / I: 0 with the public range,
    above 1 (1.25 at a box corner) with the pooled statistics the case used before issue 36."""
    parts, neighbour, cfg = _digits_neighbours(mode)
    sens = multiclass_sensitivity(64, 10, cfg["clip"], cfg["total_samples"], cfg["bound"]).l2
    kwargs = {"classes": 10, "bound": cfg["bound"], "clip": cfg["clip"], "total": cfg["total_samples"]}
    (agent0, *_), _ = multiclass_agents(parts, **kwargs)
    (agent0_nb, *_), _ = multiclass_agents(neighbour, **kwargs)
    shift = max(np.linalg.norm(agent0.grad(u) - agent0_nb.grad(u)) / sens
                for u in box_points((64, 10), cfg["bound"], seed=1))
    if mode == "pooled":
        assert shift > 1.0  # the audit's leak: more than the sensitivity the ledger was calibrated to
    else:
        assert shift == 0.0


def test_private_run_with_pooled_statistics_is_refused(tmp_path):
    inst = build({"standardize": "pooled", "max_samples": 300, "total_samples": 225, "baselines": False},
                 base_dir=HERE)
    assert not inst.info["private_possible"] and inst.agents[0].sensitivity.l2 is None
    algo = cvxdp.LinearizedADMM(rounds=2)
    message = r"The 'standardize' entry of \[model\] is 'pooled'.*Use public statistics: standardize = 'range'"
    with pytest.raises(DeclarationError, match=message):
        cvxdp.solve(inst.agents, algorithm=algo, privacy=OBJG, seed=0)
    assert cvxdp.solve(inst.agents, algorithm=algo, seed=0).history.shape[0] == 2  # non-private: allowed
    # a case file with the former `standardize = true` (pooled) and a private mechanism: one clear line
    case = tmp_path / "pooled.toml"
    case.write_text("[case]\ntemplate = 'logistic'\n[model]\nstandardize = true\nmax_samples = 300\n"
                    "total_samples = 225\nbaselines = false\n[algorithm]\nrounds = 2\n"
                    "[privacy]\nmechanism = 'ObjG'\nepsilon = 1.0\ndelta = 1e-5\n")
    from cvxdp.cli.main import cli

    res = CliRunner().invoke(cli, ["run", str(case), "--no-progress", "--seed", "0", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "The 'standardize' entry of [model] is 'pooled'" in res.output and "'range'" in res.output


def test_public_statistics_are_declared_and_checked():
    ranged = build({"standardize": "range", "baselines": False}, base_dir=HERE)
    declared = build({"standardize": "public", "center": 0.5, "scale": 0.5, "baselines": False}, base_dir=HERE)
    assert all(np.array_equal(a.X, b.X) for a, b in zip(ranged.models, declared.models))
    assert settings({})["standardize"] == "range" and settings({"standardize": False})["standardize"] == "none"
    assert settings({"dataset": "mnist", "path": "x"})["standardize"] == "none"
    for mode in ("range", "none", "pooled"):
        inst = build({"standardize": mode, "clip": 0.5, "baselines": False}, base_dir=HERE)
        rows = np.vstack([m.X_param.value for m in inst.models] + [inst.test_data[0]])  # the float64 data
        assert np.max(np.linalg.norm(rows, axis=1)) <= 0.5 * (1 + 1e-12)


@pytest.mark.parametrize("model, message", [
    ({"standardize": "zscore"}, "The 'standardize' entry of [model] must be one of 'range', 'public', 'none', "
                                "'pooled'. Got 'zscore' instead."),
    ({"dataset": "breast_cancer", "standardize": "range"},
     "The 'standardize' entry of [model] must be 'public' (with center and scale), 'none' or 'pooled' for dataset "
     "= 'breast_cancer'"),
    ({"standardize": "public", "scale": 1.0}, "The 'center' entry of [model] must be a finite float, or a list"),
    ({"standardize": "public", "center": 0.0, "scale": 0.0}, "The 'scale' entry of [model] must be a float in "
                                                               "(0, inf), or a list"),
    ({"center": 0.5}, "The 'center' entry of [model] must be absent unless standardize = 'public' (standardize "
                      "is 'range'). Got 0.5 instead."),
    ({"standardize": "public", "center": [0.5, 0.5], "scale": 1.0},
     "The 'center' entry of [model] must be a float or a list of 64 floats (one per feature). Got a list of 2 "
     "instead."),
])
def test_standardize_errors(model, message):
    with pytest.raises(ConfigError) as err:
        build(model, base_dir=HERE)
    assert message in str(err.value)


# ----------------------------------------------------------------------------- 2. total_samples
def test_total_samples_must_be_the_loaded_count():
    declared = (r"The 'total_samples' entry of \[model\] declares 1000 training samples but the loaded data "
                r"hold 225")
    with pytest.warns(UserWarning, match=declared):
        inst = build({"max_samples": 300, "total_samples": 1000, "baselines": False}, base_dir=HERE)
    assert not inst.info["private_possible"]
    algo = cvxdp.LinearizedADMM(rounds=2)
    with pytest.raises(DeclarationError, match=declared + r".*\(total_samples = 225\)"):
        cvxdp.solve(inst.agents, algorithm=algo, privacy=OBJG, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the true count: no warning, a private run is possible
        good = build({"max_samples": 300, "total_samples": 225, "baselines": False}, base_dir=HERE)
    assert good.info["private_possible"] and good.agents[0].sensitivity.l2 is not None
    assert cvxdp.solve(good.agents, algorithm=algo, privacy=OBJG, seed=0).history.shape[0] == 2


def test_femnist_case_pointed_at_other_writers(tmp_path):
    """cases/femnist_fl.toml declares the shared sample's 1527: other data warn, and a private run is refused."""
    from cvxdp.cli.main import cli

    fem = write_leaf(tmp_path / "fem", writers())
    base = ["run", str(CASES / "femnist_fl.toml"), "--data", str(fem), "--rounds", "1", "--no-progress", "--out"]
    res = CliRunner().invoke(cli, base + [str(tmp_path / "private"), "--mechanism", "ObjG", "--epsilon", "1"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "The 'total_samples' entry of [model] declares 1527 training samples but the loaded data hold 15" \
        in res.output
    with pytest.warns(UserWarning, match="declares 1527 training samples but the loaded data hold 15"):
        res = CliRunner().invoke(cli, base + [str(tmp_path / "plain"), "--mechanism", "none"])  # runs, warns
    assert res.exit_code == 0, res.output


def test_central_takes_data_like_run(tmp_path):
    """Issue 38: `cvxdp central` had no --data (FEMNIST's central reference needed Python)."""
    from cvxdp.cli.main import cli

    fem = write_leaf(tmp_path / "fem", writers())
    with pytest.warns(UserWarning, match="declares 1527 training samples but the loaded data hold 15"):
        res = CliRunner().invoke(cli, ["central", str(CASES / "femnist_fl.toml"), "--data", str(fem),
                                       "--no-progress", "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.output.strip().splitlines()[-1])
    inst = build({**load_toml(CASES / "femnist_fl.toml")["model"], "path": str(fem)}, base_dir=HERE)
    assert payload["case"] == "femnist_fl" and payload["objective"] == inst.central()["objective"]


def test_femnist_case_count_is_true_for_the_shared_sample(shared_femnist):
    case = load_toml(CASES / "femnist_fl.toml")["model"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inst = build({**case, "path": str(shared_femnist)}, base_dir=HERE)
    assert inst.info["n_train"] == case["total_samples"] == 1527 and inst.info["private_possible"]
    assert inst.info["classes"] == 62


@pytest.fixture
def shared_femnist() -> Path:
    for candidate in (Path(__file__).resolve().parents[4] / "shared" / "data" / "femnist_leaf",
                      Path("/work/shared/data/femnist_leaf")):
        if candidate.is_dir():
            return candidate
    pytest.skip("the FEMNIST LEAF sample (../shared/data/femnist_leaf) is not present")


# ----------------------------------------------------------------------------- 3. labels
@pytest.mark.parametrize("bad, index", [(62, 2), (-1, 0), (3.5, 1)])
def test_femnist_label_outside_its_classes_is_refused(tmp_path, bad, index):
    data = writers()
    X, y = data["w1"]
    y[index] = bad
    write_leaf(tmp_path, {**data, "w1": (X, y)})
    message = (f"shard_train.json': user 'w1' record {index} has label {bad:g}; FEMNIST labels must be integers "
               "in 0..61.")
    with pytest.raises(ConfigError, match=re.escape(message)):
        D.load_femnist(tmp_path)


def test_class_sets_are_public(tmp_path):
    """The classes are the data set's, not the labels the agents hold (labels 0..9 only here)."""
    inst = build({"dataset": "femnist", "path": str(write_leaf(tmp_path, writers())), "baselines": False},
                 base_dir=HERE)
    assert inst.info["classes"] == 62 and inst.info["parameter_shape"] == [784, 62]
    few = build({"max_samples": 6, "test_fraction": 0.0, "agents": 2, "baselines": False}, base_dir=HERE)
    assert few.info["classes"] == 10  # digits: 0..9, whichever six samples were drawn


def test_mnist_label_outside_0_9_is_refused(tmp_path):
    def idx(name: str, array: np.ndarray) -> None:
        header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
        (tmp_path / name).write_bytes(header + array.astype(np.uint8).tobytes())

    idx("train-images-idx3-ubyte", np.zeros((3, 28, 28)))
    idx("train-labels-idx1-ubyte", np.array([1, 12, 3]))
    with pytest.raises(ConfigError, match=r"train-labels-idx1-ubyte': record 1 has label 12; MNIST labels must be "
                                          r"integers in 0\.\.9\."):
        D.load_mnist(tmp_path)


def test_libsvm_labels(tmp_path):
    (tmp_path / "real.svm").write_text("1 1:0.5\n# a comment line\n2.5 2:1\n")
    with pytest.raises(ConfigError, match=r"real.svm': line 3 has label 2.5; classification labels must be int"):
        D.load_libsvm(tmp_path / "real.svm")
    (tmp_path / "tr.svm").write_text("0 1:1\n1 2:1\n2 1:1 2:1\n0 1:0.5\n")
    (tmp_path / "te.svm").write_text("1 1:1\n7 2:1\n")
    with pytest.raises(ConfigError, match=r"te.svm': line 2 has label 7, which is not one of the 3 classes of the "
                                          r"training data \(0, 1, 2\)"):
        build({"dataset": "libsvm", "path": "tr.svm", "test_path": "te.svm", "agents": 2, "baselines": False},
              base_dir=tmp_path)
