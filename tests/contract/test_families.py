"""The contract every algorithm family keeps on every backend (the one round loop, SPEC §7).

The cases are generated from the registries: every algorithm of :data:`cvxdp.families.ALGORITHMS` with every
mechanism its class accepts (``cls.accepts``, "none" included), built from case-file tables the way ``cvxdp run``
builds them, plus the sharing family's Gaussian preset. Backends: serial for every contract; Ray (when available)
and the federation (each party's node built from its own folder, through the wire's bytes) must give the serial
numbers for every case, and Ray keeps the resume, budget and evaluation contracts for one case per family. Tiny
problems (2-3 agents, 4 rounds).
"""

from __future__ import annotations

import warnings
from dataclasses import fields
from typing import Any

import pandas as pd
import pytest

import cvxdp
from cvxdp.audits.release import _recording_backend
from cvxdp.errors import CvxdpError
from cvxdp.families import ALGORITHMS, MECHANISMS
from cvxdp.model import EVALUATION_LABEL, Release
from cvxdp.run import load_result

from .cases import CASE_BACKENDS, CASES, DATA, REFUSED, ROUNDS
from .cases import numbers as _numbers
from .cases import run_case as _run
from .cases import same as _same

_WARM: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _one_ray_for_the_module():
    """One local Ray and one backend whose actors are kept between runs (worker processes start once)."""
    yield
    backend = _WARM.pop("ray", None)
    if backend is not None:
        import ray

        backend.shutdown()
        ray.shutdown()


def _backend(name: str) -> Any:
    if name == "ray":
        pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
        if "ray" not in _WARM:
            try:
                # min_variables=0: on actors however small the case (the contract is about Ray's transport)
                _WARM["ray"] = cvxdp.run.get_backend("ray", keep_actors=True, min_variables=0)
            except CvxdpError as exc:
                if "not available" in str(exc):
                    pytest.skip(f"the Ray backend is not available here: {exc}")
                raise
        return _WARM["ray"]
    return cvxdp.run.get_backend(name)


def test_every_registered_algorithm_and_mechanism_has_a_case():
    names = {(c.algorithm, c.mechanism) for c in CASES.values()}
    assert {(n, m) for n, cls in ALGORITHMS.items() for m in cls.mechanisms} <= names
    assert len(CASES) >= 17  # 5 LinearizedADMM, ADMM, 4 x 2 graph, 2 sharing and the sharing preset
    assert {(c.algorithm, c.mechanism) for c in REFUSED} == {
        (n, m) for n, cls in ALGORITHMS.items() for m in MECHANISMS if m not in cls.mechanisms}
    assert ALGORITHMS["sharing"].accepts(CASES["sharing-preset"].preset())


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: f"{c.algorithm}-{c.mechanism}")
def test_a_mechanism_an_algorithm_does_not_accept_is_refused_before_it_runs_naming_both(case):
    agents, algorithm, privacy = case.build()
    with pytest.raises(CvxdpError) as err:
        cvxdp.solve(agents, algorithm=algorithm, privacy=privacy, seed=0)
    message = str(err.value)
    assert type(privacy).__name__ in message or privacy.short_name in message  # the mechanism given
    assert type(algorithm).__name__ in message or "'privacy' parameter of solve" in message  # who refuses
    assert "cvxdp." in message  # and what it accepts instead


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_seed_same_numbers(case):
    first = _run(case, "serial", evaluate=True)
    _same(first, _run(case, "serial", evaluate=True))
    assert len(first.history) == ROUNDS


@pytest.mark.ray
@pytest.mark.parametrize("case", sorted(CASES))
def test_ray_gives_the_serial_numbers(case):
    _same(_run(case, _backend("ray"), evaluate=True), _run(case, "serial", evaluate=True))


@pytest.mark.parametrize("case", sorted(c for c in CASES if not CASES[c].preset))
def test_the_federation_gives_the_serial_released_numbers(case, tmp_path):
    """Each party builds its node from its own folder and answers through the wire's bytes
    (tests/federation/test_flower.py carries the same bytes over real Flower processes)."""
    from cvxdp.federation.coordinator import LocalChannel, run_federation
    from cvxdp.federation.parties import party_folders

    agents, labels = DATA[CASES[case].family]()
    if labels is not None:
        agents[0].labels = labels  # the label holder hosts the centre
    algorithm, privacy = CASES[case].tables()
    files = party_folders(agents, tmp_path, seed=11, privacy=privacy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = run_federation({"name": case, "algorithm": algorithm, "privacy": privacy, "run": {"seed": 11},
                              "agents": [a.name for a in agents]}, LocalChannel(files))
        reference = _run(case, "serial", evaluate=False)
    _same(fed, reference)
    assert fed.privacy["worst"] == reference.privacy["worst"]


@pytest.mark.parametrize(("case", "backend_name"), CASE_BACKENDS)
def test_resume_after_an_interruption_equals_the_uninterrupted_run(case, backend_name, tmp_path):
    class Stop(Exception):
        pass

    def interrupt(t, row):
        if t == 2:
            raise Stop

    with pytest.raises(Stop):
        _run(case, _backend(backend_name), checkpoint=tmp_path, callback=interrupt, evaluate=True)
    resumed = _run(case, _backend(backend_name), checkpoint=tmp_path, evaluate=True)
    uninterrupted = _run(case, _backend(backend_name), evaluate=True)
    _same(resumed, uninterrupted)
    assert resumed.ledger.to_dict() == uninterrupted.ledger.to_dict()


@pytest.mark.parametrize(("case", "backend_name"), [p for p in CASE_BACKENDS if CASES[p.values[0]].private])
def test_budget_stops_before_the_round_that_would_exceed_it(case, backend_name):
    full = _run(case, "serial")
    worst = full.privacy["worst"]["basic"]
    eps_total = worst[0] if isinstance(worst, (list, tuple)) else worst
    stopped = _run(case, _backend(backend_name), budget=(0.6 * eps_total, 0.5), accountant="basic")
    assert stopped.stop_reason == "budget"
    k = len(stopped.history)
    assert 0 < k < ROUNDS
    spent = stopped.privacy["worst"]["basic"]
    assert (spent[0] if isinstance(spent, (list, tuple)) else spent) <= 0.6 * eps_total * (1 + 1e-9)
    # the rounds before the stop are those of the unbudgeted run (the guard only reads the plan)
    cols = [c for c in _numbers(stopped).columns if not c.startswith("eps_")]
    pd.testing.assert_frame_equal(_numbers(stopped)[cols], _numbers(full)[cols].iloc[:k], check_exact=True)


@pytest.mark.parametrize("case", sorted(c for c in CASES if not CASES[c].private))
def test_a_budget_never_stops_a_non_private_run(case):
    """A non-private run spends nothing, so however small the budget, every round runs (the private cases'
    stopping is the test above)."""
    stopped = _run(case, "serial", budget=(1e-9, 1e-12), accountant="basic")
    assert stopped.stop_reason != "budget" and len(stopped.history) == ROUNDS
    assert stopped.privacy["worst"]["basic"][0] == 0.0


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_recorded_releases_are_exactly_the_accounted_ones(case):
    """Everything a node's step returns is a Release holding one array of the declared size (non-private exact
    ADMM: and its polish bit); for private runs the number of releases per agent matches the ledger's records."""
    backend = _recording_backend()
    result = _run(case, backend, evaluate=True)
    assert len(backend.releases) == ROUNDS
    assert [f.name for f in fields(Release)] == ["agent", "round", "arrays"]
    names = result.config["agents"]
    for t, round_releases in enumerate(backend.releases, start=1):
        assert [r.agent for r in round_releases] == names
        for agent, rel in zip(result.agents, round_releases):
            assert isinstance(rel, Release) and rel.round == t
            bits = CASES[case].bits if not CASES[case].private else ()
            sent = [b for b in bits if b in rel.arrays]  # exact ADMM: only in the rounds that polish
            assert t > 1 or not sent  # round 1 never polishes (ADMM.polish_pays)
            assert list(rel.arrays) == [CASES[case].release_key, *sent]  # nothing but the one accounted array
            assert all(rel[b].shape == (1,) and rel[b][0] in (0.0, 1.0) for b in sent)
            expected = agent.n_samples if CASES[case].family == "sharing" else agent.layout.shared_indices.size
            assert rel.size == expected + len(sent)
    ledger = result.ledger
    if not CASES[case].private:
        assert result.privacy["worst"]["basic"][0] == 0.0
        return
    for name in names:
        if CASES[case].family == "graph":  # one event per iteration (recycled ones as no-op events)
            assert ledger.steps(name) + ledger.free_steps(name) == ROUNDS
        else:
            J = result.config["algorithm"].get("local_updates", 1)  # one release carries J mechanism calls
            assert ledger.steps(name) == ROUNDS * J


@pytest.mark.parametrize(("case", "backend_name"), CASE_BACKENDS)
def test_evaluation_values_are_labelled_and_absent_when_off(case, backend_name):
    rows_on: list[dict] = []
    on = _run(case, "serial", evaluate=True, callback=lambda t, row: rows_on.append(row))
    evaluated = on.config["evaluation"]
    # the callback's rows carry the label and name their evaluation keys (values flat, as in the history)
    for row in rows_on:
        assert row["evaluation"] == {"label": EVALUATION_LABEL, "columns": sorted(evaluated["columns"])}
        assert set(evaluated["columns"]) <= set(row)
    assert evaluated["evaluated"] and evaluated["label"] == EVALUATION_LABEL
    assert "objective" in evaluated["columns"] and "noise_magnitude" in evaluated["columns"]
    assert list(on.evaluation.columns) == ["round"] + [c for c in evaluated["columns"] if c in on.history]
    rows_off: list[dict] = []
    off = _run(case, _backend(backend_name), evaluate=False, callback=lambda t, row: rows_off.append(row))
    assert len(rows_off) == ROUNDS
    for row in rows_off:
        assert row["evaluation"] == {"label": EVALUATION_LABEL, "columns": []}
        assert not set(evaluated["columns"]) & set(row)
    assert not off.config["evaluation"]["evaluated"] and off.config["evaluation"]["columns"] == []
    assert not set(evaluated["columns"]) & set(off.history.columns)
    assert not set(evaluated["agent_columns"]) & set(off.agent_history.columns)
    assert list(off.evaluation.columns) == ["round"]
    # evaluating reads private data but steers nothing: the released numbers are the same
    released = [c for c in _numbers(off).columns]
    pd.testing.assert_frame_equal(_numbers(on)[released], _numbers(off), check_exact=True)


def test_evaluate_defaults_to_on_for_serial_and_rejects_non_bools():
    assert _run("ladmm-none").config["evaluation"]["evaluated"] is True
    with pytest.raises(cvxdp.errors.InvalidParameterError, match="'evaluate' parameter of solve"):
        _run("ladmm-none", evaluate="yes")


@pytest.mark.parametrize("case", sorted(CASES))
def test_saved_result_reloads_with_its_ledger(case, tmp_path):
    result = _run(case, evaluate=True)
    loaded = load_result(result.save(tmp_path / "r"))
    assert type(loaded.ledger) is type(result.ledger)
    assert loaded.ledger.to_dict() == result.ledger.to_dict()
    assert loaded.config["evaluation"]["label"] == EVALUATION_LABEL
    assert loaded.config["evaluation"]["columns"] == result.config["evaluation"]["columns"]
    pd.testing.assert_frame_equal(_numbers(loaded), _numbers(result), check_dtype=False)


def test_a_node_that_sends_anything_but_a_release_is_refused():
    from cvxdp.run import SerialBackend

    class Leaky(SerialBackend):
        def call(self, method, args=None, *, round=None):
            results = super().call(method, args, round=round)
            if method.__name__ == "step":  # a node that also sends its objective value
                return [{"ez": rel["ez"], "objective": 1.0} for rel in results]
            return results

    with pytest.raises(CvxdpError, match=r"Agent 'agent0' returned a dict from its step in round 1"):
        _run("ladmm-none", Leaky())


def test_the_public_view_drops_every_evaluation_column():
    result = _run("ladmm-ObjG", evaluate=True)
    public = result.release()
    assert not set(result.config["evaluation"]["columns"]) & set(public.history.columns)
    assert public.config["evaluation"]["evaluated"] is False
