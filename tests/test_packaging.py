"""A release a stranger can install: build the sdist and the wheel, install the wheel into a fresh virtual
environment and use it from a folder that is not this checkout (issue 38, item 1).

The fresh environment gets only the wheel (``--no-deps``); the dependencies are read from this environment's
site-packages through a ``.pth`` line, which does not run this environment's editable-install hook, so every
``cvxdp`` module the commands import comes from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _packages(folder: Path, name: str) -> set[str]:
    """Every package below ``folder`` (a folder holding Python files), under the import name ``name``."""
    out = set()
    for path in folder.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        rel = path.parent.relative_to(folder)
        out.add(".".join((name, *rel.parts)))
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout: run it from a clone of the repository")
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "cvxdp"
    # build from the committed tree plus the working changes, never from build/ or *.egg-info leftovers
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                             "runs", "results", ".pytest_cache"))
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out),
                           str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_wheel_holds_every_package_and_the_shipped_cases(dist: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    have = {str(Path(n).parent).replace("/", ".") for n in names if n.endswith(".py")}
    want = _packages(ROOT / "cvxdp", "cvxdp") | _packages(ROOT / "models", "cvxdp_models")
    assert want <= have, f"packages missing from the wheel: {sorted(want - have)}"
    cases = {Path(n).name for n in names if n.startswith("cvxdp_models/cases/")}
    assert cases == {p.name for p in (ROOT / "cases").glob("*.toml")}
    assert any(n.startswith("cvxdp_models/power/data/pglib/") and n.endswith(".m") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in meta


def test_sdist_holds_the_sources_and_the_cases(dist: Path) -> None:
    sdist = next(dist.glob("*.tar.gz"))
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "README.md", "cases/toy.toml", "cvxdp/__init__.py",
            "models/__init__.py"} <= names


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory) -> dict:
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = next(dist.glob("*.whl"))
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet",
                           str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies, from this environment (a plain path: its .pth hooks, the editable cvxdp among them, do not run)
    Path(site, "zz_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    work = tmp_path_factory.mktemp("elsewhere")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {"python": python, "cvxdp": env_dir / "bin" / "cvxdp", "cwd": work, "env": env, "site": site}


def _run(installed: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*args], capture_output=True, text=True, cwd=installed["cwd"], env=installed["env"],
                          timeout=600)


def test_installed_wheel_imports_from_its_own_folder(installed: dict) -> None:
    proc = _run(installed, str(installed["python"]), "-c",
                "import cvxdp, cvxdp_models, cvxdp.families; print(cvxdp.__file__); print(cvxdp_models.__file__)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in proc.stdout.split():
        assert line.startswith(installed["site"]), line


def test_installed_wheel_lists_and_runs_a_shipped_case(installed: dict) -> None:
    listed = _run(installed, str(installed["cvxdp"]), "cases", "--json")
    assert listed.returncode == 0, listed.stderr[-3000:]
    names = {e["name"] for e in json.loads(listed.stdout)["cases"]}
    assert {"toy", "case14_3zones", "study_case14"} <= names
    run = _run(installed, str(installed["cvxdp"]), "run", "toy", "--rounds", "5", "--seed", "0", "--json",
               "--out", str(installed["cwd"] / "toy"))
    assert run.returncode == 0, run.stderr[-3000:]
    payload = json.loads(run.stdout.strip().splitlines()[-1])
    assert payload["rounds"] == 5


def test_installed_wheel_runs_the_quickstart(installed: dict) -> None:
    script = installed["cwd"] / "quickstart.py"
    shutil.copy(ROOT / "examples" / "quickstart.py", script)
    proc = _run(installed, str(installed["python"]), str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "non-private" in proc.stdout and "consensus x:" in proc.stdout
