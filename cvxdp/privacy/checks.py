"""Checks a private run makes before any noise is drawn (nothing private may steer it unaccounted)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import DeclarationError


def check_public_initial(agents: Sequence[Any]) -> None:
    """Refuse a private run whose agent starts from an undeclared ``initial`` point.

    A starting point chosen from private data (say, a local fit) leaks through the first message and no
    mechanism accounts for it. ``Agent(initial=..., initial_public=True)`` declares it data independent;
    the default start (the projection of 0 onto ``W_p``) needs no declaration.
    """
    for agent in agents:
        if getattr(agent, "initial", None) is not None and getattr(agent, "initial_public", False) is not True:
            raise DeclarationError(
                f"Agent {agent.name!r}: a private run needs a public starting point, but initial=... is not "
                "declared public. Pass initial_public=True if the point does not depend on private data, "
                "or drop initial (the default start is the projection of 0 onto the feasible set).")
