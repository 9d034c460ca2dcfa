"""The package structure (issue 10, item 6): the module import graph of ``cvxdp`` and ``cvxdp_models``.

Built from the source with ``ast``: an edge ``a -> b`` when ``a`` imports ``b`` (or a package on ``b``'s path
that ``a`` is not inside, whose ``__init__`` runs first). *Module-level* imports (outside functions,
including ``try``/``if`` blocks, excluding ``if TYPE_CHECKING``) are what Python executes on import; *all*
imports also count the lazy ones inside functions.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

import cvxdp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"cvxdp": ROOT / "cvxdp", "cvxdp_models": ROOT / "models"}


def _modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for st in body:
        if isinstance(st, ast.If) and "TYPE_CHECKING" in ast.unparse(st.test):
            continue
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            yield st
        elif isinstance(st, (ast.If, ast.Try, ast.With)):
            for block in (st.body, getattr(st, "orelse", []), getattr(st, "finalbody", []),
                          *[h.body for h in getattr(st, "handlers", [])]):
                yield from _module_level(block)


@functools.cache
def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text())


@functools.cache
def _type_only(module: str) -> frozenset[int]:
    """Import statements under ``if TYPE_CHECKING:`` (read by type checkers only, never run)."""
    return frozenset(id(n) for st in ast.walk(_tree(module))
                     if isinstance(st, ast.If) and "TYPE_CHECKING" in ast.unparse(st.test)
                     for sub in st.body for n in ast.walk(sub) if isinstance(n, (ast.Import, ast.ImportFrom)))


def imports(module: str, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, list[str]]]:
    """Each import statement of ``module`` with the absolute names it imports (modules and ``mod.attr``)."""
    path = MODULES[module]
    tree = _tree(module)
    stmts = (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             and id(n) not in _type_only(module)) if lazy else _module_level(tree.body)
    for st in stmts:
        if isinstance(st, ast.Import):
            yield st, [a.name for a in st.names]
            continue
        if st.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[:len(base) - st.level + 1]
            name = ".".join(base + ([st.module] if st.module else []))
        else:
            name = st.module or ""
        yield st, [name] + [f"{name}.{a.name}" for a in st.names]


@functools.cache
def import_graph(lazy: bool) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module in MODULES:
        for _, names in imports(module, lazy):
            for name in names:
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    target = ".".join(parts[:i])
                    if target in MODULES and target != module and not module.startswith(target + "."):
                        graph.add_edge(module, target)
    return graph


def cycles(lazy: bool) -> list[set[str]]:
    return [c for c in nx.strongly_connected_components(import_graph(lazy)) if len(c) > 1]


#: Lazy (function-level) import cycles: none are left (issue 10 removed madmm<->radmm, sharing<->vertical,
#: engine->privacy->audit->engine, noise<->secure and agent<->compiled); see test_no_lazy_import_cycles_either.
#: Modules of issue 10b's area that must be in no import cycle, lazy imports included.
ACYCLIC_EVEN_LAZY = [m for m in MODULES if m.startswith(("cvxdp.privacy.", "cvxdp.studies.grid", "cvxdp_models"))
                     and m != "cvxdp.audits.release"] + [
    "cvxdp.config.runs", "cvxdp.plots", "cvxdp.studies.tables", "cvxdp.studies.caveats", "cvxdp.templates", "cvxdp.run.outdir",
    "cvxdp.run.checkpoint"]


def test_no_module_level_import_cycles():
    assert cycles(lazy=False) == []


def test_owned_modules_are_in_no_cycle_even_counting_lazy_imports():
    in_cycle = set().union(*cycles(lazy=True))
    assert sorted(in_cycle & set(ACYCLIC_EVEN_LAZY)) == []


def test_no_lazy_import_cycles_either():
    """Counting imports inside functions too (type-only imports excluded), the package is a DAG."""
    assert cycles(lazy=True) == []


def test_the_engine_never_imports_the_templates_package():
    offenders = [(m, n) for m in MODULES if m.startswith("cvxdp.") or m == "cvxdp"
                 for _, names in imports(m, lazy=True) for n in names if n.split(".")[0] == "cvxdp_models"]
    assert offenders == []


def test_models_use_only_cvxdps_public_names():
    public = set(cvxdp.__all__)
    bad = []
    for module in (m for m in MODULES if m.split(".")[0] == "cvxdp_models"):
        for st, names in imports(module, lazy=True):
            if isinstance(st, ast.Import):
                bad += [(module, n) for n in names if n.startswith("cvxdp.")]
            elif names[0] == "cvxdp":
                bad += [(module, n) for n in names[1:] if n.split(".")[1] not in public]
            elif names[0].startswith("cvxdp."):  # from cvxdp.M import X: M must be a public module (errors)
                bad += [(module, names[0])] if names[0].split(".")[1] not in public or names[0].count(".") > 1 \
                    else []
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cvxdp" \
                    and node.attr not in public:
                bad.append((module, f"cvxdp.{node.attr}"))
    assert bad == []


def test_pandapower_is_imported_in_one_module_only():
    users = sorted({m for m in MODULES for _, names in imports(m, lazy=True)
                    for n in names if n.split(".")[0] == "pandapower"})
    assert users == ["cvxdp_models.power.network"]
