"""Cross-silo agents (issue 50): ``[model] silos`` groups FEMNIST writers into silos (one agent each holding many
records), or sets the number of parts of the other data sets; the relation stays one record."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from cvxdp.errors import ConfigError
from cvxdp_models.logistic.data import group_parts, group_sizes
from cvxdp_models.logistic.template import build, settings

CASES = Path(__file__).resolve().parents[3] / "cases"


def _leaf(directory: Path, counts: list[int], seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    users = {f"w{i}": (rng.uniform(0, 1, (n, 784)), rng.integers(0, 62, n).tolist()) for i, n in enumerate(counts)}
    for part, rows in (("train", None), ("test", 1)):  # one test image per writer
        blob = {"users": list(users), "num_samples": [len(y[:rows]) for _, y in users.values()],
                "user_data": {u: {"x": X[:rows].tolist(), "y": y[:rows]} for u, (X, y) in users.items()}}
        (directory / part).mkdir(parents=True, exist_ok=True)
        (directory / part / f"shard_{part}.json").write_text(json.dumps(blob))
    return directory


def test_group_sizes_are_contiguous_and_differ_by_at_most_one():
    assert group_sizes(57, 5) == [12, 12, 11, 11, 11] and group_sizes(57, 10) == [6] * 7 + [5] * 3
    assert group_sizes(3, 3) == [1, 1, 1]
    with pytest.raises(ConfigError, match=r"'silos' entry of \[model\] must be an int in \[1, 3\]"):
        group_sizes(3, 4)
    parts = [(np.full((n, 2), float(i)), np.full(n, i)) for i, n in enumerate([2, 3, 1])]
    grouped = group_parts(parts, [2, 1])
    assert [len(y) for _, y in grouped] == [5, 1] and grouped[0][1].tolist() == [0, 0, 1, 1, 1]


def test_femnist_writers_are_dealt_into_silos_and_the_relation_is_one_record(tmp_path):
    fem = _leaf(tmp_path, [4, 5, 6, 3, 2])
    inst = build({"dataset": "femnist", "path": str(fem), "silos": 2, "total_samples": 20, "baselines": False},
                 base_dir=tmp_path)
    assert [a.name for a in inst.agents] == ["silo0", "silo1"]
    assert inst.info["samples_per_agent"] == [15, 5]  # writers 0-2 and 3-4 (3 and 2 writers)
    assert inst.info["relation"] == "add_remove" and "add/remove" in inst.agents[0].sensitivity.relation
    assert inst.agents[0].sensitivity.l2 == pytest.approx(np.sqrt(2) / 20, rel=1e-12)
    listed = build({"dataset": "femnist", "path": str(fem), "silos": [[4, 0], [2]], "total_samples": 12,
                    "baselines": False}, base_dir=tmp_path)
    assert listed.info["samples_per_agent"] == [6, 6] and listed.info["n_test"] == 3
    held = build({"dataset": "femnist", "path": str(fem), "writers": [1, 2, 3], "silos": 3, "total_samples": 14,
                  "baselines": False}, base_dir=tmp_path)
    assert held.info["samples_per_agent"] == [5, 6, 3]


def test_other_data_sets_take_silos_as_their_number_of_parts():
    inst = build({"dataset": "digits", "silos": 4, "max_samples": 200, "baselines": False}, base_dir=Path("."))
    assert len(inst.agents) == 4 and [a.name for a in inst.agents] == [f"agent{p}" for p in range(4)]
    assert settings({"dataset": "digits", "silos": 4})["agents"] == 4


@pytest.mark.parametrize(("model", "match"), [
    ({"silos": 0}, "'silos' entry"), ({"silos": True}, "'silos' entry"), ({"silos": [[0, 1], []]}, "'silos' entry"),
    ({"silos": [[0, 1], [1]]}, "writer 1 appears twice"), ({"silos": [[0], [1]], "agents": 2}, "'agents' entry"),
    ({"silos": [[0], [1]], "writers": [0, 1]}, "'writers' entry"),
    ({"dataset": "digits", "silos": [[0], [1]]}, "writer lists are FEMNIST's"),
    ({"dataset": "digits", "silos": 3, "agents": 4}, "equal to silos"),
])
def test_bad_silos_are_refused_by_name(model, match):
    with pytest.raises(ConfigError, match=match):
        settings({"dataset": "femnist", "path": "x", **model})


def test_the_shipped_silo_cases_declare_the_private_defaults():
    """The cases' defaults for private runs: each silo's whole budget (calibrate = total), Poisson-subsampled
    clipped gradients at the central anchor's rate, its 200 steps as rounds, the engine's step sizes."""
    from cvxdp.config.build import load_case

    for name, silos, total in (("femnist_silos.toml", 5, 7655), ("digits_silos.toml", 5, 1347)):
        case = load_case(CASES / name)
        assert case.model["silos"] == silos and case.model["total_samples"] == total
        assert case.privacy == {"mechanism": "none", "epsilon": 1.0, "delta": 1e-5, "calibrate": "total",
                                "sampling_rate": 0.05, "clip_norm": 1.0}
        assert case.algorithm == {"name": "ladmm", "local_updates": 1, "rounds": 200}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inst = build(load_case(CASES / "digits_silos.toml").model, base_dir=CASES)
    assert inst.info["samples_per_agent"] == [212, 269, 307, 272, 287] and inst.info["n_train"] == 1347
