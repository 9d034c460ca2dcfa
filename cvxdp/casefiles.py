"""Finding and reading case files (TOML) with the standard library only.

Kept apart from :mod:`cvxdp.config` (which builds algorithms and mechanisms from the tables) so that
commands that only list or read case files (``cvxdp cases``) start without the modelling stack.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["load_toml", "resolve_case_path", "shipped_cases_dir"]


def shipped_cases_dir() -> Path | None:
    """The repository's ``cases/`` folder (next to the installed package), if present."""
    candidate = Path(__file__).resolve().parents[1] / "cases"
    return candidate if candidate.is_dir() else None


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
