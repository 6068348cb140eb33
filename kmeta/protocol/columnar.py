"""The bulk tricks for arrays of partitions, each defined once with what it gains on its path.

A large UpdateMetadata, LeaderAndIsr or Metadata answer is mostly one array per topic of
elements that differ by their first int32 (the partition index) and repeat otherwise. Three
tricks exploit that, and every module that uses one takes it from here:

* :func:`period` — the elements repeat every few (as the controller assigns replicas), found by
  one comparison of the block with itself shifted, the key column blanked. Used by the
  UpdateMetadata/LeaderAndIsr reader (:class:`kmeta.protocol.stream.KeyedStream`: decode each
  distinct element once) and by the Metadata topic encoder
  (:meth:`kmeta.metadata.partitions.TopicPartitions.period`: encode the first period, repeat it).
* :func:`write_int32_column` / :func:`read_int32_column` — a big-endian int32 field of every
  element written or read as four byte columns (slice assignment, C speed) instead of one pack
  or unpack per element. Used by the Metadata topic encoder, the LeaderAndIsr answer and the
  KeyedStream reader.
* :func:`gc_paused` — the cyclic GC paused while a large message is decoded (hundreds of
  thousands of acyclic records: a collection mid-decode walks them all). Used by
  :meth:`kmeta.protocol.schema.Message.decode_from` for frames over 64 KiB.

Measured (issue 27) in-process, CPU time, each A/B alternated for 5 rounds, medians, on the
shared 2-core machine at load ~12: 100 topics x 1,000 partitions at RF 3 assigned as the
controller does (period 6), ``/tmp``-free command: ``benchmarks/columnar.py``:

* period, Metadata encode of every topic block: 5.5 ms with, 22.7 ms without (-76 %);
* period, UpdateMetadata v8 topic states read by KeyedStream: 4.0 ms with, 20.1 ms without (-80 %);
* byte columns, Metadata encode without a period: 23.3 ms with, 38.2 ms element by element (-39 %);
* byte columns, LeaderAndIsr v5 answer's partition errors: 3.6 ms with, 9.6 ms entry by entry (-63 %);
* gc paused, whole decode of that UpdateMetadata (4.8 MB) beside 300k live tracked objects:
  55 ms paused, 189 ms not (-71 %).
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
    comparing the whole block)."""
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
    ``out`` (one per value), a byte column at a time."""
    big = array("i", values)
    if _LITTLE:
        big.byteswap()
    raw = big.tobytes()
    for j in range(4):
        out[offset + j :: stride] = raw[j::4]


def read_int32_column(buf: bytes, pos: int, stride: int, count: int) -> array[int]:
    """The big-endian int32 at the start of each of ``count`` elements of ``stride`` bytes
    from ``pos`` in ``buf``, read a byte column at a time."""
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
    alone). For work that allocates many acyclic objects at once: a large decode."""
    pause = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            gc.enable()
