"""Whatever bytes arrive (random, or a real batch with bytes flipped, cut or lengths changed),
an append either stores them whole or raises a LogError, and the log is as it was; whatever
a segment file holds, recovery keeps the whole good batches before the first bad byte."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kmeta.log import LogConfig, LogError, LogManager, PartitionLog
from tests.log.helpers import GZIP, batch, everything, parse

GOOD = [batch([b"a", b"bb", b"ccc"]), batch([b"x" * 300] * 3, compression=GZIP)]


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(GOOD)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "length", "count", "tail"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "length" and len(data) >= 12:
            struct.pack_into(">i", data, 8, draw(st.integers(-(1 << 31), (1 << 31) - 1)))
        elif kind == "count" and len(data) >= 61:
            struct.pack_into(">i", data, 57, draw(st.integers(-5, 5)))
        elif kind == "tail":
            data += draw(st.binary(max_size=80))
    return bytes(data)


def _state(log: PartitionLog) -> tuple[int, int, bytes, int | None]:
    return log.log_end_offset, log.size_in_bytes, everything(log), log.latest_epoch


@settings(max_examples=300, deadline=None)
@given(st.one_of(damaged(), st.binary(max_size=200)))
def test_an_append_is_whole_or_refused(data: bytes) -> None:
    manager = LogManager(None, 1 << 30)
    leader = manager.get_or_create("l", 0, None, LogConfig())
    follower = manager.get_or_create("f", 0, None, LogConfig())
    for log in (leader, follower):
        log.append_as_leader(GOOD[0], 1, 1)
    before = _state(leader), _state(follower)
    try:
        info = leader.append_as_leader(data, 2, 1)
    except LogError:
        assert _state(leader) == before[0]
    else:  # what was stored reads back as whole valid batches, offsets in sequence
        assert info.first_offset == 3
        assert [b.base_offset for b in parse(everything(leader))] == [0, 3]
    shifted = bytearray(data)
    if len(shifted) >= 8:
        struct.pack_into(">q", shifted, 0, 3)  # at the follower's log end
    try:
        got = follower.append_as_follower(bytes(shifted))
    except LogError:
        assert _state(follower) == before[1]
    else:
        if got is None:
            assert _state(follower) == before[1]
        else:
            assert parse(everything(follower))[1].base_offset == 3


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 3))
def test_recovery_keeps_the_good_batches_before_any_garbage(garbage: bytes, good: int) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        manager = LogManager(log_dir, 1 << 30)
        log = manager.get_or_create("t", 0, None, LogConfig())
        for _ in range(good):
            log.append_as_leader(GOOD[0], 0, 1)
        kept = everything(log)
        manager.close()
        segment = Path(log_dir) / "t-0" / "00000000000000000000.log"
        segment.parent.mkdir(exist_ok=True)
        with segment.open("ab") as f:
            f.write(garbage)
        again = LogManager(log_dir, 1 << 30)
        again.load()
        recovered = again.get_or_create("t", 0, None, LogConfig())
        assert everything(recovered)[: len(kept)] == kept
        assert recovered.log_end_offset >= 3 * good
        stored = parse(everything(recovered))  # (any batch the garbage made is a whole valid one)
        assert [b.base_offset for b in stored] == [3 * i for i in range(len(stored))]
        assert segment.stat().st_size == recovered.size_in_bytes
        again.close()
