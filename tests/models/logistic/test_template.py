"""The logistic template: [model] validation, data sets through build(), central reference, evaluate."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import cvxdp
from cvxdp import build_model
from cvxdp.errors import ConfigError
from cvxdp_models.base import ModelInstance
from cvxdp_models.logistic.template import DEFAULTS, build

HERE = Path(".")
ADULT_ROWS = """\
39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, >50K
38, Private, 215646, HS-grad, 9, Divorced, Handlers-cleaners, Not-in-family, White, Male, 0, 0, 40, United-States, <=50K
52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, Wife, White, Female, 15024, 0, 40, Cuba, >50K.
"""


def write_idx(path: Path, array: np.ndarray) -> None:
    path.write_bytes(bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
                     + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_leaf(directory: Path, part: str, users: dict[str, int], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    blob = {"users": list(users), "num_samples": list(users.values()),
            "user_data": {u: {"x": rng.uniform(0, 1, (n, 784)).tolist(), "y": rng.integers(0, 62, n).tolist()}
                          for u, n in users.items()}}
    (directory / part).mkdir(parents=True, exist_ok=True)
    (directory / part / f"shard_{part}.json").write_text(json.dumps(blob))


def test_defaults_digits():
    inst = build({}, base_dir=HERE)
    assert isinstance(inst, ModelInstance)
    assert len(inst.agents) == 5 and all(isinstance(a, cvxdp.Agent) for a in inst.agents)
    info = inst.info
    assert (info["n_train"], info["n_test"], info["features"], info["classes"]) == (1347, 450, 64, 10)
    assert info["parameter_shape"] == [64, 10] and info["kind"] == "multiclass"
    # no public total: N = the data's own count, sound under replace-one (twice the add/remove bound)
    assert info["sensitivity"]["l2"] == pytest.approx(2 * np.sqrt(2) / 1347, rel=1e-6)
    assert info["relation"] == "replace" and info["sensitivity"]["relation"].startswith("replace one sample")
    public = build({"total_samples": 1347}, base_dir=HERE).info
    assert public["relation"] == "add_remove"
    assert public["sensitivity"]["l2"] == pytest.approx(np.sqrt(2) / 1347, rel=1e-6)
    with pytest.raises(ConfigError, match="'total_samples' entry of \\[model\\] must be the public sample count"):
        build({"relation": "add_remove"}, base_dir=HERE)
    for a in inst.agents:
        a.check()
        assert a.layout.shared["theta"].size == 640
    zero = inst.evaluate(SimpleNamespace(solution={"theta": np.zeros(640)}))
    assert zero["train_cost"] == pytest.approx(np.log(10))
    assert zero["box_violation"] == 0.0
    assert 0 < zero["baseline_pooled_test_error"] < 0.1
    assert 0 < zero["baseline_single_test_error"] < 0.2
    assert build_model("logistic", {}, base_dir=HERE).info["n_train"] == 1347  # registered name


@pytest.mark.parametrize("model, message", [
    ({"agents": 0}, "The 'agents' entry of [model] must be an int in [1, inf). Got 0 instead."),
    ({"agents": 2.5}, "The 'agents' entry of [model] must be an int in [1, inf). Got 2.5 instead."),
    ({"dataset": "cifar"}, "The 'dataset' entry of [model] must be one of 'digits'"),
    ({"split": "random"}, "The 'split' entry of [model] must be one of 'iid', 'label_skew', 'dirichlet'"),
    ({"bound": -1.0}, "The 'bound' entry of [model] must be a float in (0, inf). Got -1.0 instead."),
    ({"test_fraction": 1.0}, "The 'test_fraction' entry of [model] must be a float in [0, 1)"),
    ({"clip": "big"}, "The 'clip' entry of [model] must be a float in (0, inf). Got 'big' instead."),
    ({"reg": 0.1}, "The 'reg' entry of [model] must be 0 or absent for kind = 'multiclass'"),
    ({"kind": "binary"}, "kind = 'binary' needs a data set with two labels"),
    ({"dataset": "mnist"}, "The 'path' entry of [model] must be a path (str)"),
    ({"colour": 1}, "Unknown key(s) 'colour' in [model] of the logistic template. Allowed: agents, "),
    ({"baselines": "yes"}, "The 'baselines' entry of [model] must be true or false. Got 'yes' instead."),
    ({"dtype": "float16"}, "The 'dtype' entry of [model] must be one of 'float64', 'float32'. Got 'float16' instead."),
    ({"dtype": 32}, "The 'dtype' entry of [model] must be one of 'float64', 'float32'. Got 32 instead."),
    ({"dataset": "breast_cancer", "dtype": "float32"},
     "The 'dtype' entry of [model] must be 'float64' or absent for kind = 'binary'"),
])
def test_config_errors(model, message):
    with pytest.raises(ConfigError) as err:
        build(model, base_dir=HERE)
    assert message in str(err.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.svm"):
        build({"dataset": "libsvm", "path": "nothing.svm", "kind": "binary"}, base_dir=tmp_path)


def test_splits_and_sizes():
    skew = build({"agents": 10, "split": "label_skew", "baselines": False}, base_dir=HERE)
    assert len(skew.agents) == 10
    assert np.mean([len(np.unique(m.y)) for m in skew.models]) <= 3
    dirich = build({"agents": 4, "split": "dirichlet", "dirichlet_alpha": 0.2, "baselines": False}, base_dir=HERE)
    assert sum(dirich.info["samples_per_agent"]) == 1347
    small = build({"max_samples": 200, "test_fraction": 0.5, "agents": 2}, base_dir=HERE)
    assert small.info["n_train"] == 100 and small.info["n_test"] == 100


def test_binary_breast_cancer():
    inst = build({"dataset": "breast_cancer", "agents": 3, "reg": 1e-3, "bound": 10.0}, base_dir=HERE)
    assert inst.info["kind"] == "binary" and inst.info["parameter_shape"] == [30]
    res = inst.central(solution=True)
    assert res["solver"] == "CLARABEL" and res["status"] == "optimal"
    ev = inst.evaluate(SimpleNamespace(solution=res["solution"]))
    assert ev["train_cost"] == pytest.approx(res["objective"], rel=1e-9)
    assert ev["test_error"] < 0.1 and ev["baseline_pooled_test_error"] < 0.1


def test_file_datasets_through_build(tmp_path):
    rng = np.random.default_rng(0)
    # MNIST: train + t10k files -> the t10k files are the test set
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    write_idx(mnist / "train-images-idx3-ubyte", rng.integers(0, 256, (40, 28, 28)).astype(np.uint8))
    write_idx(mnist / "train-labels-idx1-ubyte", np.arange(40, dtype=np.uint8) % 10)
    write_idx(mnist / "t10k-images-idx3-ubyte", rng.integers(0, 256, (10, 28, 28)).astype(np.uint8))
    write_idx(mnist / "t10k-labels-idx1-ubyte", np.arange(10, dtype=np.uint8))
    inst = build({"dataset": "mnist", "path": "mnist", "agents": 4, "baselines": False}, base_dir=tmp_path)
    assert (inst.info["n_train"], inst.info["n_test"], inst.info["parameter_shape"]) == (40, 10, [784, 10])
    # FEMNIST: one writer = one agent, named after the writer
    write_leaf(tmp_path / "fem", "train", {"w1": 5, "w2": 6, "w3": 4})
    write_leaf(tmp_path / "fem", "test", {"w1": 2, "w2": 2, "w3": 2}, seed=1)
    inst = build({"dataset": "femnist", "path": "fem", "agents": 2, "baselines": False}, base_dir=tmp_path)
    assert [a.name for a in inst.agents] == ["w1", "w2"] and inst.info["n_test"] == 4
    with pytest.raises(ConfigError, match="'split' entry"):
        build({"dataset": "femnist", "path": "fem", "split": "iid"}, base_dir=tmp_path)
    # Adult: binary by default, 105 features
    (tmp_path / "adult.data").write_text(ADULT_ROWS * 3)
    inst = build({"dataset": "adult", "path": "adult.data", "agents": 2, "test_fraction": 0.25,
                  "baselines": False}, base_dir=tmp_path)
    assert inst.info["kind"] == "binary" and inst.info["features"] == 105
    # LIBSVM with a separate test file
    (tmp_path / "tr.svm").write_text("".join(f"{1 if i % 2 else -1} 1:{i / 10} 2:{1 - i / 10}\n" for i in range(10)))
    (tmp_path / "te.svm").write_text("+1 1:0.9\n-1 2:0.8\n")
    inst = build({"dataset": "libsvm", "path": "tr.svm", "test_path": "te.svm", "agents": 2, "kind": "binary",
                  "baselines": False}, base_dir=tmp_path)
    assert (inst.info["n_train"], inst.info["n_test"], inst.info["features"]) == (10, 2, 2)


def test_real_femnist_build(shared_data):
    if not (shared_data / "femnist_leaf").is_dir():
        pytest.skip("no FEMNIST LEAF sample in ../shared/data/femnist_leaf: put it there to run this test")
    inst = build({"dataset": "femnist", "path": str(shared_data / "femnist_leaf"), "agents": 3,
                  "baselines": False}, base_dir=HERE)
    assert len(inst.agents) == 3 and inst.info["features"] == 784
    assert inst.info["parameter_shape"][1] == inst.info["classes"] <= 62


def test_central_clarabel_matches_lbfgsb():
    """The CVXPY (Clarabel) reference and SciPy's L-BFGS-B reference agree on a small instance."""
    inst = build({"max_samples": 200, "agents": 3, "baselines": False}, base_dir=HERE)
    clarabel = inst.central(solver="CLARABEL")
    lbfgsb = inst.central(solver="L-BFGS-B", tol=1e-9, solution=True)
    assert clarabel["status"] == "optimal" and lbfgsb["status"] == "optimal"
    assert clarabel["objective"] == pytest.approx(lbfgsb["objective"], rel=1e-6)
    assert inst.central(solver="auto")["solver"] == "CLARABEL"
    sol = lbfgsb["solution"]["theta"]
    assert np.max(np.abs(sol)) <= inst.info["bound"] + 1e-12
    assert "solution" not in inst.central(solver="L-BFGS-B", tol=1e-9)  # cached; no array unless asked for


def test_defaults_table_is_documented():
    import cvxdp_models.logistic.template as T

    for key in DEFAULTS:
        assert key in T.__doc__


def _tiny_case(tmp_path: Path, dtype: str | None) -> Path:
    case = tmp_path / f"tiny_{dtype}.toml"
    case.write_text("[case]\ntemplate = 'logistic'\n[model]\ndataset = 'digits'\nagents = 2\nmax_samples = 300\n"
                    "total_samples = 225\nbaselines = false\n" + (f"dtype = '{dtype}'\n" if dtype else "")
                    + "[algorithm]\nname = 'ladmm'\nrho = 0.5\neta = 2.0\nrounds = 15\n"
                    "[privacy]\nmechanism = 'ObjG'\nepsilon = 1.0\ndelta = 1e-5\n")
    return case


def test_dtype_key_end_to_end_through_cvxdp_run(tmp_path):
    """``[model] dtype`` reaches the agents through ``cvxdp run``: float32 (the default) and float64 runs with
    the same seed draw the same noise, have the same ledger, and end within float32 rounding of each other;
    the released vectors are float64 in both. A bad value is one clear line naming the entry."""
    from click.testing import CliRunner

    from cvxdp.cli.main import cli

    assert build({}, base_dir=HERE).models[0].X.dtype == np.float32  # the default
    assert build({"dtype": "float64"}, base_dir=HERE).models[0].X.dtype == np.float64
    assert build({}, base_dir=HERE).pooled.X.dtype == np.float64  # the reference stays float64
    runs = {}
    for dtype in (None, "float64"):
        out = tmp_path / f"out_{dtype}"
        res = CliRunner().invoke(cli, ["run", str(_tiny_case(tmp_path, dtype)), "--seed", "0", "--json",
                                       "--no-progress", "--out", str(out)])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.output.strip().splitlines()[-1])
        arrays = np.load(out / "arrays.npz")
        runs[dtype] = summary, {k: arrays[k] for k in arrays.files}
    (s32, a32), (s64, a64) = runs[None], runs["float64"]
    assert s32["privacy"] == s64["privacy"]  # the same accounting
    z32, z64 = a32["z:agent0"], a64["z:agent0"]
    assert z32.dtype == z64.dtype == np.float64
    assert np.any(z32.astype(np.float32).astype(np.float64) != z32)  # full float64 resolution, not a float32 grid
    gap = np.max(np.abs(z32 - z64))
    assert 0 < gap <= 1e-5 * np.max(np.abs(z64))  # the key changed the arithmetic, within the stated tolerance
    assert s32["train_cost"] == pytest.approx(s64["train_cost"], rel=1e-5)
    bad = CliRunner().invoke(cli, ["run", str(_tiny_case(tmp_path, "half")), "--no-progress"])
    assert bad.exit_code != 0
    assert "The 'dtype' entry of [model] must be one of 'float64', 'float32'. Got 'half' instead." in bad.output
    assert "Traceback" not in bad.output


def test_lbfgsb_stops_at_the_time_limit_with_its_iterate():
    """A time limit ends L-BFGS-B after the iteration that passes it, in the box, and the status says so."""
    from cvxdp_models.logistic.baselines import lbfgsb_box

    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 30))
    b = rng.normal(size=40)
    value, grad = (lambda x: 0.5 * float(np.sum((A @ x - b) ** 2))), (lambda x: A.T @ (A @ x - b))
    x, fx, iterations, status = lbfgsb_box(value, grad, np.zeros(30), -0.1, 0.1, tol=1e-12, time_limit=1e-12)
    assert iterations == 1 and status.startswith("time limit (1e-12 s): projected gradient")
    assert np.all(np.abs(x) <= 0.1) and fx == pytest.approx(value(x))
    x, fx, iterations, status = lbfgsb_box(value, grad, np.zeros(30), -0.1, 0.1, tol=1e-8)
    assert status == "optimal" and iterations > 1


def test_central_passes_the_time_limit_to_lbfgsb():
    inst = build({"max_samples": 300}, base_dir=HERE)
    res = inst.central(solver="L-BFGS-B", time_limit=1e-12)
    assert res["status"].startswith("time limit (1e-12 s)") and res["iterations"] == 1
    assert inst.central(solver="L-BFGS-B")["status"] == "optimal"
