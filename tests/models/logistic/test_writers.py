"""FEMNIST writers picked by index (issue 39): a held-out set of writers, its errors, total_samples still checked."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from cvxdp.errors import ConfigError
from cvxdp_models.logistic import data as D
from cvxdp_models.logistic.template import build

from .test_data import write_leaf

HERE = Path(".")


@pytest.fixture
def leaf(tmp_path: Path) -> Path:
    write_leaf(tmp_path / "fem", "train", {"w0": 3, "w1": 4, "w2": 5, "w3": 6})
    write_leaf(tmp_path / "fem", "test", {"w0": 1, "w1": 1, "w2": 1, "w3": 1}, seed=1)
    return tmp_path


def test_writers_by_index_in_the_order_given(leaf):
    fem = D.load_femnist(leaf / "fem", writers=[3, 1])
    assert fem.users == ["w3", "w1"] and [len(y) for _, y in fem.train] == [6, 4]
    inst = build({"dataset": "femnist", "path": "fem", "writers": [2, 3], "baselines": False,
                  "total_samples": 11}, base_dir=leaf)
    assert [a.name for a in inst.agents] == ["w2", "w3"]
    assert inst.info["n_train"] == 11 and inst.info["private_possible"] and inst.info["writers"] == [2, 3]


def test_total_samples_is_checked_against_the_chosen_writers(leaf):
    with pytest.warns(UserWarning, match="declares 7 training samples but the loaded data hold 11"):
        inst = build({"dataset": "femnist", "path": "fem", "writers": [2, 3], "baselines": False,
                      "total_samples": 7}, base_dir=leaf)
    assert not inst.info["private_possible"]


@pytest.mark.parametrize("writers, match", [
    ([1, 4], "writer index 4 is out of range: the training files .* hold 4 writers \\(indexes 0..3\\)"),
    ([0, 0], "distinct writer indexes \\(index 0 appears twice\\)"),
    ([], "a non-empty list of writer indexes"),
    ([-1], "a non-empty list of writer indexes"),
    ("0-3", "a non-empty list of writer indexes"),
    ([True], "a non-empty list of writer indexes"),
])
def test_bad_writers_are_refused(leaf, writers, match):
    with pytest.raises(ConfigError, match=match):
        build({"dataset": "femnist", "path": "fem", "writers": writers, "baselines": False}, base_dir=leaf)


def test_writers_exclude_agents_and_other_datasets(leaf):
    with pytest.raises(ConfigError, match="'agents' entry .* absent when 'writers' picks the writers"):
        build({"dataset": "femnist", "path": "fem", "writers": [0], "agents": 1, "baselines": False},
              base_dir=leaf)
    with pytest.raises(ConfigError, match="'writers' entry .*FEMNIST only"):
        build({"dataset": "digits", "writers": [0], "baselines": False}, base_dir=leaf)
    with pytest.raises(ConfigError, match="max_users or writers, not both"):
        D.load_femnist(leaf / "fem", max_users=1, writers=[0])


def test_two_disjoint_writer_sets_of_the_shared_sample(shared_data):
    """The shared writers (first ten) and the held-out ten (indexes 10..19) of the LEAF sample are disjoint."""
    path = shared_data / "femnist_leaf"
    if not path.is_dir():
        pytest.skip("no FEMNIST LEAF sample in ../shared/data/femnist_leaf: put it there to run this test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # total_samples matches each set: no warning
        shared = build({"dataset": "femnist", "path": str(path), "agents": 10, "total_samples": 1527,
                        "baselines": False, "bound": 0.2}, base_dir=HERE)
        held = build({"dataset": "femnist", "path": str(path), "writers": list(range(10, 20)),
                      "total_samples": 1263, "baselines": False, "bound": 0.2}, base_dir=HERE)
    a, b = {x.name for x in shared.agents}, {x.name for x in held.agents}
    assert len(a) == len(b) == 10 and not a & b
    assert shared.info["private_possible"] and held.info["private_possible"]
