"""The flat-struct runs (kmeta.protocol.codec.runs) agree with the interpreted construct everywhere.

The runs are a guess checked element by element; these tests feed them mixed layouts, layouts
they must refuse (long, multi-byte, null, tagged), more layouts than they keep, truncations and
mutations, and require the same values, bytes and errors as the declarative path.
"""

from __future__ import annotations

import gc
import struct
import sys
import uuid
from collections import namedtuple
from typing import Any

import pytest
from construct import ConstructError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.protocol.codec.compiler import Codec, compile_struct
from kmeta.protocol.codec.runs import MAX_LAYOUTS, MAX_LEN, FlatRuns
from kmeta.protocol.codec.types import Int16, Int32, KArray, KString, KStruct, TaggedField
from kmeta.protocol.errors import CorruptMessageError
from kmeta.protocol.messages import leader_and_isr, metadata, update_metadata

Part = namedtuple("Part", ["index", "error", "isr", "replicas", "offline", "note"])
Holder = namedtuple("Holder", ["parts", "tail"])


def holder(flexible: bool, plain: bool = False) -> KStruct:
    """A partition-state-like element: fixed fields, three int32 arrays (one nullable unless
    ``plain``) and, when flexible and not plain, a known tagged field; then an int16 after the
    array. Plain elements are also encoded one pack per element."""
    arr = {"compact": flexible}
    part = KStruct(
        Part,
        [
            ("index", Int32, 0),
            ("error", Int16, 0),
            ("isr", KArray(Int32, **arr), ()),
            ("replicas", KArray(Int32, **arr), ()),
            ("offline", KArray(Int32, nullable=not plain, **arr), ()),
            ("note", None, ""),
        ],
        tagged=[TaggedField(5, "note", 0, KString(compact=True), "")] if flexible and not plain else [],
        flexible=flexible,
    )
    assert part.flat_slots() is not None
    return KStruct(Holder, [("parts", KArray(part, **arr), ()), ("tail", Int16, 0)], flexible=flexible)


HOLDERS = {flexible: holder(flexible) for flexible in (True, False)}
PLAIN = {flexible: holder(flexible, plain=True) for flexible in (True, False)}
CODECS = {flexible: compile_struct(ks, f"holder {flexible}") for flexible, ks in HOLDERS.items()}
PLAIN_CODECS = {flexible: compile_struct(ks, f"plain {flexible}") for flexible, ks in PLAIN.items()}


def encode(codec: Codec, value: Any) -> bytes:
    out = bytearray()
    codec.build_into(value, out)
    return bytes(out)


def decode_both(flexible: bool, data: bytes) -> tuple[Any, Any]:
    """(compiled, interpreted) outcome: the value, or "error"."""
    try:
        fast = CODECS[flexible].decode_from(data)[0]
    except CorruptMessageError:
        fast = "error"
    try:
        slow = HOLDERS[flexible].parse(data)
    except (CorruptMessageError, ConstructError, ValueError, OverflowError):
        slow = "error"
    return fast, slow


def ints(max_size: int) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(-(2**31), 2**31 - 1), max_size=max_size).map(tuple)


def parts(flexible: bool) -> st.SearchStrategy[Any]:
    # mostly short arrays (few layouts, long runs), sometimes what the runs must refuse:
    # longer than MAX_LEN, a multi-byte compact count, a null array, a tagged field
    short = st.sampled_from([(1, 2, 3), (2, 3, 1), (1,), ()]) | ints(4)
    rare = ints(MAX_LEN + 2) | st.just(tuple(range(130)))
    array = st.one_of(short, short, short, rare)
    return st.builds(
        Part,
        index=st.integers(-(2**31), 2**31 - 1),
        error=st.integers(-(2**15), 2**15 - 1),
        isr=array,
        replicas=array,
        offline=array | st.none(),
        note=st.sampled_from(["", "", "", "x"]) if flexible else st.just(""),
    )


def holders(flexible: bool) -> st.SearchStrategy[Any]:
    return st.builds(Holder, st.lists(parts(flexible), max_size=12).map(tuple), st.integers(-9, 9))


RUNS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@RUNS
@given(data=st.data(), flexible=st.booleans())
def test_runs_match_the_interpreted_path(data: st.DataObject, flexible: bool) -> None:
    value = data.draw(holders(flexible))
    encoded = encode(CODECS[flexible], value)
    assert encoded == HOLDERS[flexible].build(value)
    assert decode_both(flexible, encoded) == (value, value)
    if all(p.offline is not None and not p.note for p in value.parts):
        plain = PLAIN_CODECS[flexible]
        assert encode(plain, value) == encoded
        assert plain.decode_from(encoded)[0] == value


@RUNS
@given(
    data=st.data(),
    flexible=st.booleans(),
    at=st.integers(0, 10_000),
    byte=st.sampled_from([0x00, 0x01, 0x02, 0x04, 0x7F, 0x80, 0xFF]),
    cut=st.booleans(),
)
def test_mutated_bytes_both_paths_agree(
    data: st.DataObject, flexible: bool, at: int, byte: int, cut: bool
) -> None:
    encoded = encode(CODECS[flexible], data.draw(holders(flexible)))
    i = at % len(encoded)
    mutated = encoded[:i] if cut else encoded[:i] + bytes([byte]) + encoded[i + 1 :]
    fast, slow = decode_both(flexible, mutated)
    assert fast == slow


@pytest.mark.parametrize("flexible", [True, False])
def test_layouts_are_bounded(flexible: bool) -> None:
    """More distinct layouts than a struct keeps: the rest take the generic path, same values."""
    value = Holder(
        tuple(
            Part(i, 0, tuple(range(a)), tuple(range(b)), (), "")
            for i, (a, b) in enumerate((a, b) for a in range(MAX_LEN + 1) for b in range(MAX_LEN + 1))
        ),
        1,
    )
    assert len(value.parts) > MAX_LAYOUTS
    codec = compile_struct(PLAIN[flexible], "plain holder")
    encoded = encode(codec, value)
    assert encoded == PLAIN[flexible].build(value) == HOLDERS[flexible].build(value)
    assert codec.decode_from(encoded)[0] == value
    bound = codec.parse.__kwdefaults__ or {}
    runs = [v.__self__ for k, v in bound.items() if k.startswith("_run")]
    assert len(runs) == 1
    assert isinstance(runs[0], FlatRuns)
    assert len(runs[0]._layouts) == MAX_LAYOUTS
    packs = [v for k, v in (codec.build_into.__kwdefaults__ or {}).items() if k.startswith("_packs")]
    assert len(packs) == 1
    assert len(packs[0]) == MAX_LAYOUTS


@pytest.mark.parametrize("flexible", [True, False])
def test_every_truncation_of_a_run_is_rejected(flexible: bool) -> None:
    value = Holder(tuple(Part(p, 0, (1, 2, 3), (3, 1, 2), (), "") for p in range(6)), 3)
    encoded = encode(CODECS[flexible], value)
    for i in range(len(encoded)):
        assert decode_both(flexible, encoded[:i]) == ("error", "error")
    assert decode_both(flexible, encoded + b"\x00") == (value, value)  # trailing bytes ignored


def test_encoding_out_of_range_values_still_raises() -> None:
    codec = PLAIN_CODECS[True]
    for bad in (Part(2**31, 0, (), (), (), ""), Part(0, 0, (2**31,), (), (), "")):
        with pytest.raises(struct.error):
            encode(codec, Holder((bad,), 0))


@pytest.mark.parametrize(
    ("message", "version", "path"),
    [
        (update_metadata.REQUEST, 8, ("topic_states", "partition_states")),
        (update_metadata.REQUEST, 5, ("topic_states", "partition_states")),
        (leader_and_isr.REQUEST, 6, ("topic_states", "partition_states")),
        (metadata.RESPONSE, 12, ("topics", "partitions")),
    ],
)
def test_partition_states_take_the_runs(message: Any, version: int, path: tuple[str, ...]) -> None:
    """The structs the benchmark depends on stay flat (a schema change would silently slow
    them down)."""
    ks = message.struct(version)
    for name in path:
        wire = {n: t for n, t, _ in ks.fields}[name]
        assert isinstance(wire, KArray)
        ks = wire.element
    assert isinstance(ks, KStruct)
    assert ks.flat_slots() is not None


def big_update_metadata(topics: int) -> Any:
    um = update_metadata
    parts = tuple(
        um.UpdateMetadataPartitionState(partition_index=p, leader=1, isr=(1, 2, 3), replicas=(1, 2, 3))
        for p in range(10)
    )
    states = tuple(
        um.UpdateMetadataTopicState(f"t{t}", uuid.UUID(int=t + 1), parts) for t in range(topics)
    )
    return um.UpdateMetadataRequest(version=8, topic_states=states)


def test_large_decodes_run_with_the_gc_paused_and_restore_it() -> None:
    value = big_update_metadata(200)  # ~100 KiB, ~2.6k tracked records: gen0 would run
    data = update_metadata.REQUEST.encode(value)
    assert len(data) > 64 * 1024
    collections: list[str] = []

    def record(phase: str, info: dict[str, int]) -> None:
        """Note collections that start inside generated parse code (the one that follows,
        when the decode has re-enabled the GC, is expected)."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename.startswith("<kmeta parse"):
                collections.append(phase)
            frame = frame.f_back  # type: ignore[assignment]

    gc.callbacks.append(record)
    try:
        assert update_metadata.REQUEST.decode(data, 8) == value
        assert collections == []
        assert gc.isenabled()
        with pytest.raises(CorruptMessageError):
            update_metadata.REQUEST.decode(data[: len(data) // 2], 8)
        assert gc.isenabled()
        gc.disable()  # a caller's own pause is left alone
        try:
            update_metadata.REQUEST.decode(data, 8)
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(record)
