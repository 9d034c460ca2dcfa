"""The quick tier's list (tests/conftest.py, ``QUICK``) names tests that exist, so that moving or renaming a test
file shows up here instead of silently shrinking the tier; the tiers need no plugin beyond pytest (xdist's two
workers are added only where it is installed)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def load_conftest():
    spec = importlib.util.spec_from_file_location("_tests_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quick_entries() -> tuple[str, ...]:
    return load_conftest().QUICK


def test_every_quick_entry_names_an_existing_test():
    for entry in quick_entries():
        file, _, name = entry.partition("::")
        path = TESTS / file
        assert path.is_file(), f"QUICK entry {entry!r}: no file tests/{file}"
        tests = {n.name for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")}
        assert tests, f"QUICK entry {entry!r}: tests/{file} holds no test"
        assert not name or name in tests, f"QUICK entry {entry!r}: no test {name!r} in tests/{file}"


def test_quick_entries_are_unique():
    entries = quick_entries()
    assert len(entries) == len(set(entries))


def fake_config(xdist: bool = True, **option):
    from types import SimpleNamespace

    defaults = {"numprocesses": None, "dist": "no", "tx": [], "collectonly": False, "usepdb": False,
                "loadscopereorder": None}
    return SimpleNamespace(option=SimpleNamespace(**{**defaults, **option}),
                           pluginmanager=SimpleNamespace(hasplugin=lambda name: xdist and name == "xdist"))


def test_addopts_need_no_plugin_beyond_pytest():
    """Issue 51: ``-n 2`` in addopts made ``python -m pytest -m quick`` fail without pytest-xdist (the quick tier is
    meant to run with the main install plus pytest)."""
    import shlex

    text = (TESTS.parent / "pyproject.toml").read_text()
    addopts = next(line for line in text.splitlines() if line.startswith("addopts"))
    options = shlex.split(addopts.split("=", 1)[1].strip().strip('"').replace('\\"', '"'))
    assert not {"-n", "--numprocesses", "--dist", "--no-loadscope-reorder"} & set(options), options


def test_two_workers_only_when_xdist_is_there_and_nothing_else_was_asked():
    hook = load_conftest().pytest_cmdline_main
    config = fake_config()
    hook(config)
    assert (config.option.numprocesses, config.option.dist, config.option.loadscopereorder) == (2, "loadfile", False)
    for config in (fake_config(xdist=False), fake_config(numprocesses=0), fake_config(numprocesses=4),
                   fake_config(dist="load", tx=["popen"]), fake_config(usepdb=True), fake_config(collectonly=True)):
        before = dict(vars(config.option))
        hook(config)
        assert vars(config.option) == before
    worker = fake_config()
    worker.workerinput = {"workerid": "gw0"}
    hook(worker)
    assert worker.option.numprocesses is None
