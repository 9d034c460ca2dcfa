"""The house's figures (issue 49): how the package's units depend on each other and how large its pieces are.

    python benchmarks/measure_house.py                 # this checkout
    python benchmarks/measure_house.py --root DIR      # another checkout (e.g. ``git worktree add DIR 3562c06``)
    python benchmarks/measure_house.py --json          # the figures as JSON

Read from the source with ``ast`` (nothing is imported), so it measures any checkout. The figures:

* **units**: the top-level folders and top-level modules of ``cvxdp/`` (``cvxdp.cli``, ``cvxdp.errors``, ...);
  an *arrow* ``a -> b`` when a module of unit ``a`` imports a module of unit ``b`` (imports inside functions
  included, ``if TYPE_CHECKING`` imports excluded); the *fan-out* of a unit is how many units it imports.
* **cycles**: strongly connected sets of files (modules) and of units, imports inside functions included.
* **module edges**: distinct module -> module imports inside ``cvxdp`` (as tests/test_structure.py counts them:
  ``from .model import Agent`` is one edge to ``cvxdp.model``), the ratchet of tests/test_structure.py.
* **sizes**: modules over 600 lines, functions (and methods) over 80 lines, classes over 20 methods in ``cvxdp``
  (the issue's goals), and apart from them the same for the bundled templates (``models/``, ``cvxdp_models``).
* **strings**: branches on a noise name (``noise == "laplace"`` and the like) and on a template family name
  (``== "power"`` / ``== "fl"``) inside ``cvxdp``, the two kinds of string the issue asks to replace by declarations.

The issue's goals are printed beside each figure: arrows at most 45, fan-out at most 7, 0 cycles, no module over 600
lines, at most 3 functions over 80 lines, no class over 20 methods.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import networkx as nx

#: the issue's goals: figure -> (limit, what it is)
GOALS = {"arrows": 45, "max_fan_out": 7, "file_cycles": 0, "unit_cycles": 0, "modules_over_600": 0,
         "functions_over_80": 3, "classes_over_20_methods": 0}
NOISE_BRANCH = re.compile(r"""(==|!=)\s*["'](laplace|gaussian)["']|["'](laplace|gaussian)["']\s*(==|!=)""")
TEMPLATE_BRANCH = re.compile(r"""(==|!=)\s*["'](power|fl)["']|["'](power|fl)["']\s*(==|!=)""")


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for ``cvxdp`` (``root/cvxdp``) and ``cvxdp_models`` (``root/models``)."""
    out = {}
    for package, folder in (("cvxdp", root / "cvxdp"), ("cvxdp_models", root / "models")):
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_only(tree: ast.Module) -> set[int]:
    return {id(n) for st in ast.walk(tree) if isinstance(st, ast.If) and "TYPE_CHECKING" in ast.unparse(st.test)
            for sub in st.body for n in ast.walk(sub) if isinstance(n, (ast.Import, ast.ImportFrom))}


def imported(module: str, path: Path, tree: ast.Module, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` imports (each import's most specific known module), imports
    inside functions included, type-only ones excluded."""
    skip, out = _type_only(tree), set()
    for st in ast.walk(tree):
        if not isinstance(st, (ast.Import, ast.ImportFrom)) or id(st) in skip:
            continue
        if isinstance(st, ast.Import):
            targets = [a.name for a in st.names]
        else:
            if st.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = base[:len(base) - st.level + 1]
                name = ".".join(base + ([st.module] if st.module else []))
            else:
                name = st.module or ""
            targets = [t if t in known else name for t in (f"{name}.{a.name}" for a in st.names)] or [name]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                out.add(target)
    return out


def unit_of(module: str) -> str:
    """``cvxdp.model.agent`` -> ``cvxdp.model``; ``cvxdp.errors`` -> ``cvxdp.errors``; ``cvxdp`` -> ``cvxdp``."""
    return ".".join(module.split(".")[:2])


def _functions(tree: ast.Module, prefix: str) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((f"{prefix}:{node.name}", node.end_lineno - node.lineno + 1))
    return out


def measure(root: Path) -> dict:
    """Every figure of the module docstring for the checkout at ``root``."""
    known = modules(root)
    trees = {m: ast.parse(p.read_text()) for m, p in known.items()}
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    every = set()
    for module, path in known.items():
        for target in imported(module, path, trees[module], known):
            every.add((module, target))
            if not module.startswith(target + "."):  # a module importing its own package's __init__ is no arrow
                graph.add_edge(module, target)
    engine = [m for m in known if m.split(".")[0] == "cvxdp"]
    edges = {(a, b) for a, b in graph.edges if a in engine and b.split(".")[0] == "cvxdp"}
    ratchet = {(a, b) for a, b in every if a in engine and b.split(".")[0] == "cvxdp"}  # as the test counts
    units = nx.DiGraph()
    units.add_nodes_from({unit_of(m) for m in engine if m != "cvxdp"})
    for a, b in edges:
        ua, ub = unit_of(a), unit_of(b)
        if ua != ub and "cvxdp" not in (ua, ub):
            units.add_edge(ua, ub)
    fan_out = {u: units.out_degree(u) for u in units}
    lines = {m: len(p.read_text().splitlines()) for m, p in known.items()}
    functions = [f for m in known for f in _functions(trees[m], m)]
    classes = [(f"{m}:{c.name}", sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in c.body))
               for m in known for c in ast.walk(trees[m]) if isinstance(c, ast.ClassDef)]
    text = {m: p.read_text() for m, p in known.items() if m in engine}
    noise = {m: len(NOISE_BRANCH.findall(t)) for m, t in text.items() if NOISE_BRANCH.search(t)}
    template = {m: len(TEMPLATE_BRANCH.findall(t)) for m, t in text.items() if TEMPLATE_BRANCH.search(t)}
    def engine_only(items: list[tuple[str, int]], limit: int) -> tuple[list, list]:
        over = sorted(((name, n) for name, n in items if n > limit), key=lambda x: -x[1])
        return ([x for x in over if x[0].startswith("cvxdp.") or x[0].startswith("cvxdp:")],
                [x for x in over if x[0].startswith("cvxdp_models")])

    big, big_models = engine_only(list(lines.items()), 600)
    long, long_models = engine_only(functions, 80)
    wide, wide_models = engine_only(classes, 20)
    return {
        "arrows": units.number_of_edges(),
        "max_fan_out": max(fan_out.values(), default=0),
        "fan_out": dict(sorted(fan_out.items(), key=lambda x: -x[1])),
        "file_cycles": sum(1 for c in nx.strongly_connected_components(graph) if len(c) > 1),
        "unit_cycles": sum(1 for c in nx.strongly_connected_components(units) if len(c) > 1),
        "module_edges": len(ratchet),
        "modules_over_600": len(big), "modules_over_600_list": big,
        "functions_over_80": len(long), "functions_over_80_list": long,
        "classes_over_20_methods": len(wide), "classes_over_20_methods_list": wide,
        "templates_over_limits": {"modules_over_600": big_models, "functions_over_80": long_models,
                                  "classes_over_20_methods": wide_models},
        "noise_name_branches": sum(noise.values()), "noise_name_branches_files": noise,
        "template_name_branches": sum(template.values()), "template_name_branches_files": template,
    }


def report(figures: dict) -> list[str]:
    """The figures as lines of text, each beside its goal."""
    out = []
    for key in ("arrows", "max_fan_out", "file_cycles", "unit_cycles", "module_edges", "modules_over_600",
                "functions_over_80", "classes_over_20_methods", "noise_name_branches", "template_name_branches"):
        goal = GOALS.get(key)
        mark = "" if goal is None else f"   (goal <= {goal}: {'met' if figures[key] <= goal else 'NOT met'})"
        out.append(f"{key:<26}{figures[key]:>6}{mark}")
        detail = figures.get(f"{key}_list") or figures.get(f"{key}_files")
        if key == "max_fan_out":
            detail = [(u, n) for u, n in figures["fan_out"].items() if n >= 6]
        for item in (detail.items() if isinstance(detail, dict) else detail or []):
            out.append(f"    {item[0]}: {item[1]}")
    out.append("the bundled templates (models/, cvxdp_models; the issue's goals are for the engine):")
    for key, items in figures["templates_over_limits"].items():
        out.append(f"    {key}: " + (", ".join(f"{n} {v}" for n, v in items) or "none"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout to measure (holds cvxdp/ and models/)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not (args.root / "cvxdp").is_dir():
        parser.error(f"--root {args.root} holds no cvxdp/ folder")
    figures = measure(args.root)
    print(json.dumps(figures, indent=2) if args.json else "\n".join(report(figures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
