"""Loaders (IDX/MNIST, LEAF FEMNIST, LIBSVM, UCI Adult, bundled) and splits of the logistic template."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from cvxdp.errors import ConfigError
from cvxdp_models.logistic import data as D

# ----------------------------------------------------------------------------- IDX / MNIST


def write_idx(path: Path, array: np.ndarray, code: int = 0x08, *, gz: bool = False) -> Path:
    dtype = {0x08: ">u1", 0x0C: ">i4", 0x0D: ">f4"}[code]
    raw = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) \
        + np.ascontiguousarray(array, dtype=dtype).tobytes()
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(raw)
    else:
        path.write_bytes(raw)
    return path


def test_idx_roundtrip_types_and_gzip(tmp_path):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (3, 4, 5)).astype(np.uint8)
    np.testing.assert_array_equal(D.load_idx(write_idx(tmp_path / "a-idx3-ubyte", img)), img)
    np.testing.assert_array_equal(D.load_idx(write_idx(tmp_path / "a.gz", img, gz=True)), img)
    ints = rng.integers(-1000, 1000, 7)
    np.testing.assert_array_equal(D.load_idx(write_idx(tmp_path / "i", ints, 0x0C)), ints)
    floats = rng.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(D.load_idx(write_idx(tmp_path / "f", floats, 0x0D)), floats)


def test_idx_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        D.load_idx(tmp_path / "nothing-here")
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(ConfigError, match="magic number"):
        D.load_idx(tmp_path / "bad")
    (tmp_path / "code").write_bytes(b"\x00\x00\x07\x01\x00\x00\x00\x01\x05")
    with pytest.raises(ConfigError, match="type code"):
        D.load_idx(tmp_path / "code")
    good = write_idx(tmp_path / "trunc", np.arange(10, dtype=np.uint8))
    good.write_bytes(good.read_bytes()[:-3])
    with pytest.raises(ConfigError, match="declares shape"):
        D.load_idx(good)


def test_real_mnist_labels(shared_data):
    path = shared_data / "mnist_labels" / "t10k-labels-idx1-ubyte"
    if not path.is_file():
        pytest.skip("no MNIST labels in ../shared/data/mnist_labels: put them there to run this test")
    labels = D.load_idx(path)
    assert labels.shape == (10_000,) and labels.dtype == np.uint8
    assert set(np.unique(labels)) == set(range(10))
    assert labels[:5].tolist() == [7, 2, 1, 0, 4]  # the well-known first t10k labels


def test_load_mnist_directory(tmp_path):
    rng = np.random.default_rng(1)
    write_idx(tmp_path / "train-images-idx3-ubyte", rng.integers(0, 256, (6, 28, 28)).astype(np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.arange(6, dtype=np.uint8), gz=True)
    X, y = D.load_mnist(tmp_path)
    assert X.shape == (6, 784) and 0 <= X.min() and X.max() <= 1
    assert y.tolist() == list(range(6))
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        D.load_mnist(tmp_path, "t10k")
    with pytest.raises(FileNotFoundError, match="MNIST directory"):
        D.load_mnist(tmp_path / "missing")
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((3, 28, 28), dtype=np.uint8))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(2, dtype=np.uint8))
    with pytest.raises(ConfigError, match="do not match"):
        D.load_mnist(tmp_path, "t10k")


# ----------------------------------------------------------------------------- FEMNIST


def write_leaf(directory: Path, part: str, users: dict[str, int], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    blob = {"users": list(users), "num_samples": list(users.values()),
            "user_data": {u: {"x": rng.uniform(0, 1, (n, 784)).tolist(), "y": rng.integers(0, 62, n).tolist()}
                          for u, n in users.items()}}
    (directory / part).mkdir(parents=True, exist_ok=True)
    (directory / part / f"shard_{part}.json").write_text(json.dumps(blob))


def test_femnist_leaf_layout(tmp_path):
    write_leaf(tmp_path, "train", {"w1": 3, "w2": 4})
    write_leaf(tmp_path, "test", {"w2": 2})
    fem = D.load_femnist(tmp_path)
    assert fem.users == ["w1", "w2"]
    assert [len(y) for _, y in fem.train] == [3, 4] and [len(y) for _, y in fem.test] == [0, 2]
    raw = D.load_femnist(tmp_path, invert=False)
    np.testing.assert_allclose(fem.train[0][0], 1.0 - raw.train[0][0])
    assert D.load_femnist(tmp_path, max_users=1).users == ["w1"]


def test_femnist_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="FEMNIST directory"):
        D.load_femnist(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="No LEAF training json"):
        D.load_femnist(tmp_path)
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.json").write_text(json.dumps({"users": ["u"], "num_samples": [1]}))
    with pytest.raises(ConfigError, match="user_data"):
        D.load_femnist(tmp_path)
    (tmp_path / "train" / "a.json").write_text(json.dumps(
        {"users": ["u"], "num_samples": [2], "user_data": {"u": {"x": [[0.0] * 4], "y": [1]}}}))
    with pytest.raises(ConfigError, match="must agree"):
        D.load_femnist(tmp_path)
    (tmp_path / "train" / "a.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        D.load_femnist(tmp_path)


def test_real_femnist_sample(shared_data):
    path = shared_data / "femnist_leaf"
    if not path.is_dir():
        pytest.skip("no FEMNIST LEAF sample in ../shared/data/femnist_leaf: put it there to run this test")
    fem = D.load_femnist(path, max_users=6)
    assert len(fem.users) == 6 and len(set(fem.users)) == 6
    for (X, y), (Xt, yt) in zip(fem.train, fem.test):
        assert X.shape[1] == 784 and len(X) == len(y) > 0 and len(Xt) == len(yt)
        assert 0.0 <= X.min() and X.max() <= 1.0 and y.max() < 62
        assert X.mean() < 0.5  # inverted: ink is 1, background 0


# ----------------------------------------------------------------------------- LIBSVM / Adult / bundled


def test_libsvm(tmp_path):
    f = tmp_path / "a.svm"
    f.write_text("+1 1:0.5 3:1\n-1 2:2\n+1 1:1 2:1 3:1\n")
    X, y = D.load_libsvm(f)
    assert X.shape == (3, 3) and y.tolist() == [1, -1, 1]
    assert D.load_libsvm(f, n_features=5)[0].shape == (3, 5)
    with pytest.raises(FileNotFoundError, match="LIBSVM file"):
        D.load_libsvm(tmp_path / "none.svm")
    (tmp_path / "bad.svm").write_text("+1 zz:1\n")
    with pytest.raises(ConfigError, match="malformed"):
        D.load_libsvm(tmp_path / "bad.svm")


ADULT_ROWS = """\
39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, <=50K
38, Private, 215646, HS-grad, 9, Divorced, Handlers-cleaners, Not-in-family, White, Male, 0, 0, 40, United-States, <=50K
54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, 0, 0, 60, South, >50K
52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, Wife, White, Female, 15024, 0, 40, Cuba, >50K.
"""


def test_adult_preprocessing(tmp_path):
    f = tmp_path / "adult.data"
    f.write_text(ADULT_ROWS)
    X, y = D.load_adult(f)
    assert X.shape == (4, 105) and D.ADULT_DIM == 105  # the row with '?' is dropped
    assert y.tolist() == [-1, -1, -1, 1]  # trailing '.' of adult.test handled
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    assert np.all(X >= 0)
    # each categorical block is one-hot before scaling: 8 non-zero indicators + continuous columns
    assert np.all((X[:, 6:] > 0).sum(axis=1) == 8)
    with pytest.raises(FileNotFoundError, match="UCI Adult"):
        D.load_adult(tmp_path / "missing.csv")
    (tmp_path / "bad.csv").write_text(ADULT_ROWS.replace("State-gov", "Moon-gov"))
    with pytest.raises(ConfigError, match="Moon-gov"):
        D.load_adult(tmp_path / "bad.csv")


def test_bundled():
    X, y = D.load_sklearn("digits")
    assert X.shape == (1797, 64) and X.max() <= 1.0 and set(y) == set(range(10))
    X, y = D.load_sklearn("breast_cancer")
    assert X.shape == (569, 30) and set(y) == {-1, 1}
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    with pytest.raises(ConfigError, match="load_sklearn"):
        D.load_sklearn("iris")


def test_clip_rows():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    Xc = D.clip_rows(X, 1.0)
    np.testing.assert_allclose(np.linalg.norm(Xc, axis=1), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(Xc[1], X[1])


# ----------------------------------------------------------------------------- splits


def _covers(parts, y):
    assert sum(len(p[1]) for p in parts) == len(y)
    assert sorted(np.concatenate([p[1] for p in parts]).tolist()) == sorted(y.tolist())


def test_splits():
    X, y = D.load_sklearn("digits")
    rng = np.random.default_rng(0)
    iid = D.split_iid(X, y, 7, rng)
    _covers(iid, y)
    assert max(len(p[1]) for p in iid) - min(len(p[1]) for p in iid) <= 1
    skew = D.split_label_skew(X, y, 10, rng, classes_per_agent=2)
    _covers(skew, y)
    assert max(len(np.unique(p[1])) for p in skew) <= 4  # shards may straddle a label boundary
    assert np.mean([len(np.unique(p[1])) for p in skew]) <= 3
    dirich = D.split_dirichlet(X, y, 5, 0.1, rng)
    _covers(dirich, y)
    assert min(len(p[1]) for p in dirich) >= 1
    # small alpha -> skewed: the largest class share of an agent is well above 1/10
    assert np.mean([np.bincount(p[1], minlength=10).max() / len(p[1]) for p in dirich]) > 0.3
    # same seed, same split
    a = D.split_dirichlet(X, y, 5, 0.5, np.random.default_rng(3))
    b = D.split_dirichlet(X, y, 5, 0.5, np.random.default_rng(3))
    assert all(np.array_equal(p[1], q[1]) for p, q in zip(a, b))


def test_split_errors_and_test_split():
    X, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    with pytest.raises(ConfigError, match="at least one sample"):
        D.split_iid(X, y, 5, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="'agents'"):
        D.split_iid(X, y, 0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="dirichlet_alpha"):
        D.split_dirichlet(X, y, 2, 0.0, np.random.default_rng(0))
    Xd, yd = D.load_sklearn("digits")
    X_tr, X_te, y_tr, y_te = D.train_test(Xd, yd, 0.25, 0)
    assert len(y_te) == 450 and len(y_tr) == 1347
    np.testing.assert_array_equal(D.train_test(Xd, yd, 0.25, 0)[3], y_te)  # seeded
    assert len(D.train_test(Xd, yd, 0.0, 0)[3]) == 0
