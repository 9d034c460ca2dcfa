"""The federation's protocol: each request and reply as plain values and arrays, and its declared schema.

Requests (coordinator -> party), each ``{"protocol", "kind", "body"}``:

* ``hello`` — ``{}``; the reply is the party's public introduction (name, declarations, policy, budget);
* ``start`` — the run: its token, the algorithm's table, the coordinator's privacy table and accountant (checked
  against the party's own policy), the solvers, the target delta, the agents' order and each agent's public extras
  (index; a graph node's degree; a vertical party's ``b1`` and the number of parties); the reply holds the owner
  nonce and each node's declaration;
* ``step`` — token, owner, round and one family message per agent (:func:`to_wire` / :func:`from_wire`); the reply
  holds each agent's release;
* ``finish`` — token, owner and the public solution; ``release`` — token and owner (a coordinator giving the run up).

Replies: ``{"ok": true, "value": ...}``, ``{"ok": false, "refused": {message, party, round, reason, field}}`` or
``{"ok": false, "error": text}``. A noise plan travels as its numbers (a cross-check: the party draws its own).
Nothing here is code: :mod:`.wire` encodes the values, :mod:`.schema` checks them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from ..errors import BackendError, CvxdpError, PartyRefusedError
from ..families.consensus.node import ConsensusNode, RoundMessage
from ..families.graph.mechanism import check_bound_condition, erm_constants, penalty_schedule
from ..families.graph.node import GraphMessage, GraphNode
from ..families.sharing.node import SharingMessage, SharingNode
from ..families.sharing.params import as_mechanism
from ..model import DEFAULT_SOLVERS, Curvature, Node, Release
from ..privacy import ACCOUNTANTS, NOISE_SOURCES, NoisePlan
from .wire import (
    Array,
    Bool,
    Either,
    Float,
    Int,
    ListOf,
    MapOf,
    Optional,
    Plain,
    SchemaError,
    Str,
    Struct,
    Table,
    Text,
    WireError,
    decode,
    encode,
)

PROTOCOL = "cvxdp-federation/1"
KINDS = ("hello", "start", "step", "finish", "release")
TOKEN = Str(pattern=r"[0-9a-f]{16}")
OWNER = Str(pattern=r"[0-9a-f]{32}")
SOLVERS = ("CLARABEL", "ECOS", "OSQP", "SCS")
ROUND = Int(1, 10 ** 9)
POSITIVE = Float(0.0, math.inf, open_low=True)

#: what a coordinator may send in each request (the per-agent family messages are checked by the node's own schema)
REQUESTS: dict[str, Struct] = {
    "hello": Struct({}),
    "start": Struct({"token": TOKEN, "algorithm": Plain(), "privacy": Plain(), "accountant": Str(ACCOUNTANTS),
                     "solvers": ListOf(Str(SOLVERS), max_len=len(SOLVERS)), "target_delta": Float(0.0, 0.5, True),
                     "names": ListOf(Str()),
                     "agents": MapOf(Struct({"index": Int(0, 10 ** 7)},
                                            optional={"degree": Int(1, 10 ** 7), "b1": POSITIVE,
                                                      "parties": Int(1, 10 ** 7)}))}),
    "step": Struct({"token": TOKEN, "owner": OWNER, "round": ROUND, "messages": MapOf(Table())}),
    "finish": Struct({"token": TOKEN, "owner": OWNER, "solution": MapOf(Array((None,)), max_len=10_000)}),
    "release": Struct({"token": TOKEN, "owner": OWNER}),
}

PLAN = Struct({"noise": Str(("laplace", "gaussian")), "noise_source": Str(NOISE_SOURCES), "scale": POSITIVE,
               "sensitivity": POSITIVE, "epsilon": POSITIVE, "delta": Float(0.0, 1.0), "sampling_rate":
               Float(0.0, 1.0, open_low=True), "clip_norm": Optional(POSITIVE)}, optional={"relation": Text()})


# ---------------------------------------------------------------- envelopes
def request(kind: str, body: Mapping[str, Any]) -> bytes:
    """The bytes of one request."""
    return encode({"protocol": PROTOCOL, "kind": kind, "body": dict(body)})


def read_request(data: bytes, *, max_bytes: int) -> tuple[str, dict[str, Any]]:
    """``(kind, body)`` of a request's bytes, the body checked against :data:`REQUESTS` (a :class:`SchemaError` or
    :class:`WireError` otherwise)."""
    message = decode(data, max_bytes=max_bytes)
    if not isinstance(message, dict) or set(message) != {"protocol", "kind", "body"}:
        raise SchemaError("", "not a cvxdp request (expected protocol, kind and body)")
    Str((PROTOCOL,)).check(message["protocol"], "protocol")
    kind = Str(KINDS).check(message["kind"], "kind")
    return kind, REQUESTS[kind].check(message["body"], "")


def reply(value: Any) -> bytes:
    """The bytes of an answer."""
    return encode({"protocol": PROTOCOL, "ok": True, "value": value})


def refusal(exc: PartyRefusedError) -> bytes:
    """The bytes of a refusal (its one line, party, round, reason and field)."""
    return encode({"protocol": PROTOCOL, "ok": False, "refused": exc.to_dict()})


def failure(text: str) -> bytes:
    """The bytes of a failure that is not a refusal (one line)."""
    return encode({"protocol": PROTOCOL, "ok": False, "error": str(text)[:2000]})


REFUSED = Struct({"message": Text(), "party": Optional(Text(256)), "round": Optional(Int(0, 10 ** 9)),
                  "reason": Str(), "field": Optional(Text(256))})


def read_reply(party: str, data: bytes, round: int | None) -> Any:
    """A party's reply read back: its value, or its refusal (raised as :class:`PartyRefusedError`) or failure (a
    :class:`BackendError` naming the party and the round)."""
    try:
        message = decode(data)
        if not isinstance(message, dict) or message.get("protocol") != PROTOCOL or not isinstance(message.get("ok"),
                                                                                                   bool):
            raise SchemaError("", "not a cvxdp reply")
        if message["ok"]:
            return message.get("value")
        if "refused" in message:
            r = REFUSED.check(message["refused"], "refused")
            raise PartyRefusedError(r["message"], party=r["party"] or party, round=r["round"], reason=r["reason"],
                                    field=r["field"])
        error = Text().check(message.get("error", ""), "error")
    except WireError as exc:
        raise BackendError(f"Party {party!r} answered garbage in round {round}: {exc}.", agents=(party,),
                           round=round) from None
    raise BackendError(f"Party {party!r} failed in round {round}: {error}", agents=(party,), round=round)


# ---------------------------------------------------------------- family messages
def plan_to_wire(plan: NoisePlan | None) -> dict[str, Any] | None:
    """A noise plan's numbers (None stays None)."""
    if plan is None:
        return None
    return {"noise": plan.noise, "noise_source": plan.noise_source, "scale": plan.scale,
            "sensitivity": plan.sensitivity, "epsilon": plan.epsilon, "delta": plan.delta,
            "sampling_rate": plan.sampling_rate, "clip_norm": plan.clip_norm, "relation": plan.relation}


def plan_from_wire(value: Any, path: str) -> NoisePlan | None:
    """A plan's numbers checked and rebuilt (its own validation refuses inconsistent ones)."""
    d = Optional(PLAN).check(value, path)
    if d is None:
        return None
    try:
        return NoisePlan(**{k: d[k] for k in ("noise", "scale", "sensitivity", "epsilon", "delta", "noise_source",
                                               "sampling_rate", "clip_norm")}, relation=d.get("relation", ""))
    except CvxdpError as exc:
        raise SchemaError(path, str(exc)) from None


def to_wire(message: Any) -> dict[str, Any]:
    """A family's round message as plain values and arrays (what the coordinator sends)."""
    if isinstance(message, RoundMessage):
        return {"round": message.round, "bw": message.bw, "rho": message.rho, "eta": message.eta,
                "plan": plan_to_wire(message.plan), "polish": message.polish, "keep_polish": message.keep_polish}
    if isinstance(message, GraphMessage):
        return {f.name: getattr(message, f.name) for f in fields(message)}
    if isinstance(message, SharingMessage):
        return {"round": message.round, "residual": message.residual, "y": message.y,
                "plan": plan_to_wire(message.plan)}
    raise CvxdpError(f"No wire form for a {type(message).__name__}.")


def _writable(value: Any) -> Any:
    return np.array(value) if isinstance(value, np.ndarray) else value


def message_schema(node: Any) -> Struct:
    """What node ``node`` accepts as its round message: its family's fields, with this node's shapes."""
    if isinstance(node, ConsensusNode):
        s = (int(node.sidx.size),)
        return Struct({"round": ROUND, "bw": Array(s), "rho": Either((POSITIVE, Array(s))), "eta": Float(0.0),
                       "plan": Optional(Plain()), "polish": Optional(Array(s)), "keep_polish": Bool()})
    if isinstance(node, GraphNode):
        return Struct({"round": ROUND, "neighbours": Array((node.V, node.d)), "dual_step": Optional(Float()),
                       "eta": POSITIVE, "exact": Bool(), "alpha": Optional(POSITIVE)})
    if isinstance(node, SharingNode):
        n = (int(node.party.n_samples),)
        return Struct({"round": ROUND, "residual": Array(n), "y": Array(n), "plan": Optional(Plain())})
    raise CvxdpError(f"No wire form for a {type(node).__name__}.")


def from_wire(node: Any, value: Any, path: str) -> Any:
    """Node ``node``'s round message from a coordinator's plain values, checked against :func:`message_schema`
    (a :class:`SchemaError` naming the field otherwise)."""
    d = {k: _writable(v) for k, v in message_schema(node).check(value, path).items()}
    if isinstance(node, ConsensusNode):
        if isinstance(d["rho"], np.ndarray) and not np.all(d["rho"] > 0):  # a float's schema checks it already
            raise SchemaError(f"{path}.rho", "expected positive values")
        return RoundMessage(round=d["round"], bw=d["bw"], rho=d["rho"], eta=d["eta"],
                            plan=plan_from_wire(d["plan"], f"{path}.plan"), polish=d["polish"],
                            keep_polish=d["keep_polish"])
    if isinstance(node, GraphNode):
        return GraphMessage(**d)
    return SharingMessage(round=d["round"], residual=d["residual"], y=d["y"],
                          plan=plan_from_wire(d["plan"], f"{path}.plan"))


# ---------------------------------------------------------------- a start's nodes
def build_node(algorithm: Any, agent: Any, info: Mapping[str, Any], start: Mapping[str, Any],
               seed: np.random.SeedSequence, mechanism: Any, accountant: str) -> Node:
    """The node a party builds for ``agent`` from a coordinator's start: the checked ``algorithm``, the party's own
    ``mechanism`` and ``accountant``, its own entropy (``seed``) and the run's public values (``info``: the agent's
    index, a graph node's degree, a vertical party's ``b1`` and number of parties). A consensus node resolves the
    algorithm with the mechanism's epsilon; a private graph node checks the papers' parameter condition with its own
    ERM constants and degree. A value a family needs and the start lacks is a :class:`SchemaError`."""
    family, name = type(algorithm).family, agent.name
    solvers = tuple(start["solvers"]) or DEFAULT_SOLVERS
    if family == "consensus":
        resolved = algorithm.resolved(mechanism.epsilon if mechanism is not None else None)
        return ConsensusNode(agent, seed, resolved, solvers, mechanism, accountant)
    if family == "graph":
        degree = info.get("degree")
        if degree is None:
            raise SchemaError(f"agents.{name}.degree", "missing (a graph node's degree)")
        if mechanism is not None:
            names, index = start["names"], info["index"]
            if not 0 <= index < len(names) or names[index] != name:
                raise SchemaError(f"agents.{name}.index", f"names[{index}] is not {name!r}")
            recycling = algorithm.kind == "radmm"
            weight = (penalty_schedule(algorithm, names)(1) if recycling else algorithm.thetas(names))[index]
            check_bound_condition([erm_constants(agent)], np.array([weight]), np.array([degree]), [name],
                                  weight_name="eta_i(1)" if recycling else "theta", owner=type(algorithm).__name__)
        return GraphNode(agent, seed, algorithm, int(degree), solvers, mechanism)
    if family == "sharing":
        parties, named = info.get("parties"), len(start["names"])  # M enters Lemma 1's sensitivity: fewer, less noise
        if parties is None:
            raise SchemaError(f"agents.{name}.parties", "missing (a sharing party's number of parties)")
        if parties != named:
            raise SchemaError(f"agents.{name}.parties", f"{parties} parties, but the run names {named}")
        return SharingNode(agent, seed, algorithm, solvers, as_mechanism(mechanism), accountant, info.get("b1"),
                           int(parties))
    raise SchemaError("algorithm.name", f"no node for the {family!r} family")


# ---------------------------------------------------------------- declarations and releases
def declaration_to_wire(declared: Mapping[str, Any]) -> dict[str, Any]:
    """A node's declaration (:meth:`cvxdp.model.Node.declare`) as plain values (a curvature bound as a table)."""
    out = dict(declared)
    if isinstance(out.get("curvature"), Curvature):
        out["curvature"] = out["curvature"]._asdict()
    return out


def declaration_from_wire(declared: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`declaration_to_wire` (what the coordinator's family reads)."""
    out = dict(declared)
    if isinstance(out.get("curvature"), dict):
        c = Struct({"value": Optional(Float(0.0, math.inf)), "source": Str(), "quadratic": Bool()}).check(
            out["curvature"], "curvature")
        out["curvature"] = Curvature(**c)
    return out


def release_to_wire(release: Release) -> dict[str, Any]:
    """What one node releases in one round, as plain values and arrays."""
    return {"round": release.round, "arrays": dict(release.arrays)}


def release_from_wire(agent: str, value: Any, round: int, shapes: Mapping[str, tuple[int, ...]]) -> Release:
    """A party's release checked: the round asked for, exactly the arrays its family releases, float64 and finite,
    of the declared shapes (``shapes``: name -> shape; a name absent from a reply must be optional, None)."""
    if not isinstance(value, dict) or set(value) != {"round", "arrays"} or not isinstance(value["arrays"], dict):
        raise SchemaError(agent, "expected a release (round and arrays)")
    Int(round, round).check(value["round"], f"{agent}.round")
    arrays = value["arrays"]
    unknown = sorted(set(arrays) - set(shapes))
    if unknown:
        raise SchemaError(f"{agent}.arrays.{unknown[0]}", "not an array this family releases")
    out = {}
    for name, shape in shapes.items():
        if name in arrays:
            out[name] = np.array(Array(shape).check(arrays[name], f"{agent}.arrays.{name}"))
    return Release(agent, round, out)


__all__ = ["KINDS", "PROTOCOL", "REQUESTS", "build_node", "declaration_from_wire", "declaration_to_wire", "failure", "from_wire",
           "message_schema", "plan_from_wire", "plan_to_wire", "read_reply", "read_request", "refusal",
           "release_from_wire", "release_to_wire", "reply", "request", "to_wire"]
