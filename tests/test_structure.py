"""The package structure (issues 10 and 34): the module import graph of ``cvxdp`` and ``cvxdp_models``.

The layers themselves are import-linter contracts in pyproject.toml (tests/test_layers.py runs them); this file
checks what they do not: cycles, imports inside functions, the top level's size, the graph's size, the protocol.

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


def _edges(package: str = "cvxdp") -> set[tuple[str, str]]:
    """Module-to-module imports inside ``package`` as issue 34 counts them: each module counts each distinct module it
    imports (``from .model import Agent`` is one edge to ``cvxdp.model``; ``from . import errors`` one to
    ``cvxdp.errors``), imports inside functions included, type-only imports excluded."""
    edges = set()
    for module in (m for m in MODULES if m.split(".")[0] == package):
        for st, names in imports(module, lazy=True):
            targets = names if isinstance(st, ast.Import) else \
                [n if n in MODULES else names[0] for n in names[1:]] or names[:1]
            for target in targets:
                while target and target not in MODULES:
                    target = target.rpartition(".")[0]
                if target and target != module and target.split(".")[0] == package:
                    edges.add((module, target))
    return edges


def _function_level(package: str = "cvxdp") -> list[tuple[str, int, str]]:
    """Import statements of ``package``'s modules inside functions: (module, line, the line's text)."""
    out = []
    for module in MODULES:
        if module.split(".")[0] != package:
            continue
        tree, lines = _tree(module), MODULES[module].read_text().splitlines()
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("cvxdp")):
                    out.append((module, node.lineno, lines[node.lineno - 1]))
    return out


def test_no_import_cycles_even_counting_imports_inside_functions():
    assert cycles(lazy=False) == []
    assert cycles(lazy=True) == []


def test_few_imports_inside_functions_each_with_its_reason():
    """At most 15 imports inside functions (issue 34), each kept for start-up time or an optional dependency and
    saying so on its line."""
    inner = sorted({(m, line, text) for m, line, text in _function_level()})
    assert len(inner) <= 15, inner
    for module, line, text in inner:
        assert "start-up" in text or "optional" in text, f"{module}:{line} has no reason: {text.strip()}"


def test_the_top_level_holds_at_most_eight_modules():
    top = sorted(p.name for p in (ROOT / "cvxdp").glob("*.py"))
    assert len(top) <= 8, top


def test_the_import_graph_does_not_grow():
    """261 module-to-module imports before issue 34; 197 after it, 227 with the federation, 226 with the equal-total
    study in its own module; 254 with the party's own side of the federation (issue 47: the wire's schemas, the
    party's policy and lifetime ledger, its executor and process, the catalog a party reads algorithms from; raised
    once, on purpose, after merging what could be merged); 258 with a party's run folder in its own module (Party
    was 23 methods). Issue 49 (the house, third step) adds modules of their own, each importing what its part of
    the old module imported: item 2 and its carving (privacy.distributions, privacy.events, privacy.composition,
    audits.statistics; the families ask cvxdp.privacy's types): 276; item 3 (the [model] keys read from the
    templates' declarations: config.schema -> templates, +1) and item 4's carving of model/agent.py into agent,
    declaration and probe (+6) and of LocalProx into model/local_prox.py (+4), their own imports: 287; item 1 (the
    one study loop: studies/study.py, the modules carved from studies/total.py, the templates' metric declarations
    in cvxdp/metrics.py, the schedules' public name beside their new home in families/consensus): 300; then, when the
    front door moved into families/solve.py and the metrics into templates/metrics.py, and the CLI's central reference
    into config.build: 299. A ratchet: lower it when you cut one."""
    assert len(_edges()) <= 299


def test_the_family_protocol_is_small_and_every_node_is_a_node():
    from cvxdp.families import FAMILIES
    from cvxdp.model import Node
    from cvxdp.run import Family

    assert len(Family.__abstractmethods__) <= 8
    for family in FAMILIES.values():
        assert not family.__abstractmethods__
    import cvxdp.families.consensus.node as consensus_node
    import cvxdp.families.graph.node as graph_node
    import cvxdp.families.sharing.node as sharing_node

    nodes = [consensus_node.ConsensusNode, graph_node.GraphNode, sharing_node.SharingNode]
    assert all(issubclass(n, Node) and not n.__abstractmethods__ for n in nodes)


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


def test_the_tests_mirror_the_package():
    """Every folder of tests/ is a package of cvxdp (or models/ for the templates), besides the contract suite every
    family and backend passes and the pinned regression histories."""
    tests = Path(__file__).resolve().parent
    package = tests.parent / "cvxdp"
    folders = {p.relative_to(tests).as_posix() for p in tests.rglob("*") if p.is_dir()
               and not {"data", "__pycache__"} & set(p.relative_to(tests).parts)}
    strays = sorted(f for f in folders - {"contract", "regression", "models"}
                    if not (package / f / "__init__.py").is_file()
                    and not (f.startswith("models/") and (ROOT / f / "__init__.py").is_file()))
    assert not strays, f"test folders with no package of the same path in cvxdp/: {strays}"


def test_every_public_name_of_every_module_resolves():
    """A module's ``__all__`` (and a package's lazily loaded names, PEP 562) must name something that loads: a moved
    module must not leave a package pointing at where it was."""
    import importlib
    import pkgutil

    broken = []
    for info in pkgutil.walk_packages(cvxdp.__path__, "cvxdp."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            try:
                getattr(module, name)
            except (AttributeError, ImportError) as exc:
                broken.append(f"{info.name}.{name}: {exc}")
    broken += [f"cvxdp.{n}" for n in cvxdp.__all__ if not hasattr(cvxdp, n)]
    assert not broken, broken
