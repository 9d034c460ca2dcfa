"""The neighbouring relations of the logistic templates and the public sample count they rest on.

Both logistic builders average the loss over a normaliser ``N``. The gradient sensitivity is derived for a
fixed ``N``, so ``N`` must not change between neighbouring data sets:

- ``"add_remove"`` (add or remove one sample): ``N`` is a **public constant** the federation declares
  (``total=...`` in the builders, ``total_samples`` in a case file); the data set's own count would change
  with the neighbour and rescale every term.
- ``"replace"`` (replace one sample by another): the counts never change, so ``N`` may be the data's own
  total; the sensitivity is twice the add/remove one (two per-sample terms differ).

Without ``total`` the builders use ``"replace"``; ``"add_remove"`` without ``total`` is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RELATIONS = ("add_remove", "replace")
DESCRIPTIONS = {"add_remove": "add/remove one sample (public normaliser N = {N})",
                "replace": "replace one sample (normaliser N = {N}, unchanged by the relation)"}


def resolve_relation(parts: Sequence[tuple[np.ndarray, np.ndarray]], total: int | None,
                     relation: str | None, owner: str) -> tuple[int, str]:
    """The normaliser ``N`` and the relation of a builder call (see the module docstring).

    Raises
    ------
    ValueError
        For an unknown relation, a non-positive ``total``, or ``"add_remove"`` without a public ``total``.
    """
    if relation is None:
        relation = "replace" if total is None else "add_remove"
    if relation not in RELATIONS:
        raise ValueError(f"The 'relation' parameter of {owner} must be one of {', '.join(map(repr, RELATIONS))}. "
                         f"Got {relation!r} instead.")
    if total is None:
        if relation == "add_remove":
            raise ValueError(f"{owner}: relation='add_remove' needs the public sample count total=N (the data "
                             "set's own count changes with the neighbour, so the sensitivity would not hold).")
        return int(sum(len(y) for _, y in parts)), relation
    if isinstance(total, bool) or not isinstance(total, (int, np.integer)) or total < 1:
        raise ValueError(f"The 'total' parameter of {owner} must be an int in [1, inf). Got {total!r} instead.")
    return int(total), relation


def describe(relation: str, total: int) -> str:
    """The relation's text as recorded in the agents' Sensitivity."""
    return DESCRIPTIONS[relation].format(N=total)


def factor(relation: str) -> float:
    """How many per-sample gradient terms differ between neighbours: 1 (add/remove) or 2 (replace)."""
    return 2.0 if relation == "replace" else 1.0
