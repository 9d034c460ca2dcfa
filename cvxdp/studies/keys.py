"""The checks of declared ``[study]`` keys (:class:`~cvxdp.studies.study.StudyKey`): each names the file and key and
says what was expected, in the scikit-learn style of the algorithms' parameters."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["is_bool", "is_int_at_least", "is_unit_float", "number_list", "refuse"]


def refuse(path: Path, key: str, expected: str, value: Any) -> ConfigError:
    """The message of a refused value: ``FILE: the 'KEY' entry of [study] must be EXPECTED. Got VALUE instead.``"""
    return ConfigError(f"{path}: the {key!r} entry of [study] must be {expected}. Got {value!r} instead.")


def is_int_at_least(low: int, *, optional: bool = False) -> Callable[[Any], bool]:
    """An int >= ``low`` (``optional``: or None)."""
    return lambda v: (optional and v is None) or (not isinstance(v, bool) and isinstance(v, int) and v >= low)


def is_unit_float(*, optional: bool = False) -> Callable[[Any], bool]:
    """A number in (0, 1) (``optional``: or None)."""
    return lambda v: (optional and v is None) or (not isinstance(v, bool) and isinstance(v, (int, float))
                                                  and 0 < v < 1)


def is_bool(value: Any) -> bool:
    """A TOML boolean."""
    return isinstance(value, bool)


def number_list(key: str, kind: type, *, positive: bool, convert: bool = False) -> Callable[[Any, Path], list]:
    """A non-empty list of finite numbers (``kind`` float) or ints, positive or non-negative; ``convert``: each
    converted to ``kind``."""
    what = ("positive numbers" if positive else "non-negative numbers") if kind is float else \
        ("positive ints" if positive else "non-negative ints")

    def parse(values: Any, path: Path) -> list:
        if not isinstance(values, list) or not values:
            raise refuse(path, key, f"a non-empty list of {what}", values)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int) or \
                    not math.isfinite(v) or (v <= 0 if positive else v < 0):
                raise ConfigError(f"{path}: the {key!r} entry of [study] must hold {what}. Got {v!r} instead.")
        return [kind(v) for v in values] if convert else values

    return parse
