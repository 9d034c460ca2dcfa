"""Backends run the agents' local steps: serial (the embedded default) and, as an extra, Ray."""

from __future__ import annotations

from .._validation import fail
from .base import Backend, NodeSpec
from .serial import SerialBackend

BACKENDS = ("serial", "ray")


def get_backend(name: str | Backend) -> Backend:
    """Return a backend instance for ``name`` ("serial" or "ray") or pass an instance through."""
    if isinstance(name, Backend):
        return name
    if name == "serial":
        return SerialBackend()
    if name == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            from ..errors import OptionalDependencyError
            raise OptionalDependencyError("The 'ray' backend needs the optional extra: pip install 'cvxdp[ray]'.") \
                from exc
        from ..errors import CvxdpError
        raise CvxdpError("The 'ray' backend is not available in this version; use backend='serial'.")
    raise fail("backend", "solve", "one of 'serial', 'ray' or a cvxdp.backends.Backend", name)


__all__ = ["BACKENDS", "Backend", "NodeSpec", "SerialBackend", "get_backend"]
