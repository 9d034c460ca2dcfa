"""The layer contracts of pyproject.toml ([tool.importlinter]): import-linter checks them on every module, imports
inside functions included (docs/architecture.md draws the layers)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_layer_contract_is_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    # never skipped: the contracts are what keeps the layers apart, and CI installs the test extra
    assert exe is not None, "import-linter is not installed: pip install -e '.[test]' (its lint-imports checks the layers)"
    proc = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "4 kept, 0 broken" in proc.stdout
