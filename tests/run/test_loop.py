"""The round loop (cvxdp.run.loop): what it does to the process around a run."""

from __future__ import annotations

import gc

import cvxdp


def _frozen_counts(agents) -> tuple[list[int], object]:
    seen: list[int] = []
    result = cvxdp.solve(agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=3), progress=False, evaluate=False,
                         callback=lambda t, row: seen.append(gc.get_freeze_count()))
    return seen, result


def test_the_rounds_run_with_the_set_up_objects_frozen_and_the_run_thaws_them(toy_agents):
    assert gc.get_freeze_count() == 0
    seen, result = _frozen_counts(toy_agents)
    assert len(seen) == 3 and min(seen) > 0  # the agents' CVXPY trees are not scanned by full collections
    assert gc.get_freeze_count() == 0  # and return to the collector afterwards
    assert result.stop_reason == "rounds"


def test_a_callers_own_freeze_is_left_as_it_is(toy_agents):
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        seen, _ = _frozen_counts(toy_agents)
        # nothing more frozen during the rounds (the nodes built after the caller's freeze stay scanned), nor
        # unfrozen after (frozen objects freed by reference counting leave the count: it can only fall)
        assert len(seen) == 3 and max(seen) <= before
        assert 0 < gc.get_freeze_count() <= before
    finally:
        gc.unfreeze()


def test_the_objects_are_thawed_when_a_run_fails(toy_agents):
    def stop(t, row):
        raise RuntimeError("the caller's callback failed")

    try:
        cvxdp.solve(toy_agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=3), progress=False, evaluate=False, callback=stop)
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0


def test_an_inner_block_freezes_the_newer_objects_and_leaves_the_thaw_to_the_outer_one():
    from cvxdp.run import long_lived_frozen

    with long_lived_frozen():
        outer = gc.get_freeze_count()
        new = [[i] for i in range(1000)]  # tracked containers created after the outer freeze
        with long_lived_frozen():
            assert gc.get_freeze_count() >= outer + len(new)
        assert gc.get_freeze_count() >= outer + len(new)  # still frozen: the inner block does not thaw
    assert gc.get_freeze_count() == 0
    del new


def test_a_block_inside_a_callers_freeze_does_nothing():
    from cvxdp.run import long_lived_frozen

    gc.freeze()
    try:
        before = gc.get_freeze_count()
        new = [[i] for i in range(1000)]
        with long_lived_frozen():
            assert gc.get_freeze_count() <= before  # the new objects are not frozen
        assert 0 < gc.get_freeze_count() <= before
        del new
    finally:
        gc.unfreeze()


def test_a_run_counts_the_frozen_objects_once(toy_agents, monkeypatch):
    """``gc.get_freeze_count`` walks every frozen object: a run asks it once, at its outermost block (the loop's block
    inside ``solve`` does not), so many small runs in a process with millions of objects stay cheap."""
    counted: list[int] = []
    real = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: counted.append(1) or real())
    cvxdp.solve(toy_agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=2), progress=False, evaluate=False)
    assert len(counted) == 1


def test_a_run_computes_on_one_blas_thread_and_gives_the_callers_threads_back(toy_agents):
    """The rounds (the serial nodes and the aggregation) run with every loaded BLAS library on one thread (as each
    Ray actor does); the caller's own setting comes back after the run."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    cvxdp.solve(toy_agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=1), progress=False)  # every library loaded
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()  # 2, or 1 for a library built single-threaded (SCS's)
        assert 2 in before
        seen: list[list[int]] = []
        cvxdp.solve(toy_agents, algorithm=cvxdp.ADMM(rho=1.0, rounds=2), progress=False,
                    callback=lambda t, row: seen.append(blas_threads()))
        assert seen and all(threads and set(threads) == {1} for threads in seen)
        assert blas_threads() == before
