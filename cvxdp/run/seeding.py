"""The root of a run's randomness: secret OS entropy by default, an explicit seed only for research.

Every run draws its noise from one :class:`numpy.random.SeedSequence`, spawned into one generator per agent
(never reseeded). ``seed=None`` (the default everywhere) takes fresh entropy from the operating system, so
nobody can replay the noise; that entropy is kept only in the run's private checkpoint state (so that a
resumed run continues the same streams), never in the public result. An explicit ``seed`` reproduces the
run bit for bit: that is for research and tests, and a seeded run's release is **not** private to anyone
who knows the seed (``result.config["seeded"]`` records which kind of run it was).
"""

from __future__ import annotations

import numpy as np

from ..params import check_int


def root_seed_sequence(seed: int | None, owner: str = "solve") -> tuple[int | None, np.random.SeedSequence]:
    """Validate ``seed`` and return it with the run's root SeedSequence.

    Parameters
    ----------
    seed : int >= 0 or None
        None: fresh entropy from the operating system (``SeedSequence()``), secret and not recorded in
        the result. An int: a reproducible (research) run.
    owner : str
        Named in the error message.

    Returns
    -------
    seed : int or None
        The validated seed.
    root : numpy.random.SeedSequence
        Spawn one child per agent from it.
    """
    if seed is None:
        return None, np.random.SeedSequence()
    seed = check_int(seed, "seed", owner, 0)
    return seed, np.random.SeedSequence(seed)


def seed_config(seed: int | None) -> dict:
    """The public record of the seed: ``{"seed": seed or None, "seeded": bool}``."""
    return {"seed": seed, "seeded": seed is not None}
