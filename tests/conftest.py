"""Shared fixtures (small generated consensus problems) and the quick test tier."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
TESTS = Path(__file__).resolve().parent

#: The quick tier for local work: ``python -m pytest -m quick`` (the full suite stays the default and runs in CI).
#: Fast unit tests only, chosen here so the test files themselves need no edit. An entry is a file (relative to
#: ``tests/``: every test in it) or ``file::test_name`` (one test function, all its parametrized cases). Tests
#: marked ``slow`` are never quick. ``tests/test_tiers.py`` checks that every entry still names a test.
QUICK: tuple[str, ...] = (
    # privacy accounting and calibration
    "privacy/test_accounting.py",
    "privacy/test_calibration.py",
    "privacy/test_mechanisms.py",
    # schedules, parameter validation, agent declaration checks
    "families/consensus/test_schedules.py",
    "templates/test_metrics.py",
    "studies/test_study.py",
    "model/test_agent.py",
    "families/test_solve.py",
    "test_catalogue_api.py",
    "model/test_feasibility.py",
    "templates/test_registry.py",
    "models/logistic/test_lipschitz.py",
    # tables, graphs, the documented schema, the docs and this list
    "studies/test_tables.py",
    "families/graph/test_topology.py",
    "config/test_schema.py",
    "test_docs.py",
    "test_tiers.py",
    # a few tiny solves
    "families/consensus/test_tol_mismatch.py",
    "families/consensus/test_convergence.py::test_admm_reaches_optimum_in_fewer_rounds",
    "families/consensus/test_convergence.py::test_more_local_updates_do_not_break_convergence",
)


#: pytest-xdist workers of a plain ``python -m pytest`` when xdist is installed (the ``.[test]`` extra)
WORKERS = 2


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Two xdist workers (``-n 2 --dist loadfile --no-loadscope-reorder``) when pytest-xdist is installed and the
    command line chose no distribution itself; without xdist (``pip install -e ".[power]" pytest``, or ``-p
    no:xdist``) the tests run in this process. ``addopts`` cannot say "if installed": an ``-n`` there fails on a
    pytest without xdist. This hook runs before xdist's own (conftest plugins register later), and not in xdist's
    workers."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    option = config.option
    if option.numprocesses is None and option.dist == "no" and not option.tx and not (option.collectonly or option.usepdb):
        option.numprocesses, option.dist, option.loadscopereorder = WORKERS, "loadfile", False


def is_quick(path: Path, name: str) -> bool:
    """Whether the test function ``name`` (without parameters) of the file ``path`` is in :data:`QUICK`."""
    try:
        rel = Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return False
    return rel in QUICK or f"{rel}::{name}" in QUICK


def pytest_collection_modifyitems(config, items):
    """Mark the tests listed in :data:`QUICK` with ``quick`` (never a test marked ``slow``), and run the tests of real
    Flower processes first: they mostly wait on Flower's polling, so with pytest-xdist (``--dist loadfile``) their
    worker starts them at once while the other worker runs the rest of the suite."""
    for item in items:
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        if item.get_closest_marker("slow") is None and is_quick(item.path, name):
            item.add_marker(pytest.mark.quick)
    items.sort(key=lambda item: item.get_closest_marker("federation") is None)  # stable: the rest keep their order


@pytest.fixture
def toy_agents():
    from cvxdp_models.toy import make_agents

    return make_agents(agents=3, dim=5, samples=20, seed=0)


@pytest.fixture
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("no ../shared/data beside the repository: put the shared data there to run this")
    return path
