"""The README and the documentation site: the README stays short and keeps the two set-up commands that
``fresh_check.sh`` extracts; every page the site's navigation names exists; the API page covers the public names."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import cvxdp

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAIN = 'pip install -e ".[power]" && cvxdp study cases/study_case14.toml --out results/case14'
TEST = 'pip install -e ".[test]" && python -m pytest'


def hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def command_after(text: str, marker: str) -> str | None:
    """The first line of the fenced block after ``marker`` (what fresh_check.sh extracts)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if marker in line:
            rest = [x for x in lines[i + 1:] if x.strip()]
            if len(rest) >= 2 and rest[0].startswith("```"):
                return rest[1]
            return None
    return None


def nav_pages() -> list[str]:
    """The ``*.md`` files named in mkdocs.yml's ``nav`` (read as text: no YAML parser needed)."""
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text.split("\nnav:", 1)[1]
    return re.findall(r"^\s*-\s+(?:[^:\n]+:\s+)?(\S+\.md)\s*$", nav, flags=re.M)


def test_readme_is_at_most_150_lines():
    assert len(README.read_text().splitlines()) <= 150


def test_readme_keeps_both_set_up_commands_under_their_markers():
    text = README.read_text()
    assert command_after(text, "<!-- main -->") == MAIN
    assert command_after(text, "<!-- test -->") == TEST


def test_readme_has_no_other_fenced_install_command():
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", README.read_text(), flags=re.M | re.S)
    installs = [b.strip() for b in blocks if "pip install" in b]
    assert installs == [MAIN, TEST]


def test_readme_links_and_figure_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_every_nav_page_exists():
    pages = nav_pages()
    assert "index.md" in pages and "case-files.md" in pages and "architecture.md" in pages
    pending = set(hooks().PENDING)  # written by another developer; built as a placeholder until then
    missing = [p for p in pages if not (DOCS / p).is_file() and p not in pending]
    assert not missing, f"pages in mkdocs.yml's nav but not in docs/: {missing}"


def test_generated_pages_keep_their_markers():
    h = hooks()
    assert h.SCHEMA_MARKER in (DOCS / "case-files.md").read_text()
    assert h.BENCHMARKS_MARKER in (DOCS / "benchmarks.md").read_text()
    listed = h.benchmarks_section(ROOT)
    for path in (ROOT / "benchmarks").glob("*.py"):
        assert f"`{path.name}`" in listed


def test_api_page_documents_every_public_name():
    text = (DOCS / "api.md").read_text()
    documented = set(re.findall(r"^::: cvxdp\.(\w+)\s*$", text, flags=re.M))
    assert set(cvxdp.__all__) <= documented, sorted(set(cvxdp.__all__) - documented)


def test_architecture_page_names_every_module_of_the_package():
    text = (DOCS / "architecture.md").read_text()
    package = Path(cvxdp.__file__).resolve().parent
    modules = {f"cvxdp/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    named = set(re.findall(r"^\| `(cvxdp/[\w/]+\.py)` \|", text, flags=re.M))
    assert modules == named, {"missing": sorted(modules - named), "gone": sorted(named - modules)}


#: a dotted name in cvxdp or its bundled templates (``cvxdp.run.storage.fingerprint``), and a path in this repository
DOTTED = re.compile(r"(?<![\w./])((?:cvxdp|cvxdp_models)(?:\.[A-Za-z_]\w*)+)")
REPO_PATH = re.compile(r"(?<![\w./-])((?:cvxdp|models|benchmarks|tests|examples|cases|docs)/[\w./-]*[a-z0-9_])")


def _resolves(name: str) -> bool:
    """Whether ``name`` is an importable module or an attribute path below one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def test_every_module_function_and_file_the_docs_and_docstrings_name_exists():
    """Moving or renaming a module leaves no stale reference behind: in the documentation and the README, every
    ``cvxdp.…`` name resolves and every repository path exists; in the code's docstrings and comments (package,
    templates, benchmarks, examples), every ``cvxdp.…`` name resolves."""
    pages = [*DOCS.glob("*.md"), README]
    code = [p for folder in ("cvxdp", "models", "benchmarks", "examples") for p in (ROOT / folder).rglob("*.py")]
    stale = set()
    for path in pages + code:
        text = path.read_text()
        stale |= {(path.relative_to(ROOT).as_posix(), n) for n in DOTTED.findall(text) if not _resolves(n)}
        if path in pages:
            stale |= {(path.relative_to(ROOT).as_posix(), p) for p in REPO_PATH.findall(text)
                      if not (ROOT / p).exists()}
    assert not stale, sorted(stale)


def _extras() -> list[str]:
    """The optional extras pyproject.toml declares (read as text: no TOML parser needed before Python 3.11)."""
    text = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
    return re.findall(r"^([a-z]+) = \[", text, flags=re.M)


def test_the_extras_lists_name_every_extra():
    """Issue 51: ``federation`` was missing from both lists."""
    extras = _extras()
    assert "federation" in extras and "power" in extras
    readme = next(p for p in README.read_text().split("\n\n") if p.startswith("Optional extras:"))
    started = (DOCS / "getting-started.md").read_text()
    for extra in set(extras) - {"test"}:  # the test extra is in the README's set-up command
        assert f"`{extra}`" in readme, f"the README's extras omit {extra!r}"
    for extra in extras:
        assert f"| `{extra}` |" in started, f"getting-started's extras table omits {extra!r}"


def test_the_home_page_names_the_three_ways_to_run():
    """Issue 51: the home page said "serially ... or on Ray" and never mentioned federations."""
    home = (DOCS / "index.md").read_text()
    for word in ("simulation", "Ray", "federation", "federation.md", "what-is-public.md"):
        assert word in home, word


def test_what_is_public_covers_every_argument_of_ones_own_agent():
    """Issue 51: the page covered the templates only; whether lipschitz, the feasible set and the initial point are
    public was spread over other pages. Every argument of cvxdp.Agent has its row, and the README links the page."""
    import inspect

    page = (DOCS / "what-is-public.md").read_text()
    own = page.split("## Your own agent")[1].split("\n## ")[0]
    rows = [line for line in own.splitlines() if line.startswith("| `")]
    for name in inspect.signature(cvxdp.Agent).parameters:
        assert any(f"`{name}`" in row or f"`{name}=`" in row for row in rows), f"no row for Agent's {name!r}"
    assert "feasible set" in own and "lipschitz=" in own and "initial_public=True" in own
    assert "(docs/what-is-public.md)" in README.read_text()
