"""The Ray backend: the nodes live in Ray actors, several per actor when there are more nodes than CPUs.

Each actor receives its nodes' :class:`~cvxdp.run.backends.NodeSpec` once, at :meth:`RayBackend.start`, and builds
them itself (compiled subproblems, caches and random generators are created inside the actor). Per round
only the arguments of :meth:`RayBackend.call` (messages, noise plans) go out and the nodes' return values
(releases) come back. Both travel as cloudpickle bytes, so the arrays a node receives and returns are
ordinary writable copies, exactly as with the serial backend.

An exception raised by a node comes back as the same exception (class, message, attributes) with the
remote traceback as a note; warnings a node emits are re-emitted in the driver. An actor that dies raises
:class:`~cvxdp.errors.BackendError` naming the agents it held, the method and the round.

Before anything starts, the backend checks what would otherwise fail late or hang: a cluster ``address`` must
answer within ``connect_timeout`` seconds (Ray itself retries an address where nothing listens forever), and every
agent must pickle (an agent holding, e.g., a lock or an open file is refused naming the agent and the attribute,
before any actor starts).

Below a work threshold the backend runs the nodes serially in the driver instead (``min_variables``: the nodes'
public work estimates, their numbers of variables, summed): Ray's transport costs a few milliseconds per round,
more than two workers save on small agents. It says so in a log line and in the progress line; the numbers are
the same either way.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import (
    BackendError,
    InvalidParameterError,
    OptionalDependencyError,
    check_float,
    check_int,
    fail,
)
from .backends import Backend, NodeSpec, SerialBackend, balanced_groups, method_name

log = logging.getLogger(__name__)

#: Default of :class:`RayBackend`'s ``min_variables`` (the environment variable ``CVXDP_RAY_MIN_VARIABLES``
#: overrides it). Measured (docs/measured.md): Ray's transport costs ~5 ms per round and power zones take
#: ~15-20 us per variable and round serially, so two actors save more than that from about a thousand variables.
MIN_VARIABLES = 1_000
MIN_VARIABLES_ENV = "CVXDP_RAY_MIN_VARIABLES"

try:  # Ray's own (vendored) cloudpickle: present wherever Ray is
    from ray import cloudpickle
except ImportError:  # pragma: no cover - RayBackend() then raises OptionalDependencyError
    cloudpickle = None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise OptionalDependencyError("The 'ray' backend needs the optional extra: pip install 'cvxdp[ray]'.") \
            from exc
    return ray


def _probe(address: str, timeout: float) -> None:
    """Raise :class:`BackendError` naming ``address`` unless its Ray head accepts a TCP connection within
    ``timeout`` seconds. ``"auto"`` is resolved as Ray resolves it (``RAY_ADDRESS``, then the last ``ray start``);
    when nothing is found Ray's own error follows (it is immediate)."""
    target = address
    if target == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address  # optional: a Ray internal

            target = canonicalize_bootstrap_address("auto") or ""
        except Exception:  # noqa: BLE001 - internal API moved or nothing to resolve: Ray reports it
            return
        if not target:
            return
    hostport = target.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise BackendError(f"Could not join the Ray cluster at {address!r}: expected 'host:port', 'ray://host:port' "
                           "or 'auto'.")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise BackendError(f"Could not join the Ray cluster at {address!r}: nothing answered at {host} port {port} "
                           f"within {timeout:g} s ({type(exc).__name__}: {exc}). Start the cluster (ray start "
                           "--head) or correct the address; without an address cvxdp starts a local Ray.") from None


def _unpicklable_part(obj: Any, path: str, depth: int = 4) -> tuple[str, Any, BaseException] | None:
    """The deepest attribute path under ``obj`` that cannot be pickled, with that object and its error; ``None`` if
    ``obj`` pickles.
    Looks through instance attributes, dict values and list/tuple items, ``depth`` levels down."""
    try:
        cloudpickle.dumps(obj)
        return None
    except Exception as exc:  # noqa: BLE001 - any pickling failure
        error: BaseException = exc
    if depth > 0:
        if isinstance(obj, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple)):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
        else:
            state = getattr(obj, "__dict__", None)
            children = [(f"{path}.{k}", v) for k, v in state.items()] if isinstance(state, dict) else []
        for child_path, child in children:
            found = _unpicklable_part(child, child_path, depth - 1)
            if found is not None:
                return found
    return path, obj, error


def _dump_specs(items: list[tuple], names: Sequence[str], blocks: list[list[int]]) -> list[bytes]:
    """One cloudpickle blob per actor block; an item that cannot be pickled is refused naming its agent and the
    attribute at fault (nothing has been sent yet)."""
    try:
        return [cloudpickle.dumps([items[i] for i in block]) for block in blocks]
    except Exception:  # noqa: BLE001 - find which agent, and which part of it
        pass
    for name, (spec, agent, seed) in zip(names, items):
        for what, obj in (("agent", agent), ("node spec", spec), ("seed", seed)):
            found = _unpicklable_part(obj, what)
            if found is not None:
                where, part, exc = found
                raise BackendError(
                    f"{'Agent' if what == 'agent' else f'The {what} of agent'} {name!r} cannot be sent to a Ray "
                    f"actor: {where} ({type(part).__name__}) "
                    f"cannot be pickled ({type(exc).__name__}: {exc}). Keep only picklable data on the agent (arrays, "
                    "numbers, CVXPY expressions), or build the resource inside the agent when it is used; no actor "
                    "was started.", agents=(name,), method="build")
    raise BackendError("The node specs cannot be pickled for the Ray actors.", method="build")  # pragma: no cover


class NodeHost:
    """The body of one Ray actor: builds its share of the nodes and calls methods on them in order.

    Every method takes and returns cloudpickle bytes. A reply is ``("ok", results, warnings)`` or
    ``("error", position, exception, remote traceback, warnings)`` (position: the failing node in this actor).
    """

    def __init__(self) -> None:
        self.nodes: list[Any] = []

    def build(self, blob: bytes) -> bytes:
        specs = _loads(blob, "the node specs (agents, algorithm, seeds)")
        if isinstance(specs, bytes):
            return specs
        return self._run(lambda item: item[0].make(item[1], item[2]), specs, into_nodes=True)

    def call(self, method: str, blob: bytes | None) -> bytes:
        args = _loads(blob, f"the arguments of {method!r}") if blob is not None else [()] * len(self.nodes)
        if isinstance(args, bytes):
            return args
        return self._run(lambda pair: getattr(pair[0], method)(*pair[1]), list(zip(self.nodes, args)))

    def reset(self) -> None:
        """Drop the nodes (an actor kept for the next run holds no agent data in between)."""
        self.nodes = []

    def _run(self, fn, items: list, *, into_nodes: bool = False) -> bytes:
        results = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for k, item in enumerate(items):
                try:
                    results.append(fn(item))
                except Exception as exc:  # noqa: BLE001 - shipped to the driver and raised there
                    return _dump(("error", k, exc, traceback.format_exc(), _warnings(caught)))
        if into_nodes:
            self.nodes = results
            results = [None] * len(results)
        return _dump(("ok", results, _warnings(caught)))


def _loads(blob: bytes, what: str) -> Any:
    """Unpickle inside the actor; on failure, a pickled error reply (bytes) saying what could not travel."""
    try:
        return cloudpickle.loads(blob)
    except Exception as exc:  # noqa: BLE001 - e.g. a function of a module the Ray workers cannot import
        error = BackendError(f"A Ray actor could not unpickle {what}: {type(exc).__name__}: {exc}. Everything a "
                             "node is built from must be importable on the Ray workers (an installed package) "
                             "or defined where cloudpickle ships it by value.")
        return _dump(("error", 0, error, traceback.format_exc(), []))


def _warnings(caught: list) -> list[tuple[type, str]]:
    return [(w.category, str(w.message)) for w in caught]


def _dump(payload: tuple) -> bytes:
    """Pickle a reply; an exception that cannot travel is replaced by a BackendError quoting it."""
    try:
        blob = cloudpickle.dumps(payload)
        if payload[0] == "error":
            cloudpickle.loads(blob)  # an exception class whose __init__ needs other arguments fails here
        return blob
    except Exception:  # noqa: BLE001 - the exception itself cannot be pickled
        _, k, exc, tb, caught = payload
        stand_in = BackendError(f"{type(exc).__name__}: {exc}")
        return cloudpickle.dumps(("error", k, stand_in, tb, caught))


class RayBackend(Backend):
    """Runs the nodes in Ray actors (``backend="ray"``; needs ``pip install 'cvxdp[ray]'``).

    Parameters
    ----------
    num_cpus : int, optional
        CPUs of the local Ray instance started when Ray is not running yet (default: all of this machine's).
        Ignored when Ray is already initialised or ``address`` is given.
    address : str, optional
        Address of an existing Ray cluster to join (e.g. ``"ray://head:10001"`` or ``"auto"``); default: a
        new local instance (or the Ray this process already initialised).
    nodes_per_actor : int, optional
        Nodes per actor (contiguous blocks, in node order). Default: one actor per CPU of the cluster (at most
        one per node), the nodes split into groups of about equal work (each node's public
        :attr:`~cvxdp.run.backends.NodeSpec.work`, the agent's number of variables;
        :func:`~cvxdp.run.backends.balanced_groups`: not contiguous; contiguous blocks of equal counts when the
        work is equal).
    keep_actors : bool, default False
        Keep the actors (emptied of their nodes) when a run ends and reuse them for the next run on this
        backend instance, which then skips the start of the worker processes (seconds each; useful for many
        short runs). :meth:`shutdown` ends them. Default: :meth:`close` kills them.
    connect_timeout : float, default 10.0
        Seconds to wait for the head at ``address`` to accept a connection before raising
        :class:`~cvxdp.errors.BackendError` naming the address (Ray alone would retry forever).
    min_variables : int, optional
        Run serially in this process (no actor; Ray not started or joined) when the nodes' numbers of variables
        (their public :attr:`~cvxdp.run.backends.NodeSpec.work` estimates) sum to less than this: Ray's
        transport (~5 ms per round) would cost more than the actors save. A log line (logger ``cvxdp.run.ray``,
        level INFO) and the progress line say so; the numbers are the same either way. ``0`` always uses Ray.
        Default: the environment variable ``CVXDP_RAY_MIN_VARIABLES`` if set, else :data:`MIN_VARIABLES`
        (1,000). Only a simulation (agents given) runs serially; a federation's nodes always go to actors.

    Notes
    -----
    Same seeds give bit-identical results to :class:`~cvxdp.run.backends.SerialBackend`: every random generator
    lives in its node, and every node is built afresh from its spec at each :meth:`start`. :meth:`close`
    kills the actors (unless ``keep_actors``) and shuts Ray down only if this backend started it.
    """

    def __init__(self, *, num_cpus: int | None = None, address: str | None = None,
                 nodes_per_actor: int | None = None, keep_actors: bool = False,
                 connect_timeout: float = 10.0, min_variables: int | None = None) -> None:
        self.num_cpus = None if num_cpus is None else check_int(num_cpus, "num_cpus", "RayBackend", 1)
        if address is not None and (not isinstance(address, str) or not address):
            raise fail("address", "RayBackend", "None or a non-empty str (a Ray cluster address)", address)
        self.address = address
        self.nodes_per_actor = None if nodes_per_actor is None else \
            check_int(nodes_per_actor, "nodes_per_actor", "RayBackend", 1)
        if not isinstance(keep_actors, bool):
            raise fail("keep_actors", "RayBackend", "a bool", keep_actors)
        self.keep_actors = keep_actors
        self.connect_timeout = check_float(connect_timeout, "connect_timeout", "RayBackend", 0.0)
        if min_variables is None:
            env = os.environ.get(MIN_VARIABLES_ENV)
            try:
                min_variables = MIN_VARIABLES if env is None else int(env)
                if min_variables < 0:
                    raise ValueError(env)
            except ValueError:
                raise InvalidParameterError(f"The environment variable {MIN_VARIABLES_ENV} (the default of "
                                            f"RayBackend's min_variables) must be an int >= 0. Got {env!r} "
                                            "instead.") from None
        self.min_variables = check_int(min_variables, "min_variables", "RayBackend", 0)
        self._ray = _import_ray()
        self.actors: list[Any] = []
        self._idle: list[Any] = []  # kept actors (keep_actors=True) between runs
        self._broken = False
        self.blocks: list[list[int]] = []
        self.names: list[str] = []
        self._started_ray = False
        self._serial: SerialBackend | None = None  # this run's nodes, when the run is too small for Ray
        self._placement: str | None = None

    @property
    def placement(self) -> str | None:
        """``"serial: N variables < ray min_variables M"`` while this run's nodes run serially, else None."""
        return self._placement

    def _too_small(self, specs: Sequence[NodeSpec]) -> float | None:
        """The nodes' public number of variables in all when Ray would not pay for them (below
        ``min_variables``), else None."""
        total = sum(float(s.work) for s in specs)
        return total if total < self.min_variables else None

    def _unused(self, nodes: int, total: float) -> str:
        """What a run below ``min_variables`` leaves unused (the cluster address, the CPUs asked for), and why."""
        given = ([f"the Ray cluster address {self.address!r}"] if self.address is not None else []) + \
            ([f"the CPUs asked for (num_cpus={self.num_cpus})"] if self.num_cpus is not None else [])
        what = " and ".join(given)
        verb = "is" if self.num_cpus is None else "are"  # the address is, the CPUs are
        return (f"{what[0].upper()}{what[1:]} {verb} not used: this run's {nodes} nodes hold {total:,.0f} variables "
                f"in all, fewer than ray min_variables = {self.min_variables:,}, so they run serially in this process (Ray's "
                "transport, ~5 ms per round, would cost more than its actors save; the numbers are the same either "
                "way). To run on Ray anyway, set ray_min_variables = 0 in [run] (RayBackend(min_variables=0), or "
                f"the environment variable {MIN_VARIABLES_ENV}=0).")

    # ------------------------------------------------------------------ lifecycle
    def _ensure_ray(self) -> None:
        ray = self._ray
        if ray.is_initialized():
            return
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR,
                                   "log_to_driver": False}
        try:
            if self.address is None:  # always a fresh local instance, never a cluster found on disk
                ray.init(address="local", num_cpus=self.num_cpus, **options)
            else:
                _probe(self.address, self.connect_timeout)
                ray.init(address=self.address, **options)
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001 - unreachable address, no resources, ...
            where = f"join the Ray cluster at {self.address!r}" if self.address else "start a local Ray instance"
            raise BackendError(f"Could not {where}: {type(exc).__name__}: {exc}") from None
        self._started_ray = True

    def _layout(self, n: int, work: Sequence[float] | None = None) -> list[list[int]]:
        """Node positions, one list per actor: contiguous blocks of ``nodes_per_actor``, or one group per CPU
        balanced by the nodes' public ``work`` estimates (:func:`~cvxdp.run.backends.balanced_groups`)."""
        if n == 0:
            return []
        if self.nodes_per_actor is not None:
            size = self.nodes_per_actor
            return [list(range(i, min(i + size, n))) for i in range(0, n, size)]
        cpus = max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return balanced_groups([1.0] * n if work is None else list(work), cpus)

    def start(self, specs: Sequence[NodeSpec], agents: Sequence[Any] | None, seeds: Sequence[Any] | None) -> None:
        self.close()
        total = self._too_small(specs) if agents is not None else None
        if total is not None:  # the same nodes and seeds as on actors: the same numbers, without Ray's transport
            log.info(f"ray: {len(specs)} nodes, {total:,.0f} variables in all < min_variables={self.min_variables:,}: "
                     "running serial (Ray's overhead, ~5 ms per round, would dominate; RayBackend(min_variables=0) "
                     "forces Ray)")
            self._placement = f"serial: {total:,.0f} variables < ray min_variables {self.min_variables:,}"
            if self.address is not None or self.num_cpus is not None:
                warnings.warn(self._unused(len(specs), total), UserWarning, stacklevel=2)
            self.names = [s.name for s in specs]
            self._serial = SerialBackend()
            self._serial.start(specs, agents, seeds)
            return
        ray = self._ray
        if not ray.is_initialized():  # kept actors died with a Ray shut down in between
            self._idle = []
        self._ensure_ray()
        names = [s.name for s in specs]
        blocks = self._layout(len(specs), [s.work for s in specs])
        items = [(spec, None if agents is None else agents[i], None if seeds is None else seeds[i])
                 for i, spec in enumerate(specs)]
        blobs = _dump_specs(items, names, blocks)  # an unpicklable agent is refused before any actor starts
        self.names, self.blocks = names, blocks
        reuse, extra = self._idle[:len(self.blocks)], self._idle[len(self.blocks):]
        self._idle = []
        self._kill(extra)
        # no CPU reservation: actors of another backend (or kept ones) can never leave these pending forever;
        # Ray then runs each actor single-threaded (OMP_NUM_THREADS=1) and SPREAD places them across nodes
        host = ray.remote(NodeHost).options(num_cpus=0, scheduling_strategy="SPREAD", max_restarts=0)
        self.actors = reuse + [host.remote() for _ in range(len(self.blocks) - len(reuse))]
        self._gather("build", [a.build.remote(b) for a, b in zip(self.actors, blobs)], None)

    def call(self, method: Callable[..., Any], args: Sequence[tuple] | None = None, *,
             round: int | None = None) -> list[Any]:
        if self._serial is not None:
            return self._serial.call(method, args, round=round)
        method = method_name(method)
        if not self.actors:
            raise BackendError(f"RayBackend.call({method!r}) before start() (or after close()).", method=method,
                               round=round)
        if args is not None and len(args) != len(self.names):
            raise fail("args", "RayBackend.call", f"one tuple per node ({len(self.names)})", f"{len(args)} tuples")
        refs = [actor.call.remote(method, None if args is None else cloudpickle.dumps([args[i] for i in block]))
                for actor, block in zip(self.actors, self.blocks)]
        return self._gather(method, refs, round)

    def _gather(self, method: str, refs: list, round: int | None) -> list[Any]:
        """Wait for every actor; raise for dead actors first, then the first node error in node order."""
        ray = self._ray
        replies, dead = [], []
        for k, ref in enumerate(refs):
            try:
                replies.append(cloudpickle.loads(ray.get(ref)))
            except ray.exceptions.RayError as exc:  # died, crashed, lost, or could not run the call at all
                replies.append(None)
                dead.append((k, exc))
        if dead:
            self._broken = True  # close() then kills every actor of this run, kept or not
            raise self._lost(method, round, dead)
        results: list[Any] = [None] * len(self.names)
        failure = None
        for block, reply in zip(self.blocks, replies):
            for category, message in reply[-1]:
                warnings.warn(message, category, stacklevel=4)
            if reply[0] == "ok":
                for i, value in zip(block, reply[1]):
                    results[i] = value
            elif failure is None:
                failure = reply
        if failure is not None:
            _, _, exc, tb, _ = failure
            if hasattr(exc, "add_note"):  # Python >= 3.11: the remote traceback, without changing str(exc)
                exc.add_note("Raised inside a Ray actor:\n" + tb)
            raise exc
        return results

    def _lost(self, method: str, round: int | None, dead: list) -> BackendError:
        agents = tuple(self.names[i] for k, _ in dead for i in self.blocks[k])
        when = f"in round {round}" if round is not None else ("while building the nodes" if method == "build"
                                                              else "outside the round loop")
        first = str(dead[0][1]).strip().splitlines()[0] if str(dead[0][1]).strip() else type(dead[0][1]).__name__
        return BackendError(
            f"Ray actor(s) holding agent(s) {', '.join(map(repr, agents))} died {when} (method {method!r}): "
            f"{type(dead[0][1]).__name__}: {first}. The last checkpoint is intact: run again with the same "
            "checkpoint= (or the same cvxdp command) to resume.", agents=agents, method=method, round=round)

    def close(self) -> None:
        """End the run: kill its actors (keep them, emptied, with ``keep_actors``); shut down a Ray this
        backend started (not with ``keep_actors``: then :meth:`shutdown` does)."""
        if self._serial is not None:
            self._serial.close()
        self._serial, self._placement = None, None
        if self.keep_actors and not self._broken and self._ray.is_initialized():
            for actor in self.actors:
                actor.reset.remote()
            self._idle = self.actors + self._idle
        else:
            self._kill(self.actors)
        self.actors, self.blocks, self._broken = [], [], False
        if not self.keep_actors:
            self.shutdown()

    def shutdown(self) -> None:
        """Kill every actor of this backend, kept ones too, and shut down a Ray this backend started."""
        self._kill(self.actors + self._idle)
        self.actors, self.blocks, self._idle = [], [], []
        if self._started_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._started_ray = False

    def _kill(self, actors: list) -> None:
        for actor in actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead, or Ray already shut down
                pass

    @property
    def workers(self) -> int:
        """Number of actors."""
        return len(self.actors)


