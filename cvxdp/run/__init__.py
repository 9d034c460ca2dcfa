"""The coordinator's machinery, the same for every algorithm family: the one round loop, the Family protocol, the
backends that place nodes and move messages, checkpoints, output files and results. It imports no family.

* :mod:`.family` — :class:`Family` (the coordinator's hooks), :class:`RoundPlan`, :class:`Charge`;
* :mod:`.loop` — :func:`run_loop`: budget guard, ledger, stopping, checkpoints, progress, :class:`Result`;
* :mod:`.backends` — :class:`Backend`, :class:`NodeSpec`, :class:`SerialBackend`, :func:`get_backend`
  (:mod:`.ray`: :class:`RayBackend`, an optional extra, loaded on use);
* :mod:`.storage` — fingerprints and atomic checkpoints; output directories and their locks;
* :mod:`.results` — :class:`Result` and :func:`load_result`.
"""

from ..errors import InvalidParameterError, fail
from .backends import Backend, NodeSpec, SerialBackend, method_name
from .family import FEASIBLE_SETS_PUBLIC, PUBLIC_ASSUMPTION, Charge, Family, RoundPlan, initial_points_public
from .loop import long_lived_frozen, root_seed_sequence, run_loop
from .results import RESULT_FILE, Result, jsonable, load_result
from .storage import (
    CheckpointTarget,
    OutputLock,
    atomic_write_text,
    case_context,
    checkpoint_path,
    fingerprint,
    locks_output,
    prepare_dir,
    remove_checkpoint,
)

BACKENDS = ("serial", "ray")


def get_backend(name: str | Backend, **options) -> Backend:
    """Return a backend instance for ``name`` ("serial" or "ray") or pass an instance through.

    ``options`` go to the backend's constructor (Ray: ``num_cpus``, ``address``, ``nodes_per_actor``).
    """
    if isinstance(name, Backend):
        return name
    if name == "serial":
        if options:
            raise InvalidParameterError(f"The serial backend takes no options. Got {', '.join(sorted(options))}.")
        return SerialBackend()
    if name == "ray":
        from .ray import RayBackend  # an optional extra: ray loads only when asked for

        return RayBackend(**options)
    raise fail("backend", "solve", "one of 'serial', 'ray' or a cvxdp.run.backends.Backend", name)


def __getattr__(name: str):
    if name == "RayBackend":  # `from cvxdp.run import RayBackend` without importing ray up front
        from .ray import RayBackend  # an optional extra: ray loads only when asked for

        return RayBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BACKENDS", "method_name", "FEASIBLE_SETS_PUBLIC", "PUBLIC_ASSUMPTION", "initial_points_public", "Backend", "RayBackend", "Charge", "CheckpointTarget", "Family", "NodeSpec", "OutputLock", "RESULT_FILE",
           "Result", "RoundPlan", "SerialBackend", "atomic_write_text", "case_context", "long_lived_frozen", "checkpoint_path",
           "fingerprint", "get_backend", "jsonable", "load_result", "locks_output", "prepare_dir",
           "remove_checkpoint", "root_seed_sequence", "run_loop"]
