"""Backends run the agents' local steps: serial (the embedded default) and, as an extra, Ray."""

from __future__ import annotations

from .._validation import fail
from .base import Backend, NodeSpec
from .serial import SerialBackend

BACKENDS = ("serial", "ray")


def get_backend(name: str | Backend, **options) -> Backend:
    """Return a backend instance for ``name`` ("serial" or "ray") or pass an instance through.

    ``options`` go to the backend's constructor (Ray: ``num_cpus``, ``address``, ``nodes_per_actor``).
    """
    if isinstance(name, Backend):
        return name
    if name == "serial":
        if options:
            from ..errors import InvalidParameterError

            raise InvalidParameterError(f"The serial backend takes no options. Got {', '.join(sorted(options))}.")
        return SerialBackend()
    if name == "ray":
        from .ray import RayBackend  # imports ray itself only here (an optional extra)

        return RayBackend(**options)
    raise fail("backend", "solve", "one of 'serial', 'ray' or a cvxdp.backends.Backend", name)


def __getattr__(name: str):
    if name == "RayBackend":  # lazily: `from cvxdp.backends import RayBackend` without importing ray up front
        from .ray import RayBackend

        return RayBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BACKENDS", "Backend", "NodeSpec", "RayBackend", "SerialBackend", "get_backend"]
