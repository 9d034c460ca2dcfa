"""MkDocs hooks: the pages generated from the code at build time (listed in ``mkdocs.yml`` under ``hooks``).

* ``<!-- generated:schema -->`` in a page is replaced by the case-file schema,
  :func:`cvxdp.config.schema.schema_markdown` (the same tables ``cvxdp run --help`` summarises), so the
  case-file reference cannot drift from the keys the code reads.
* ``<!-- generated:benchmarks -->`` is replaced by one section per ``benchmarks/*.py`` script: its module
  docstring, read with :mod:`ast` (nothing is imported or run).
* A page listed in :data:`PENDING` that is not in ``docs/`` yet (another developer is writing it) is built as a
  short placeholder, so that ``mkdocs build --strict`` passes with the page already in the navigation; once the
  file exists it is used as is.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent

#: nav pages written elsewhere: built as a placeholder until the file exists in docs/
PENDING: dict[str, str] = {}

SCHEMA_MARKER = "<!-- generated:schema -->"
BENCHMARKS_MARKER = "<!-- generated:benchmarks -->"


def schema_section() -> str:
    """The case and study file schema as markdown tables (from :func:`cvxdp.config.schema.schema_markdown`)."""
    from cvxdp.config.schema import schema_markdown

    return schema_markdown()


def benchmarks_section(root: Path = ROOT) -> str:
    """One markdown section per ``benchmarks/*.py`` file: its name and its module docstring.

    Parameters
    ----------
    root : Path
        The repository root (holding ``benchmarks/``).

    Returns
    -------
    str
        Markdown; the docstrings are shown as preformatted text, exactly as written.
    """
    out = []
    for path in sorted((root / "benchmarks").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "(no docstring)"
        summary, _, rest = doc.partition("\n")
        out += [f"### `{path.name}`", "", summary.strip(), ""]
        if rest.strip():
            out += ["```text", rest.strip("\n"), "```", ""]
    return "\n".join(out)


def placeholder(title: str) -> str:
    """The text of a pending page's placeholder."""
    return f"# {title}\n\nThis page is being written. Until then, see the [API reference](api.md).\n"


def on_files(files: Any, config: Any) -> Any:
    """Add a placeholder for every :data:`PENDING` page that is not in ``docs/``."""
    from mkdocs.structure.files import File

    for name, title in PENDING.items():
        if files.get_file_from_path(name) is None:
            files.append(File.generated(config, name, content=placeholder(title)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the generation markers of a page by the generated text."""
    if SCHEMA_MARKER in markdown:
        markdown = markdown.replace(SCHEMA_MARKER, schema_section())
    if BENCHMARKS_MARKER in markdown:
        markdown = markdown.replace(BENCHMARKS_MARKER, benchmarks_section())
    return markdown
