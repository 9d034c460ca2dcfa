"""Data sets for the logistic templates: local-file loaders, preprocessing and splits over agents.

Nothing here downloads anything. File loaders take a local path and raise :class:`FileNotFoundError`
(naming the path and what was expected) when it is missing, and :class:`cvxdp.errors.ConfigError` when a
file is malformed.

Loaders
-------
- :func:`load_idx`, :func:`load_mnist` — MNIST IDX files (optionally gzipped).
- :func:`load_femnist` — a LEAF FEMNIST json directory; one writer = one agent.
- :func:`load_libsvm` — LIBSVM/svmlight text files.
- :func:`load_adult` — the UCI Adult CSV with the papers' preprocessing (105 dims).
- :func:`load_sklearn` — scikit-learn's bundled ``digits`` and ``breast_cancer``.

Splits
------
:func:`split_iid`, :func:`split_label_skew`, :func:`split_dirichlet` return one ``(X_p, y_p)`` pair per agent;
:func:`train_test` holds out a test set.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from cvxdp.errors import ConfigError

__all__ = [
    "ADULT_SCALE", "BREAST_CANCER_SCALE", "FEMNIST_CLASSES", "MNIST_CLASSES", "FemnistData", "check_labels",
    "clip_rows", "group_parts", "group_sizes", "load_adult", "load_femnist", "load_idx", "load_libsvm", "load_mnist", "load_sklearn",
    "normalize_rows", "public_scale", "split_dirichlet", "split_iid", "split_label_skew", "train_test",
]

Split = list[tuple[np.ndarray, np.ndarray]]


# --------------------------------------------------------------------------- preprocessing
def clip_rows(X: np.ndarray, C: float) -> np.ndarray:
    """Rescale every row with ``||x_i||_2 > C`` onto the sphere of radius ``C`` (others unchanged).

    Parameters
    ----------
    X : ndarray, shape (n, d)
    C : float
        Clipping radius (> 0).

    Returns
    -------
    ndarray, shape (n, d)
        A new array with ``||x_i||_2 <= C`` for every row.
    """
    X = np.asarray(X, dtype=float)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    scale = np.minimum(1.0, C / np.maximum(norms, np.finfo(float).tiny))
    return X * scale


def normalize_rows(X: np.ndarray) -> np.ndarray:
    """Divide every non-zero row by its Euclidean norm (``||x_i||_2 = 1``; zero rows stay zero)."""
    X = np.asarray(X, dtype=float)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def public_scale(X: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Divide every column by a fixed public scale, capped at 1: the papers' column max-scaling with constants
    that do not move with the loaded data (the per-column maxima of the whole file were a statistic pooled over
    every agent's samples)."""
    return np.minimum(X / scale, 1.0)


#: Public column scales of scikit-learn's breast_cancer: the maxima of the bundled data set (scikit-learn's
#: description publishes them, rounded), frozen here so that the scaling is a constant, not a statistic of the
#: loaded samples. On the bundled data the result is bit-identical to the former per-file max-scaling.
BREAST_CANCER_SCALE = np.array([
    28.11, 39.28, 188.5, 2501.0, 0.1634, 0.3454, 0.4268, 0.2012, 0.304, 0.09744, 2.873, 4.885, 21.98, 542.2,
    0.03113, 0.1354, 0.396, 0.05279, 0.07895, 0.02984, 36.04, 49.54, 251.2, 4254.0, 0.2226, 1.058, 1.252, 0.291,
    0.6638, 0.2075])


# --------------------------------------------------------------------------- IDX / MNIST
#: The public class sets of the image data sets: labels outside them are refused, never turned into a class.
MNIST_CLASSES = 10
FEMNIST_CLASSES = 62  # LEAF's FEMNIST: 10 digits, 26 upper-case and 26 lower-case letters

_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


@contextlib.contextmanager
def _reading(path: Path, kind: str) -> Iterator[None]:
    """Turn the errors of reading ``path`` (truncated or corrupt gzip, binary garbage, OS errors) into one
    :class:`ConfigError` naming the file."""
    try:
        yield
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ConfigError(f"{kind} file {str(path)!r} is truncated or not a valid gzip file ({type(exc).__name__}: "
                          f"{exc}); download or decompress it again.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{kind} file {str(path)!r} is not a text file ({exc}).") from None
    except OSError as exc:
        raise ConfigError(f"{kind} file {str(path)!r} cannot be read ({exc.strerror or exc}).") from None


def _open_bytes(path: Path) -> bytes:
    with _reading(path, "IDX"):
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()


def _text_line(path: Path, record: int) -> int | None:
    """The 1-based line number of data record ``record`` (0-based; blank and '#' lines skipped)."""
    opener = gzip.open if path.suffix == ".gz" else open
    seen = -1
    with opener(path, "rt", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            text = line.split("#", 1)[0].strip()
            if text:
                seen += 1
                if seen == record:
                    return number
    return None


def _check_finite(path: Path, kind: str, X: np.ndarray, y: np.ndarray | None = None) -> None:
    bad_rows = ~np.isfinite(X).all(axis=1)
    if y is not None:
        bad_rows |= ~np.isfinite(np.asarray(y, dtype=float))
    if bad_rows.any():
        record = int(np.argmax(bad_rows))
        line = _text_line(path, record)
        where = f"line {line}" if line is not None else f"record {record + 1}"
        raise ConfigError(f"{kind} file {str(path)!r}: {where} holds NaN or infinite values; every value must be "
                          "a finite number.")


def load_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (the MNIST format), gzipped or not.

    The header is two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int, 0x0D float,
    0x0E double), the number of dimensions, then one big-endian uint32 per dimension.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    ndarray
        Of the declared shape and type (native byte order).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    cvxdp.errors.ConfigError
        If the magic number, type code or size does not match the IDX format.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file {str(path)!r} does not exist (expected an MNIST-style IDX file, "
                                "e.g. train-images-idx3-ubyte).")
    raw = _open_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ConfigError(f"{str(path)!r} is not an IDX file: the magic number must start with two zero bytes. "
                          f"Got {raw[:4].hex() or 'an empty file'} instead.")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_TYPES:
        raise ConfigError(f"{str(path)!r}: unknown IDX type code 0x{code:02X} "
                          f"(expected one of {', '.join(f'0x{c:02X}' for c in _IDX_TYPES)}).")
    if ndim == 0 or len(raw) < 4 + 4 * ndim:
        raise ConfigError(f"{str(path)!r}: truncated IDX header ({ndim} dimensions declared, {len(raw)} bytes).")
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    dtype = np.dtype(_IDX_TYPES[code])
    expected = int(np.prod(shape)) * dtype.itemsize
    body = raw[4 + 4 * ndim:]
    if len(body) != expected:
        raise ConfigError(f"{str(path)!r}: the header declares shape {shape} of {dtype.name} ({expected} bytes) "
                          f"but the file holds {len(body)} data bytes.")
    return np.frombuffer(body, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _find(directory: Path, stems: Sequence[str]) -> Path | None:
    for stem in stems:
        for name in (stem, stem + ".gz"):
            if (directory / name).is_file():
                return directory / name
    return None


def load_mnist(path: str | Path, kind: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Load MNIST (or Fashion-MNIST) from a directory of IDX files.

    Parameters
    ----------
    path : str or Path
        Directory holding ``{kind}-images-idx3-ubyte`` and ``{kind}-labels-idx1-ubyte`` (``.gz`` allowed;
        ``train-*`` / ``t10k-*`` as distributed, ``.`` in place of ``-`` also accepted).
    kind : {"train", "t10k"}

    Returns
    -------
    X : ndarray, shape (n, rows*cols), float in [0, 1] (the public pixel range 0..255 divided by 255)
    y : ndarray, shape (n,), int in ``0..9``

    Raises
    ------
    cvxdp.errors.ConfigError
        For a label outside ``0..9`` (naming the label file and the record index).
    """
    if kind not in ("train", "t10k"):
        raise ConfigError(f"The 'kind' parameter of load_mnist must be one of 'train', 't10k'. Got {kind!r} instead.")
    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"MNIST directory {str(directory)!r} does not exist (expected a directory with "
                                f"{kind}-images-idx3-ubyte and {kind}-labels-idx1-ubyte).")
    img = _find(directory, [f"{kind}-images-idx3-ubyte", f"{kind}-images.idx3-ubyte"])
    lab = _find(directory, [f"{kind}-labels-idx1-ubyte", f"{kind}-labels.idx1-ubyte"])
    for found, what in ((img, f"{kind}-images-idx3-ubyte"), (lab, f"{kind}-labels-idx1-ubyte")):
        if found is None:
            raise FileNotFoundError(f"{str(directory / what)!r} (or .gz) does not exist; load_mnist expects the "
                                    "IDX image and label files of the same split in one directory.")
    images, labels = load_idx(img), load_idx(lab)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ConfigError(f"MNIST files in {str(directory)!r} do not match: images of shape {images.shape}, "
                          f"labels of shape {labels.shape} (expected (n, rows, cols) and (n,)).")
    bad = np.flatnonzero((labels < 0) | (labels >= MNIST_CLASSES))
    if len(bad):
        raise ConfigError(f"MNIST label file {str(lab)!r}: record {int(bad[0])} has label {int(labels[bad[0]])}; "
                          f"MNIST labels must be integers in 0..{MNIST_CLASSES - 1}.")
    X = images.reshape(len(images), -1).astype(float) / 255.0
    return X, labels.astype(int)


# --------------------------------------------------------------------------- LEAF FEMNIST
@dataclass
class FemnistData:
    """Per-writer FEMNIST data (one writer = one agent).

    Attributes
    ----------
    users : list of str
        Writer ids, in file order.
    train, test : list of (X, y)
        ``X`` of shape (n_u, 784) with ink = 1 (``1 - pixel``), ``y`` int in [0, 62).
    """

    users: list[str]
    train: Split
    test: Split


def _leaf_files(directory: Path, part: str) -> list[Path]:
    sub = directory / part
    if sub.is_dir():
        return sorted(sub.glob("*.json"))
    return sorted(directory.glob(f"*_{part}_*.json"))


def _leaf_array(file: Path, user: str, data: object, key: str, dtype: type) -> np.ndarray:
    if not isinstance(data, dict) or key not in data:
        raise ConfigError(f"LEAF file {str(file)!r}: user_data[{user!r}] has no {key!r} entry (expected "
                          "{'x': [...], 'y': [...]}).")
    try:
        arr = np.asarray(data[key], dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"LEAF file {str(file)!r}: user_data[{user!r}][{key!r}] is not a rectangular array of "
                          f"numbers (ragged rows or non-numbers: {exc}).") from None
    if not np.all(np.isfinite(arr)):
        row = int(np.argmax(~np.isfinite(arr.reshape(len(arr), -1)).all(axis=1))) if arr.ndim else 0
        raise ConfigError(f"LEAF file {str(file)!r}: user_data[{user!r}][{key!r}] record {row} holds NaN or "
                          "infinite values.")
    return arr


def _read_leaf(files: list[Path]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for file in files:
        with _reading(file, "LEAF"):
            with open(file, "rb") as fh:
                raw = fh.read()
        if not raw.strip():
            raise ConfigError(f"LEAF file {str(file)!r} is empty (expected a json object with 'users', "
                              "'num_samples', 'user_data').")
        try:
            blob = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"LEAF file {str(file)!r} is not valid JSON ({exc}).") from None
        if not isinstance(blob, dict):
            raise ConfigError(f"LEAF file {str(file)!r} must hold a json object with 'users', 'num_samples', "
                              f"'user_data'. Got a {type(blob).__name__} instead.")
        for key in ("users", "num_samples", "user_data"):
            if key not in blob:
                raise ConfigError(f"LEAF file {str(file)!r} has no {key!r} entry (expected keys 'users', "
                                  "'num_samples', 'user_data').")
        if not isinstance(blob["users"], list) or not isinstance(blob["num_samples"], list) \
                or len(blob["users"]) != len(blob["num_samples"]) or not isinstance(blob["user_data"], dict):
            raise ConfigError(f"LEAF file {str(file)!r}: 'users' and 'num_samples' must be lists of equal length "
                              "and 'user_data' an object.")
        for user, n in zip(blob["users"], blob["num_samples"]):
            if user not in blob["user_data"]:
                raise ConfigError(f"LEAF file {str(file)!r}: user {user!r} is listed but has no user_data.")
            data = blob["user_data"][user]
            X = _leaf_array(file, user, data, "x", float)
            y = _leaf_array(file, user, data, "y", float)
            if X.ndim != 2 or y.ndim != 1 or len(X) != len(y) or len(y) != n:
                raise ConfigError(f"LEAF file {str(file)!r}: user {user!r} has x of shape {X.shape}, "
                                  f"{len(y)} labels and num_samples {n}; they must agree.")
            bad = np.flatnonzero((y != np.round(y)) | (y < 0) | (y >= FEMNIST_CLASSES))
            if len(bad):
                raise ConfigError(f"LEAF file {str(file)!r}: user {user!r} record {int(bad[0])} has label "
                                  f"{y[bad[0]]:g}; FEMNIST labels must be integers in 0..{FEMNIST_CLASSES - 1}.")
            y = y.astype(int)
            if user in out:  # a writer split over shards: concatenate
                X0, y0 = out[user]
                if X0.shape[1] != X.shape[1]:
                    raise ConfigError(f"LEAF file {str(file)!r}: user {user!r} has {X.shape[1]} features here "
                                      f"but {X0.shape[1]} in an earlier shard.")
                X, y = np.vstack([X0, X]), np.concatenate([y0, y])
            out[user] = (X, y)
    return out


def load_femnist(path: str | Path, *, max_users: int | None = None, writers: Sequence[int] | None = None,
                 invert: bool = True) -> FemnistData:
    """Load a LEAF FEMNIST directory (``users``, ``num_samples``, ``user_data[user] = {"x", "y"}``).

    Parameters
    ----------
    path : str or Path
        Directory with ``train/`` and ``test/`` sub-directories of json files (LEAF's layout) or with the
        shards side by side, named ``*_train_*.json`` and ``*_test_*.json``.
    max_users : int, optional
        Keep only the first ``max_users`` writers (file order).
    writers : sequence of int, optional
        Keep these writers, by index in file order (0-based; e.g. ``range(10, 20)``: a held-out set disjoint from
        the first ten), in the order given; exclusive with ``max_users``.
    invert : bool
        Return ``1 - x`` (LEAF stores background as 1.0; the authors' code inverts it).

    Returns
    -------
    FemnistData
        Writers present in the training files; a writer without test data gets an empty test set.

    Raises
    ------
    cvxdp.errors.ConfigError
        For a malformed file, a label outside ``0..61`` (naming the file, the writer and the record index), or a
        writer index outside the files' writers.
    """
    if writers is not None and max_users is not None:
        raise ConfigError(f"load_femnist: give max_users or writers, not both (got max_users={max_users!r}, "
                          f"writers={list(writers)!r}).")
    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"FEMNIST directory {str(directory)!r} does not exist (expected a LEAF json "
                                "directory with train/ and test/ or *_train_*.json and *_test_*.json shards).")
    train_files, test_files = _leaf_files(directory, "train"), _leaf_files(directory, "test")
    if not train_files:
        raise FileNotFoundError(f"No LEAF training json in {str(directory)!r} (expected train/*.json or "
                                "*_train_*.json).")
    train, test = _read_leaf(train_files), _read_leaf(test_files)
    users = list(train)[:max_users] if max_users is not None else list(train)
    if writers is not None:
        bad = [int(i) for i in writers if not 0 <= int(i) < len(train)]
        if bad:
            raise ConfigError(f"FEMNIST writer index {bad[0]} is out of range: the training files in "
                              f"{str(directory)!r} hold {len(train)} writers (indexes 0..{len(train) - 1}).")
        users = [list(train)[int(i)] for i in writers]
    width = next(iter(train.values()))[0].shape[1]

    def prep(pair: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        X, y = pair
        return (1.0 - X if invert else X), y

    empty = (np.zeros((0, width)), np.zeros(0, dtype=int))
    return FemnistData(users, [prep(train[u]) for u in users], [prep(test.get(u, empty)) for u in users])


# --------------------------------------------------------------------------- LIBSVM
def load_libsvm(path: str | Path, *, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load a LIBSVM/svmlight file as dense arrays (``sklearn.datasets.load_svmlight_file``).

    Returns
    -------
    X : ndarray, shape (n, d), float
    y : ndarray, shape (n,), the labels as written (float, integer-valued)

    Raises
    ------
    cvxdp.errors.ConfigError
        For a malformed file, a non-finite value or a non-integer label (naming the file and the line).
    """
    from sklearn.datasets import load_svmlight_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"LIBSVM file {str(path)!r} does not exist (expected a text file of "
                                "'label index:value ...' lines).")
    try:
        with _reading(path, "LIBSVM"):
            X, y = load_svmlight_file(str(path), n_features=n_features)
    except ValueError as exc:
        raise ConfigError(f"LIBSVM file {str(path)!r} is malformed: {exc}") from None
    if X.shape[0] == 0:
        raise ConfigError(f"LIBSVM file {str(path)!r} holds no samples (expected 'label index:value ...' lines).")
    X = np.asarray(X.todense())
    _check_finite(path, "LIBSVM", X, y)
    bad = np.flatnonzero(y != np.round(y))
    if len(bad):
        raise ConfigError(f"LIBSVM file {str(path)!r}: line {_text_line(path, int(bad[0]))} has label "
                          f"{y[bad[0]]:g}; classification labels must be integers (class indices, or -1/+1).")
    return X, np.asarray(y)


def check_labels(path: str | Path, kind: str, y: np.ndarray, classes: np.ndarray) -> None:
    """Refuse labels of ``y`` (read from the file ``path``) outside the public class set ``classes``.

    Parameters
    ----------
    path : str or Path
        The file the labels were read from.
    kind : str
        Its format, named in the message; "LIBSVM" (a text format) also names the line.
    y : ndarray, shape (n,)
    classes : ndarray
        The allowed label values.

    Raises
    ------
    cvxdp.errors.ConfigError
        Naming the file, the line (text files) or record index and the label.
    """
    bad = np.flatnonzero(~np.isin(y, classes))
    if len(bad):
        line = _text_line(Path(path), int(bad[0])) if kind == "LIBSVM" else None
        where = f"line {line}" if line is not None else f"record {int(bad[0])}"
        raise ConfigError(f"{kind} file {str(path)!r}: {where} has label {y[bad[0]]:g}, which is not one of the "
                          f"{len(classes)} classes of the training data ({', '.join(f'{c:g}' for c in classes)}).")


# --------------------------------------------------------------------------- UCI Adult
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
                 "native-country", "income"]
ADULT_CONTINUOUS = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
# Category lists of adult.names (UCI); fixing them makes every file map to the same 105 columns.
ADULT_CATEGORIES: dict[str, list[str]] = {
    "workclass": ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"],
    "education": ["Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc",
                  "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"],
    "marital-status": ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"],
    "occupation": ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
                   "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
                   "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces"],
    "relationship": ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"],
    "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    "sex": ["Female", "Male"],
    "native-country": ["United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti",
                       "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia",
                       "El-Salvador", "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"],
}
ADULT_DIM = len(ADULT_CONTINUOUS) + sum(len(v) for v in ADULT_CATEGORIES.values())  # 105
#: Public column scales of Adult: the maxima of UCI's adult.data for the continuous columns (age and
#: capital-gain are top-coded at 90 and 99999, hours-per-week at 99, education-num runs 1..16), 1 for the
#: indicators. Fixed, so the scaling of one sample does not depend on the others (adult.test is scaled alike).
ADULT_SCALE = np.array([90.0, 1484705.0, 16.0, 99999.0, 4356.0, 99.0] + [1.0] * (ADULT_DIM - 6))


def load_adult(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Load UCI Adult (``adult.data`` / ``adult.test``) with the papers' preprocessing.

    Steps: drop rows with a missing value ``?``; one-hot encode the 8 categorical columns over the fixed
    UCI category lists; scale every column by its public maximum (:data:`ADULT_SCALE`, capped at 1); normalise
    every row to unit norm.
    The result has 105 columns (6 continuous + 99 indicators). Labels: ``>50K`` -> +1, ``<=50K`` -> -1
    (``adult.test``'s trailing dots and its ``|1x3 Cross validator`` first line are handled).

    Returns
    -------
    X : ndarray, shape (n, 105), rows of unit norm
    y : ndarray, shape (n,), values in {-1, +1}
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"UCI Adult file {str(path)!r} does not exist (expected adult.data or adult.test, "
                                "15 comma-separated columns without a header).")
    try:
        with _reading(path, "UCI Adult"):
            df = pd.read_csv(path, header=None, names=ADULT_COLUMNS, skipinitialspace=True, comment="|",
                             dtype=str, na_values=["?"], keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ConfigError(f"UCI Adult file {str(path)!r} is empty (expected 15 comma-separated columns).") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise ConfigError(f"UCI Adult file {str(path)!r} is malformed ({str(exc).strip()}); every line must have "
                          "15 comma-separated columns.") from None
    df = df.dropna(how="all")
    if len(df) == 0:
        raise ConfigError(f"UCI Adult file {str(path)!r} is empty (expected lines of 15 comma-separated columns).")
    if df.shape[1] != 15 or df["income"].isna().all():
        raise ConfigError(f"UCI Adult file {str(path)!r} must have 15 comma-separated columns.")
    df = df.dropna()
    if len(df) == 0:
        raise ConfigError(f"UCI Adult file {str(path)!r} has no complete rows.")
    df = df.apply(lambda col: col.str.strip())
    income = df["income"].str.rstrip(".")
    bad = ~income.isin([">50K", "<=50K"])
    if bad.any():
        raise ConfigError(f"UCI Adult file {str(path)!r}: the income column must be '>50K' or '<=50K'. "
                          f"Got {income[bad].iloc[0]!r} instead.")
    y = np.where(income == ">50K", 1, -1)
    try:
        parts = [df[ADULT_CONTINUOUS].astype(float).to_numpy()]
    except ValueError as exc:
        raise ConfigError(f"UCI Adult file {str(path)!r}: a continuous column is not numeric ({exc}).") from None
    bad = ~np.isfinite(parts[0]).all(axis=1)
    if bad.any():
        raise ConfigError(f"UCI Adult file {str(path)!r}: the record at data row {int(df.index[np.argmax(bad)]) + 1} "
                          "holds a NaN or infinite continuous value; every value must be a finite number.")
    for col, cats in ADULT_CATEGORIES.items():
        unknown = ~df[col].isin(cats)
        if unknown.any():
            raise ConfigError(f"UCI Adult file {str(path)!r}: column {col!r} holds {df[col][unknown].iloc[0]!r}, "
                              f"which is not one of its {len(cats)} UCI categories.")
        parts.append((df[col].to_numpy()[:, None] == np.asarray(cats)[None, :]).astype(float))
    X = normalize_rows(public_scale(np.hstack(parts), ADULT_SCALE))
    return X, y


# --------------------------------------------------------------------------- scikit-learn bundled
def load_sklearn(name: str) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled data sets (no download).

    Parameters
    ----------
    name : {"digits", "breast_cancer"}
        ``digits``: 1,797 8x8 images, pixels scaled to [0, 1], labels 0..9.
        ``breast_cancer``: 569 x 30, columns scaled by public maxima (:data:`BREAST_CANCER_SCALE`), rows
        normalised to unit norm, labels in {-1, +1}.
    """
    from sklearn import datasets

    if name == "digits":
        d = datasets.load_digits()
        return d.data / 16.0, d.target.astype(int)
    if name == "breast_cancer":
        d = datasets.load_breast_cancer()
        return normalize_rows(public_scale(d.data, BREAST_CANCER_SCALE)), np.where(d.target == 1, 1, -1)
    raise ConfigError(f"The 'name' parameter of load_sklearn must be one of 'digits', 'breast_cancer'. "
                      f"Got {name!r} instead.")


# --------------------------------------------------------------------------- splits
def _check_split(n: int, agents: int) -> None:
    if isinstance(agents, bool) or not isinstance(agents, (int, np.integer)) or agents < 1:
        raise ConfigError(f"The 'agents' parameter must be an int in [1, inf). Got {agents!r} instead.")
    if agents > n:
        raise ConfigError(f"Cannot split {n} samples over {agents} agents; every agent needs at least one sample.")


def split_iid(X: np.ndarray, y: np.ndarray, agents: int, rng: np.random.Generator) -> Split:
    """Shuffle and cut into ``agents`` parts of (almost) equal size."""
    _check_split(len(y), agents)
    perm = rng.permutation(len(y))
    return [(X[idx], y[idx]) for idx in np.array_split(perm, agents)]


def split_label_skew(X: np.ndarray, y: np.ndarray, agents: int, rng: np.random.Generator, *,
                     classes_per_agent: int = 2) -> Split:
    """Pathological non-IID split (McMahan et al. 2017): sort by label, cut into
    ``agents * classes_per_agent`` shards, give each agent ``classes_per_agent`` random shards.

    Every sample goes to exactly one agent; each agent sees about ``classes_per_agent`` labels.
    """
    _check_split(len(y), agents)
    if classes_per_agent < 1 or agents * classes_per_agent > len(y):
        raise ConfigError(f"The 'classes_per_agent' parameter must be an int in [1, {len(y) // agents}]. "
                          f"Got {classes_per_agent!r} instead.")
    order = np.argsort(y + rng.uniform(0, 0.5, len(y)), kind="stable")  # by label, shuffled within a label
    shards = np.array_split(order, agents * classes_per_agent)
    assign = rng.permutation(len(shards)).reshape(agents, classes_per_agent)
    out = []
    for row in assign:
        idx = np.concatenate([shards[s] for s in row])
        out.append((X[idx], y[idx]))
    return out


def group_sizes(items: int, groups: int) -> list[int]:
    """Sizes of ``groups`` contiguous groups of ``items`` that differ by at most one, the larger first (the silos of
    ``[model] silos = S``)."""
    if not 1 <= groups <= items:
        raise ConfigError(f"The 'silos' entry of [model] must be an int in [1, {items}]: there are {items} writers to "
                          f"group. Got {groups} instead.")
    return [items // groups + (1 if k < items % groups else 0) for k in range(groups)]


def group_parts(parts: Split, sizes: Sequence[int]) -> Split:
    """Consecutive ``parts`` joined into groups of the given ``sizes`` (rows and labels stacked in order)."""
    out, start = [], 0
    for size in sizes:
        chunk = parts[start:start + size]
        out.append((np.vstack([X for X, _ in chunk]), np.concatenate([y for _, y in chunk])))
        start += size
    return out


def split_dirichlet(X: np.ndarray, y: np.ndarray, agents: int, alpha: float, rng: np.random.Generator, *,
                    min_size: int = 1, max_tries: int = 100) -> Split:
    """Label-distribution skew (Hsu et al. 2019): for every class, the share of each agent ~ Dir(alpha).

    Smaller ``alpha`` -> more skew. Draws again (up to ``max_tries`` times) until every agent holds at least
    ``min_size`` samples.
    """
    _check_split(len(y), agents)
    if not (np.isfinite(alpha) and alpha > 0):
        raise ConfigError(f"The 'dirichlet_alpha' parameter must be a float in (0, inf). Got {alpha!r} instead.")
    classes = np.unique(y)
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(agents)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            share = rng.dirichlet(np.full(agents, alpha))
            cuts = (np.cumsum(share)[:-1] * len(idx)).astype(int)
            for p, chunk in enumerate(np.split(idx, cuts)):
                parts[p].append(chunk)
        idxs = [np.concatenate(p) for p in parts]
        if min(len(i) for i in idxs) >= min_size:
            return [(X[i], y[i]) for i in (rng.permutation(i) for i in idxs)]
    raise ConfigError(f"split_dirichlet could not give every one of {agents} agents {min_size} samples in "
                      f"{max_tries} draws with alpha={alpha}; raise alpha or lower the number of agents.")


def train_test(X: np.ndarray, y: np.ndarray, test_fraction: float, seed: int, *,
               stratify: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Held-out split with scikit-learn's ``train_test_split`` (stratified by label when possible).

    Returns ``X_train, X_test, y_train, y_test``; ``test_fraction = 0`` returns an empty test set.
    """
    if test_fraction == 0:
        return X, X[:0], y, y[:0]
    strat = y if stratify and np.min(np.unique(y, return_counts=True)[1]) >= 2 else None
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=test_fraction, random_state=seed, stratify=strat)
    return X_tr, X_te, y_tr, y_te
