"""The bulk tricks for arrays of partitions, each defined once with what it gains on its path.

A large UpdateMetadata, LeaderAndIsr or Metadata answer is mostly one array per topic of
elements that differ by their first int32 (the partition index) and repeat otherwise. Three
tricks exploit that, and every module that uses one takes it from here:

* :func:`period` — the elements repeat every few (as the controller assigns replicas), found by
  one comparison of the block with itself shifted, the key column blanked. Used by the
  UpdateMetadata/LeaderAndIsr reader (:class:`kmeta.protocol.codec.stream.KeyedStream`: decode each
  distinct element once) and by the Metadata topic encoder
  (:meth:`kmeta.metadata.partitions.TopicPartitions.period`: encode the first period, repeat it).
* :func:`write_int32_column` / :func:`read_int32_column` — a big-endian int32 field of every
  element written or read as four byte columns (slice assignment, C speed) instead of one pack
  or unpack per element. Used by the Metadata topic encoder, the LeaderAndIsr answer and the
  KeyedStream reader.
* :func:`gc_paused` — the cyclic GC paused while a large message is decoded (hundreds of
  thousands of acyclic records: a collection mid-decode walks them all). Used by
  :meth:`kmeta.protocol.codec.schema.Message.decode_from` for frames over 64 KiB.

Measured (issue 27) with ``benchmarks/columnar.py --rounds 5``: in-process CPU time, each trick
with and without it on its path, alternated, medians; 100 topics x 1,000 partitions at RF 3
assigned as the controller does (period 6), on the shared 2-core machine at load ~12:

* period, every Metadata v12 topic block encoded: 4.9 ms with, 21.7 ms without (-78 %);
* period, every UpdateMetadata v8 topic state read (KeyedStream): 3.9 ms, 19.7 ms (-80 %);
* byte columns, the topic blocks encoded without a period: 21.8 ms, 34.9 ms element by
  element (-38 %);
* byte columns, LeaderAndIsr v5 partition errors: 3.5 ms, 9.3 ms entry by entry (-62 %);
* gc paused, that UpdateMetadata (4.8 MB) decoded whole beside 300k live tracked objects:
  84 ms, 155 ms with the GC running (-46 %).

Every one gains well over 20 % on its path: all are kept.
"""

from __future__ import annotations

import gc
import sys
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

#: an array this long is first tried as repeating elements (shorter ones gain nothing)
PERIODIC_FROM = 16
#: the longest period tried: the controller's assignment repeats every n * (n - 1) partitions
#: on n brokers (6 on 3, 30 on 6), as Kafka's does
MAX_PERIOD = 30

_LITTLE = sys.byteorder == "little"


def period(block: bytes | bytearray, stride: int, key_bytes: int) -> int | None:
    """The smallest P <= :data:`MAX_PERIOD` such that the elements of ``block`` (``stride``
    bytes each, a key of ``key_bytes`` at their start) repeat every P but for their keys, with
    at least two whole periods; None when they do not.

    The key column is blanked, then the block must equal itself shifted by P elements: one
    comparison per P tried (the next period against the first rejects a wrong one without
    comparing the whole block). Gain: -78 % of the CPU of encoding every Metadata topic block,
    -80 % of reading every UpdateMetadata topic state (module docstring)."""
    count = len(block) // stride
    blank = bytearray(block)
    zeros = bytes(count)
    for j in range(key_bytes):
        blank[j::stride] = zeros
    body = bytes(blank)
    for p in range(1, min(MAX_PERIOD, count) + 1):
        shift = p * stride
        if body[shift : 2 * shift] == body[:shift] and body[shift:] == body[:-shift]:
            return p
    return None


def write_int32_column(out: bytearray, offset: int, stride: int, values: Sequence[int]) -> None:
    """Write ``values`` as big-endian int32s at ``offset`` of each ``stride``-byte element of
    ``out`` (one per value), a byte column at a time. Gain: -38 % of the CPU of encoding the
    Metadata topic blocks without a period, -62 % of the LeaderAndIsr partition errors."""
    big = array("i", values)
    if _LITTLE:
        big.byteswap()
    raw = big.tobytes()
    for j in range(4):
        out[offset + j :: stride] = raw[j::4]


def read_int32_column(buf: bytes, pos: int, stride: int, count: int) -> array[int]:
    """The big-endian int32 at the start of each of ``count`` elements of ``stride`` bytes
    from ``pos`` in ``buf``, read a byte column at a time (the keys of a periodic array, part of
    its -80 %)."""
    end = pos + count * stride
    column = bytearray(4 * count)
    for j in range(4):
        column[j::4] = buf[pos + j : end : stride]
    values = array("i", column)
    if _LITTLE:
        values.byteswap()
    return values


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC paused for the block, then enabled again (a caller's own pause is left
    alone). For work that allocates many acyclic objects at once: a large decode (-46 % of the
    CPU of decoding a 4.8 MB UpdateMetadata beside 300k live objects)."""
    pause = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            gc.enable()
