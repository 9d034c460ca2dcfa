"""A third-party template package (examples/template_package/) installed like any package and run from the CLI:
its ``cvxdp.templates`` entry point is all cvxdp needs to find it.

The test installs the example into a throw-away venv that sees this interpreter's packages (so cvxdp is not
reinstalled) and runs ``cvxdp run mean.toml`` there; a fast in-process twin fakes the installed distribution with
a dist-info directory on sys.path.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

import cvxdp.templates as T

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "template_package"
CLI = "import sys; from cvxdp.cli.main import main; sys.argv[0] = 'cvxdp'; main()"


def _throwaway_venv(root: Path) -> Path:
    """A venv in ``root`` (no pip of its own) that sees this interpreter's packages (cvxdp, pip, setuptools): a
    .pth line adds its site-packages as site directories, so their own .pth files (cvxdp's editable install) run
    too. (``--system-site-packages`` would show the base interpreter's instead when this one is a venv.) Returns
    its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(purelib, "outer_site.pth").write_text(f"import site; list(map(site.addsitedir, {ours!r}))\n")
    return python


def test_a_template_package_installed_in_a_venv_runs_from_the_cli(tmp_path):
    source = tmp_path / "template_package"
    shutil.copytree(EXAMPLE, source)  # pip writes build files beside the source: not into the repository
    python = _throwaway_venv(tmp_path / "venv")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    str(source)], check=True, capture_output=True, text=True)
    out = tmp_path / "run"
    proc = subprocess.run([str(python), "-c", CLI, "run", str(source / "mean.toml"), "--out", str(out), "--json",
                           "--no-progress"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["case"] == "mean" and summary["rounds"] == 60
    assert summary["consensus_residual"] < 1e-3
    assert summary["distance_to_mean"] < 1e-2  # the agents agreed on the mean of all the points
    assert (out / "result.json").is_file()
    # the template is invisible outside the venv it was installed into
    assert "mean" not in subprocess.run([sys.executable, "-c", "import cvxdp; print(cvxdp.template_names())"],
                                        capture_output=True, text=True, check=True).stdout
    help_text = subprocess.run([str(python), "-c", CLI, "run", "--help"], capture_output=True, text=True,
                               cwd=tmp_path).stdout
    assert "[model] mean: agents=3, dim=4, samples=50, seed=0" in help_text


@pytest.fixture
def installed_example(tmp_path, monkeypatch):
    """The example as pip would leave it, faked: its module and a dist-info directory with its entry point."""
    monkeypatch.setattr(T, "_REGISTERED", dict(T._REGISTERED))
    monkeypatch.setattr(T, "_DECLARED", {})
    monkeypatch.setattr(T, "_ENTRY_POINTS", None)
    info = tmp_path / "cvxdp_mean_template-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cvxdp-mean-template\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[cvxdp.templates]\nmean = cvxdp_mean_template:TEMPLATE\n")
    shutil.copy(EXAMPLE / "cvxdp_mean_template.py", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield EXAMPLE / "mean.toml"
    sys.modules.pop("cvxdp_mean_template", None)


def test_the_example_template_runs_in_process(installed_example, tmp_path):
    from click.testing import CliRunner

    from cvxdp.cli.main import cli

    out = CliRunner().invoke(cli, ["run", str(installed_example), "--out", str(tmp_path / "run"), "--json",
                                   "--no-progress", "--rounds", "20"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output.strip().splitlines()[-1])
    assert summary["case"] == "mean" and summary["rounds"] == 20 and summary["distance_to_mean"] < 0.1
    bad = CliRunner().invoke(cli, ["run", str(installed_example), "--out", str(tmp_path / "bad"), "--data",
                                   str(tmp_path)])
    assert "--data sets [model] path, which the mean template does not read" in bad.output
