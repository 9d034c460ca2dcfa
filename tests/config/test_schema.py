"""The documented case/study schema (cvxdp.config.schema, the docs' case-file page, `cvxdp run --help`) lists exactly the keys
the code reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cvxdp.config import build as config
from cvxdp.config.schema import SCHEMA, keys, schema_markdown, tables
from cvxdp.studies import STUDIES
from cvxdp.studies import graph as study_graph

ROOT = Path(__file__).resolve().parents[2]
CASE_FILES_PAGE = ROOT / "docs" / "case-files.md"


def code_keys() -> dict[str, set[str]]:
    from cvxdp_models import erm, toy, vertical
    from cvxdp_models.logistic import template as logistic
    from cvxdp_models.power import template as power

    return {"[case]": config._CASE_KEYS, "[algorithm]": config._ALGORITHM_KEYS, "[privacy]": config._PRIVACY_KEYS,
            "[run]": config._RUN_KEYS, "[model] power": set(power.MODEL_KEYS),
            "[model] logistic": set(logistic.DEFAULTS), "[model] erm": set(erm.DEFAULTS),
            "[model] vertical": set(vertical.DEFAULTS), "[model] toy": set(toy.DEFAULTS),
            "[[setting]] (graph studies)": study_graph._SETTING_KEYS,
            "[[comparison]] (graph studies)": study_graph._COMPARISON_KEYS,
            **{cls.schema_table: cls.key_names() for cls in STUDIES.values()}}


@pytest.mark.parametrize("table", list(tables()))
def test_schema_lists_exactly_the_keys_the_code_reads(table):
    assert keys(table) == set(code_keys()[table]), table


def test_every_table_is_documented():
    assert set(tables()) == set(code_keys())


def test_model_tables_are_the_templates_declarations():
    """The [model] rows are read from each template's declaration (not text in the engine's schema)."""
    from cvxdp_models import declarations

    assert not any(table.startswith("[model]") for table in SCHEMA)
    for declaration in (declarations.POWER, declarations.LOGISTIC, declarations.ERM, declarations.VERTICAL,
                        declarations.TOY):
        rows = tables()[f"[model] {declaration.name}"]
        assert rows == [(k.name, k.type, k.default, k.doc) for k in declaration.keys]


def page_schema() -> dict[str, set[str]]:
    """The tables of the case-file page as the docs build renders it (mkdocs_hooks.py), keyed by table."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    source = CASE_FILES_PAGE.read_text()
    assert hooks.SCHEMA_MARKER in source, "docs/case-files.md lost its generation marker"
    section = hooks.on_page_markdown(source, None, None, None)
    assert schema_markdown().strip() in section
    out: dict[str, set[str]] = {}
    table = None
    for line in section.splitlines():
        m = re.match(r"\*\*(.+)\*\*$", line.strip())
        if m:
            table = m.group(1)
            out[table] = set()
        m = re.match(r"\| `([^`]+)` \|", line)
        if m and table:
            out[table].add(m.group(1))
    return out


def test_docs_schema_page_matches():
    documented = page_schema()
    assert set(documented) == set(tables())
    for table in tables():
        assert documented[table] == keys(table), table


def test_schema_cells_do_not_split_table_rows():
    for line in schema_markdown().splitlines():
        if line.startswith("| `"):
            assert line.replace("\\|", "").count("|") == 5, line


def test_run_help_lists_every_case_key():
    from click.testing import CliRunner

    from cvxdp.cli.main import cli

    out = CliRunner().invoke(cli, ["run", "--help"]).output
    for table in ("[case]", "[algorithm]", "[privacy]", "[run]", *(t for t in tables() if t.startswith("[model]"))):
        for key in keys(table):
            assert f"{key}=" in out, (table, key)


def test_algorithm_and_privacy_rows_are_the_declared_parameters():
    """The [algorithm] and [privacy] schema is text (so --help loads nothing) generated from the classes' tables."""
    from cvxdp.families import algorithm_schema, privacy_schema

    assert SCHEMA["[algorithm]"] == algorithm_schema()
    assert SCHEMA["[privacy]"] == privacy_schema()


@pytest.mark.parametrize("kind", sorted(STUDIES))
def test_study_rows_are_the_declared_keys(kind):
    """Each kind of study's [study] schema rows are its declared keys (text, so --help loads nothing), and
    `cvxdp study --help` lists every one of them."""
    from click.testing import CliRunner

    from cvxdp.cli.main import cli

    cls = STUDIES[kind]
    assert SCHEMA[cls.schema_table] == cls.schema_rows()
    out = CliRunner().invoke(cli, ["study", "--help"]).output
    line = next(line for line in out.splitlines() if line.strip().startswith(cls.schema_table))
    assert all(f"{key}=" in line for key in cls.key_names()), line


def test_the_cli_lists_each_algorithms_own_mechanisms():
    """--help's copy (text, so that it loads no algorithm) is what each algorithm's accepts() says."""
    from cvxdp.cli.main import SUPPORTED_MECHANISMS
    from cvxdp.families import ALGORITHMS, MECHANISMS

    assert SUPPORTED_MECHANISMS == {name: tuple(m for m in ("none", *MECHANISMS) if cls.accepts(m))
                                    for name, cls in ALGORITHMS.items()}
    assert {name: cls.mechanisms for name, cls in ALGORITHMS.items()} == SUPPORTED_MECHANISMS
