"""Catalogue of bad inputs, part 2: data files (IDX, LEAF json, LIBSVM, UCI Adult, vertical LIBSVM).

Every malformed, truncated, empty or non-finite file raises ConfigError naming the file and, where it
applies, the line, record or user — never an EOFError, KeyError or numpy traceback.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from cvxdp.errors import ConfigError
from cvxdp_models.logistic import data as D
from cvxdp_models.vertical import load_libsvm as load_vertical_libsvm

ADULT_ROW = "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, " \
            "United-States, <=50K\n"


def _gz(path: Path, payload: bytes, truncate: bool = False) -> Path:
    blob = gzip.compress(payload)
    path.write_bytes(blob[: len(blob) // 2] if truncate else blob)
    return path


def _idx(n: int = 4) -> bytes:
    return bytes([0, 0, 0x08, 1]) + struct.pack(">I", n) + bytes(range(n))


def _leaf(tmp: Path, blob) -> Path:
    (tmp / "train").mkdir(exist_ok=True)
    text = blob if isinstance(blob, str) else json.dumps(blob)
    (tmp / "train" / "all_data_0.json").write_text(text)
    return tmp


def _leaf_blob(x, y, n=None) -> dict:
    return {"users": ["w1"], "num_samples": [len(y) if n is None else n], "user_data": {"w1": {"x": x, "y": y}}}


def _text(tmp: Path, name: str, content: str) -> Path:
    path = tmp / name
    path.write_text(content)
    return path


CASES = [
    # IDX
    ("idx truncated gz", lambda t: D.load_idx(_gz(t / "l.idx1-ubyte.gz", _idx(), truncate=True)),
     ["l.idx1-ubyte.gz", "truncated"]),
    ("idx not gzip", lambda t: D.load_idx(_text(t, "l.idx1-ubyte.gz", "plain text, not gzip")),
     ["l.idx1-ubyte.gz", "gzip"]),
    ("idx empty", lambda t: D.load_idx(_text(t, "l.idx1-ubyte", "")), ["l.idx1-ubyte", "empty"]),
    ("idx short body", lambda t: D.load_idx(_gz(t / "l.idx1-ubyte.gz", _idx()[:-2])), ["l.idx1-ubyte.gz", "bytes"]),
    # LEAF
    ("leaf missing x", lambda t: D.load_femnist(_leaf(t, {"users": ["w1"], "num_samples": [1],
                                                          "user_data": {"w1": {"y": [1]}}})),
     ["all_data_0.json", "'w1'", "'x'"]),
    ("leaf ragged rows", lambda t: D.load_femnist(_leaf(t, _leaf_blob([[0.1, 0.2], [0.3]], [1, 2]))),
     ["all_data_0.json", "'w1'", "ragged"]),
    ("leaf nan pixel", lambda t: D.load_femnist(_leaf(t, _leaf_blob([[0.1, float("nan")]], [1]))),
     ["all_data_0.json", "'w1'", "NaN"]),
    ("leaf empty file", lambda t: D.load_femnist(_leaf(t, "")), ["all_data_0.json", "empty"]),
    ("leaf top-level list", lambda t: D.load_femnist(_leaf(t, "[1, 2]")), ["all_data_0.json", "list"]),
    ("leaf truncated json", lambda t: D.load_femnist(_leaf(t, json.dumps(_leaf_blob([[0.1]], [1]))[:30])),
     ["all_data_0.json", "not valid JSON"]),
    ("leaf count mismatch", lambda t: D.load_femnist(_leaf(t, _leaf_blob([[0.1]], [1], n=5))),
     ["all_data_0.json", "num_samples 5"]),
    ("leaf user_data not object", lambda t: D.load_femnist(_leaf(t, {"users": ["w1"], "num_samples": [1],
                                                                     "user_data": [1]})),
     ["all_data_0.json", "user_data"]),
    # LIBSVM (federated loader)
    ("libsvm nan", lambda t: D.load_libsvm(_text(t, "d.svm", "1 1:0.5\n# c\n-1 1:nan 2:1\n")),
     ["d.svm", "line 3", "NaN"]),
    ("libsvm inf", lambda t: D.load_libsvm(_text(t, "d.svm", "1 1:inf\n")), ["d.svm", "line 1", "infinite"]),
    ("libsvm empty", lambda t: D.load_libsvm(_text(t, "d.svm", "")), ["d.svm", "no samples"]),
    ("libsvm garbage", lambda t: D.load_libsvm(_text(t, "d.svm", "hello world\n")), ["d.svm", "malformed"]),
    ("libsvm truncated gz", lambda t: D.load_libsvm(_gz(t / "d.svm.gz", b"1 1:0.5\n" * 500, truncate=True)),
     ["d.svm.gz", "truncated"]),
    ("libsvm binary garbage", lambda t: D.load_libsvm(_gz(t / "d.svm.gz", bytes(range(256)) * 4)), ["d.svm.gz"]),
    # UCI Adult
    ("adult empty", lambda t: D.load_adult(_text(t, "adult.data", "")), ["adult.data", "empty"]),
    ("adult ragged row", lambda t: D.load_adult(_text(t, "adult.data", ADULT_ROW + "1, 2, 3, 4\n" + ADULT_ROW
                                                       .replace("<=50K", "<=50K, extra"))),
     ["adult.data", "line 3"]),
    ("adult nan value", lambda t: D.load_adult(_text(t, "adult.data", ADULT_ROW + ADULT_ROW.replace("77516", "nan"))),
     ["adult.data", "row 2", "NaN"]),
    ("adult inf value", lambda t: D.load_adult(_text(t, "adult.data", ADULT_ROW.replace(" 40,", " inf,"))),
     ["adult.data", "row 1", "infinite"]),
    ("adult truncated gz", lambda t: D.load_adult(_gz(t / "adult.data.gz", ADULT_ROW.encode() * 400,
                                                      truncate=True)),
     ["adult.data.gz", "truncated"]),
    # vertical (ADMM sharing) LIBSVM
    ("vertical libsvm nan", lambda t: load_vertical_libsvm(_text(t, "v.svm", "1 1:0.5\n-1 1:nan\n")),
     ["v.svm", "line 2", "NaN"]),
    ("vertical libsvm empty", lambda t: load_vertical_libsvm(_text(t, "v.svm", "")), ["v.svm", "no samples"]),
    ("vertical libsvm truncated gz", lambda t: load_vertical_libsvm(_gz(t / "v.svm.gz", b"1 1:1\n-1 2:1\n" * 300,
                                                                        truncate=True)),
     ["v.svm.gz", "truncated"]),
]


@pytest.mark.parametrize("what, load, words", CASES, ids=[c[0] for c in CASES])
def test_bad_data_file_gets_one_clear_error_naming_it(tmp_path, what, load, words):
    with pytest.raises(ConfigError) as info:
        load(tmp_path)

    message = str(info.value)
    for word in words:
        assert word in message, (word, message)


def test_good_files_still_load(tmp_path):
    X, y = D.load_libsvm(_gz(tmp_path / "ok.svm.gz", b"1 1:0.5\n-1 2:1\n"))
    assert X.shape == (2, 2) and np.isfinite(X).all()
    assert D.load_idx(_gz(tmp_path / "ok.idx1-ubyte.gz", _idx())).tolist() == [0, 1, 2, 3]
    X, y = D.load_adult(_text(tmp_path, "adult.data", ADULT_ROW * 3))
    assert X.shape == (3, D.ADULT_DIM)
