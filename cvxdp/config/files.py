"""Finding and reading case files (TOML) with the standard library only.

Kept apart from :mod:`cvxdp.config.build` (which builds algorithms and mechanisms from the tables) so that
commands that only list or read case files (``cvxdp cases``) start without the modelling stack.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["load_toml", "resolve_case_path", "shipped_cases_dir", "shipped_networks"]

#: Where the bundled templates package keeps the PGLib-OPF case files (found without importing the package).
PGLIB_SUBDIR = ("power", "data", "pglib")
PANDAPOWER_NETWORKS = (
    "pandapower's built-in MATPOWER cases (case14, case30, case57, case118, case300, case1354pegase, "
    "case2869pegase, ...): [model] network = NAME or --network NAME"
)


def _models_roots() -> list[Path]:
    """The folders of the bundled templates package ``cvxdp_models``, found without importing it."""
    try:
        spec = importlib.util.find_spec("cvxdp_models")
    except (ImportError, ValueError):
        return []
    return [Path(root) for root in (spec.submodule_search_locations or [])] if spec is not None else []


def shipped_cases_dir() -> Path | None:
    """The shipped case files: the repository's ``cases/`` folder next to the package (a source checkout or an
    editable install), else the copy a wheel installs as ``cvxdp_models/cases``."""
    checkout = Path(__file__).resolve().parents[2]
    candidates = [checkout / "cases"] if (checkout / "pyproject.toml").is_file() else []
    candidates += [root / "cases" for root in _models_roots()]
    return next((c for c in candidates if c.is_dir()), None)


def shipped_networks() -> list[dict[str, str]]:
    """The networks the power template accepts by name: pandapower's built-ins (one summary entry) and the
    bundled PGLib-OPF cases (one entry each), read from the templates package's folder without importing it."""
    out = [{"name": "case*", "kind": "net", "path": "", "description": PANDAPOWER_NETWORKS}]
    for root in _models_roots():
        for path in sorted(Path(root, *PGLIB_SUBDIR).glob("pglib_opf_*.m")):
            out.append({"name": path.stem, "kind": "net", "path": str(path),
                        "description": "PGLib-OPF v23.07, bundled (CC BY 4.0): [model] network = NAME or --network NAME"})
    return out


def resolve_case_path(name: str | Path) -> Path:
    """A path as given, else a shipped case by file name or stem (``case14_3zones``)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = shipped_cases_dir()
    if shipped is not None:
        for candidate in (shipped / path.name, shipped / f"{path.name}.toml"):
            if candidate.is_file():
                return candidate
    known = ", ".join(sorted(p.stem for p in shipped.glob("*.toml"))) if shipped else "none found"
    raise ConfigError(f"Case file {str(name)!r} does not exist. Shipped cases: {known}.")


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; a malformed file raises :class:`ConfigError` with the parser's position."""
    path = resolve_case_path(path)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}.") from None
