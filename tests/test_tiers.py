"""The quick tier's list (tests/conftest.py, ``QUICK``) names tests that exist, so that moving or renaming a test
file shows up here instead of silently shrinking the tier."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def quick_entries() -> tuple[str, ...]:
    spec = importlib.util.spec_from_file_location("_tests_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.QUICK


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
