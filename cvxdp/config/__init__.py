"""Case and study files (TOML): finding and reading them (:mod:`.files`, standard library only), their documented
schema (:mod:`.schema`), turning their tables into cvxdp objects and running one case (:mod:`.build`).

The names of :mod:`.build` load on first use (PEP 562), so ``cvxdp cases`` reads the files without the modelling
stack.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"Case": ".build", "StudyBackends": ".build", "load_case": ".build", "make_algorithm": ".build",
         "make_backend": ".build", "make_privacy": ".build", "run_case": ".build", "build_instance": ".build"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)
