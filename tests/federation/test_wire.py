"""What crosses the wire: plain values and numpy arrays in a versioned envelope, read back without ever running code,
and checked against declared schemas (cvxdp/federation/wire.py, schema.py, messages.py)."""

from __future__ import annotations

import json
import os
import pickle
import struct

import numpy as np
import pytest

from cvxdp.errors import BackendError, PartyRefusedError
from cvxdp.federation import messages, wire
from cvxdp.federation.wire import (
    Array,
    Either,
    Float,
    Int,
    MapOf,
    Plain,
    SchemaError,
    Str,
    Struct,
    WireError,
    decode,
    encode,
)


class _Marker:
    """A pickle that, when unpickled, creates a file (what a crafted message did to a party's pickle reader)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_message_round_trips_with_its_dtypes_shapes_and_bits():
    message = {"round": 3, "eta": 0.1 + 0.2, "none": None, "flag": True, "name": "zone1",
               "bw": np.array([1e-300, -0.0, np.pi]), "f32": np.ones((2, 3), dtype=np.float32),
               "idx": np.arange(4), "mask": np.array([True, False]), "nested": [{"x": np.zeros(0)}, [1, 2.5]]}
    back = decode(encode(message))
    assert back["round"] == 3 and back["eta"] == 0.1 + 0.2 and back["none"] is None and back["flag"] is True
    for key in ("bw", "f32", "idx", "mask"):
        assert back[key].dtype == message[key].dtype and back[key].shape == message[key].shape
        assert back[key].tobytes() == message[key].tobytes()
    assert back["nested"][0]["x"].shape == (0,) and back["nested"][1] == [1, 2.5]
    assert encode(back) == encode(message)  # canonical: a digest identifies a request


def test_crafted_pickle_bytes_are_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    crafted = pickle.dumps(_Marker(marker))
    with pytest.raises(WireError, match="not a cvxdp message"):
        decode(crafted)
    assert not marker.exists()
    # the broken twin: a reader that unpickles runs the peer's command
    pickle.loads(crafted)
    assert marker.exists()


@pytest.mark.parametrize(("data", "match"), [
    (b"", "too short"),
    (b"CVXDP\x02\x00\x00\x00\x02{}", "wire version 2"),
    (b"CVXDP\x01\x00\x00\x00\x40{}", "truncated header"),
    (b"CVXDP\x01\x00\x00\x00\x05{oops", "unreadable message header"),
    (b"CVXDP\x01\x00\x00\x00\x17" + b'{"body":1,"arrays":[],"x":1}'[:23], "unreadable message"),
])
def test_garbage_is_refused_with_one_line(data, match):
    with pytest.raises(WireError, match=match):
        decode(data)


def _raw(header: dict, buffers: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack(">5sBI", b"CVXDP", 1, len(text)) + text + buffers


@pytest.mark.parametrize(("header", "buffers", "match"), [
    ({"body": {"$array": 0}, "arrays": [{"dtype": "|O", "shape": [1], "offset": 0}]}, b"\0" * 8, "dtype '|O'"),
    ({"body": {"$array": 0}, "arrays": [{"dtype": "<f8", "shape": [4], "offset": 0}]}, b"\0" * 8, "runs past"),
    ({"body": {"$array": 1}, "arrays": [{"dtype": "<f8", "shape": [1], "offset": 0}]}, b"\0" * 8, "does not carry"),
    ({"body": [{"$array": 0}, {"$array": 1}], "arrays": [{"dtype": "<f8", "shape": [1], "offset": 0},
                                                         {"dtype": "<f8", "shape": [1], "offset": 0}]},
     b"\0" * 16, "must start at byte 8"),
    ({"body": {"$array": 0}, "arrays": [{"dtype": "<f8", "shape": [1], "offset": 0}]}, b"\0" * 16, "declares 8"),
    ({"body": {"a": 1}, "arrays": [{"dtype": "<f8", "shape": [-1], "offset": 0}]}, b"", "invalid shape"),
])
def test_arrays_that_lie_about_their_bytes_are_refused(header, buffers, match):
    with pytest.raises(WireError, match=match):
        decode(_raw(header, buffers))


def test_duplicate_keys_deep_nesting_and_oversized_messages_are_refused():
    dup = b'{"body":{"a":1,"a":2},"arrays":[]}'
    with pytest.raises(WireError, match="appears twice"):
        decode(struct.pack(">5sBI", b"CVXDP", 1, len(dup)) + dup)
    deep: list = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(WireError, match="deeper"):
        encode(deep)
    with pytest.raises(WireError, match="larger than"):
        decode(encode({"x": np.zeros(1000)}), max_bytes=1024)


def test_only_plain_values_and_numeric_arrays_can_be_sent():
    with pytest.raises(WireError, match="plain values"):
        encode({"f": os.system})
    with pytest.raises(WireError, match="dict keys are strings"):
        encode({1: 2})
    with pytest.raises(WireError, match="dtype object"):
        encode(np.array([os.system], dtype=object))


def test_schemas_name_the_field_at_fault():
    spec = Struct({"round": Int(1, 10), "bw": Array((3,)), "rho": Either((Float(0.0, 9.0, True), Array((3,)))),
                   "agents": MapOf(Struct({"index": Int()})), "table": Plain()})
    good = {"round": 2, "bw": np.zeros(3), "rho": 1.0, "agents": {"a": {"index": 0}}, "table": {"x": [1, "y"]}}
    assert spec.check(good)["round"] == 2
    bad = [({**good, "bw": np.zeros(4)}, "bw", "shape"), ({**good, "bw": np.array([0, np.nan, 1.0])}, "bw", "finite"),
           ({**good, "bw": np.zeros(3, dtype=np.float32)}, "bw", "float64"), ({**good, "round": 11}, "round", "int"),
           ({**good, "rho": -1.0}, "rho", "float"), ({**good, "agents": {"a": {"index": 0, "build": "os.system"}}},
                                                      "agents.a.build", "unknown field"),
           ({**good, "extra": 1}, "extra", "unknown field"), ({k: v for k, v in good.items() if k != "bw"}, "bw",
                                                              "missing"),
           ({**good, "table": {"x": np.zeros(2)}}, "table.x", "plain value"),
           ({**good, "table": {"x": float("inf")}}, "table.x", "finite")]
    for value, field, what in bad:
        with pytest.raises(SchemaError, match=what) as caught:
            spec.check(value)
        assert caught.value.field == field
    with pytest.raises(SchemaError):
        Str().check("../../etc")  # a name holds plain characters only


def test_a_request_must_be_a_cvxdp_request_of_a_known_kind():
    kind, body = messages.read_request(messages.request("hello", {}), max_bytes=1 << 20)
    assert (kind, body) == ("hello", {})
    with pytest.raises(SchemaError, match="kind"):
        messages.read_request(wire.encode({"protocol": messages.PROTOCOL, "kind": "exec", "body": {}}), max_bytes=1 << 20)
    with pytest.raises(SchemaError, match="protocol"):
        messages.read_request(wire.encode({"protocol": "other/9", "kind": "hello", "body": {}}), max_bytes=1 << 20)
    with pytest.raises(SchemaError, match="token"):
        messages.read_request(messages.request("release", {"token": "../outside", "owner": "0" * 32}),
                              max_bytes=1 << 20)


def test_the_coordinator_reads_a_partys_reply_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(BackendError, match="answered garbage in round 4"):
        messages.read_reply("zone2", pickle.dumps(_Marker(marker)), 4)
    assert not marker.exists()
    refusal = messages.refusal(PartyRefusedError("no", party="zone2", round=4, reason="plan", field="plan.scale"))
    with pytest.raises(PartyRefusedError) as caught:
        messages.read_reply("zone2", refusal, 4)
    assert (caught.value.party, caught.value.round, caught.value.reason, caught.value.field) == \
        ("zone2", 4, "plan", "plan.scale")
    with pytest.raises(BackendError, match=r"^Party 'zone2' failed in round 4: RuntimeError: x$"):
        messages.read_reply("zone2", messages.failure("RuntimeError: x"), 4)
