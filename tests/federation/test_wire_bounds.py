"""The wire's limits at their edges, and the schemas' refusals of values of the wrong type (issue 52's mutation
testing of cvxdp/federation/wire.py: each test kills mutants that the round-trip tests let survive)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cvxdp.federation import wire
from cvxdp.federation.wire import (
    Array,
    Bool,
    Either,
    Float,
    Int,
    ListOf,
    MapOf,
    Plain,
    SchemaError,
    Str,
    WireError,
)


def _nested(depth: int) -> list:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value  # the innermost value sits at ``depth``


def test_a_message_nests_exactly_max_depth_levels_and_no_more():
    assert wire.MAX_DEPTH == 16
    assert wire.decode(wire.encode(_nested(16))) == _nested(16)
    with pytest.raises(WireError, match="nests deeper than 16 levels"):
        wire.encode(_nested(17))


def test_the_decoder_counts_depth_on_its_own(monkeypatch):
    """A peer's encoder need not be ours: bytes nesting 17 levels are refused by the decoder itself."""
    monkeypatch.setattr(wire, "MAX_DEPTH", 17)
    deep = wire.encode(_nested(17))
    monkeypatch.undo()
    with pytest.raises(WireError, match="nests deeper than 16 levels"):
        wire.decode(deep)


def test_an_int_is_an_int_in_its_bounds():
    spec = Int()
    assert spec.check(2 ** 62) == 2 ** 62
    for bad in (2 ** 62 + 1, -1, True, "3", 3.0, None):
        with pytest.raises(SchemaError, match="expected an int in"):
            spec.check(bad, "n")


def test_a_float_with_one_bound_says_both():
    assert Float().describe() == "a finite float"
    assert Float(lo=0.0).describe() == "a float in [0, inf]"
    assert Float(hi=1.0).describe() == "a float in [-inf, 1]"
    assert Float(lo=0.0, open_low=True).describe() == "a float in (0, inf]"


def test_either_tries_every_spec_in_turn():
    spec = Either((Int(), Str(pattern="[a-z]+"), Float()))
    assert spec.check(2.5) == 2.5  # the third spec, after two refusals
    assert spec.check("abc") == "abc"
    with pytest.raises(SchemaError):
        spec.check([1])


def test_an_array_spec_names_its_free_dimensions():
    assert Array((None, 3)).describe() == "a float64 array of shape (any, 3)"
    assert Array((5,), dtype="int64").describe() == "a int64 array of shape (5,)"


@pytest.mark.parametrize("spec", [MapOf(Str(pattern="[a-z]+"), Int()), ListOf(Int())])
@pytest.mark.parametrize("value", ["abc", b"abc", (1, 2)])
def test_a_table_or_list_spec_refuses_other_containers_by_name(spec, value):
    with pytest.raises(SchemaError):
        spec.check(value, "field")


def test_plain_values_count_up_to_their_limit():
    spec = Plain(max_items=5)
    assert spec.check({"a": 1, "b": [2, 3]}) == {"a": 1, "b": [2, 3]}  # 5 values: the table, 1, the list, 2, 3
    with pytest.raises(SchemaError, match="at most 5 plain values"):
        spec.check({"a": 1, "b": [2, 3, 4]})
    assert Plain(max_items=1).check({}) == {}  # one value: the empty table


@pytest.mark.parametrize("spec", [Int(), Float(), Bool(), Str(pattern="x"), Array((2,)), ListOf(Int()), MapOf(Str(pattern="x"), Int()),
                                  Plain(), Either((Int(),))])
def test_a_schema_cannot_be_changed_once_made(spec):
    """The protocol's schemas are module-level values shared by every request: none may be altered."""
    for field in [f.name for f in dataclasses.fields(spec)] + ["extra"]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(spec, field, None)


def test_arrays_round_trip_through_the_bound_checks():
    value = np.arange(6, dtype=float).reshape(2, 3)
    assert np.array_equal(Array((None, 3)).check(wire.decode(wire.encode(value))), value)
