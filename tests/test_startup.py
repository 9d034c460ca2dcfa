"""Start-up: ``import cvxdp`` and the commands that do not solve leave the modelling stack unloaded.

Each check runs in a fresh interpreter and reads ``sys.modules`` at exit (no timings here: those are in
``benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import cvxdp

MODELLING = ("cvxpy", "pandas", "networkx", "pandapower", "scipy", "dp_accounting", "tqdm", "ray", "matplotlib",
             "sklearn", "clarabel", "cvxdp_models", "cvxdp_models.base")
CLI = "from cvxdp.cli.main import main; sys.argv = ['cvxdp', *sys.argv[1:]]\ntry:\n    main()\nexcept SystemExit as e:\n" \
      "    code = e.code\nelse:\n    code = 0\n"
REPORT = "print('\\nLOADED', json.dumps(sorted(m for m in {mods!r} if m in sys.modules)), 'EXIT', code)"


def _loaded(body: str, *args: str, mods: tuple[str, ...] = MODELLING) -> tuple[list[str], str]:
    """Run ``body`` in a fresh interpreter; the watched modules it imported, and its stdout."""
    code = "import json, sys\ncode = 0\n" + body + "\n" + REPORT.format(mods=mods)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr
    out, _, tail = proc.stdout.rpartition("\nLOADED ")
    names, _, exit_code = tail.partition(" EXIT ")
    assert exit_code.strip() == "0", proc.stdout + proc.stderr
    return json.loads(names), out


def test_import_cvxdp_loads_no_modelling_stack():
    loaded, _ = _loaded("import cvxdp")
    assert loaded == []


def test_public_names_load_on_first_use():
    loaded, out = _loaded("import cvxdp\nprint('before', 'cvxdp.families.consensus.params' in sys.modules)\n"
                          "print(cvxdp.LinearizedADMM.__module__)", mods=("cvxdp.families.consensus.params",))
    assert out.split() == ["before", "False", "cvxdp.families.consensus.params"]
    assert loaded == ["cvxdp.families.consensus.params"]


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["cases"], ["cases", "--json"], ["run", "--help"],
                                  ["privacy", "--help"], ["audit", "--help"]])
def test_cli_commands_that_do_not_solve_load_no_modelling_stack(args):
    loaded, out = _loaded(CLI, *args)
    # run --help lists the templates' [model] keys: it imports their declarations (cvxdp_models.declarations and
    # the package's cheap __init__), never a template module, cvxdp_models.base or the modelling stack
    assert loaded == (["cvxdp_models"] if args == ["run", "--help"] else [])
    if args == ["cases", "--json"]:
        names = {c["name"] for c in json.loads(out.strip().splitlines()[-1])["cases"]}
        assert "case14_3zones" in names


def test_privacy_command_loads_the_accountant_but_not_the_modelling_stack():
    loaded, out = _loaded(CLI, "privacy", "--noise", "gaussian", "--scale", "1", "--steps", "100", "--delta",
                          "1e-6", "--json")
    assert "dp_accounting" in loaded  # RDP and PLD need it
    assert set(loaded) <= {"dp_accounting", "scipy"}
    payload = json.loads(out.strip().splitlines()[-1])
    assert payload["epsilon"]["pld"] < payload["epsilon"]["rdp"] < payload["epsilon"]["basic"]


def test_all_and_dir_list_every_public_name():
    assert len(cvxdp.__all__) == len(set(cvxdp.__all__))
    for name in cvxdp.__all__:
        assert getattr(cvxdp, name) is not None
        assert name in dir(cvxdp)
    assert cvxdp.Agent is __import__("cvxdp.model.agent", fromlist=["Agent"]).Agent
    assert cvxdp.errors.CvxdpError.__module__ == "cvxdp.errors"
    namespace: dict = {}
    exec("from cvxdp import *", namespace)
    assert set(cvxdp.__all__) <= set(namespace)


def test_submodules_still_resolve_as_attributes_and_unknown_names_raise():
    assert cvxdp.config.load_case.__module__ == "cvxdp.config.build"
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        cvxdp.not_a_name  # noqa: B018


def test_type_checking_imports_match_the_lazy_table():
    """Static type checkers read the ``if TYPE_CHECKING:`` block; it must name exactly the lazy exports."""
    tree = ast.parse(Path(cvxdp.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    static = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names:
            static[alias.asname or alias.name] = "." + node.module if node.module else "." + alias.name
    assert static == cvxdp._LAZY
    assert sorted(cvxdp.__all__) == sorted(static)
