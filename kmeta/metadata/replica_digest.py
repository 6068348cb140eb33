"""A digest of one topic's LeaderAndIsr states as one broker holds them.

A broker reports one per topic in its BrokerRegistration (kmeta's tagged field 10003,
``KmetaTopicDigests``); a controller taking over (failover, restart) computes the same over
what it would send that broker and sends LeaderAndIsr only for the topics whose digests differ
(issue 17: at 1M partitions the brokers already held all of it and answered every partition
STALE, while the first admin write's UpdateMetadata queued behind it). A topic not reported
is sent whole, so a digest that cannot match only costs the push it saves.

The digest is the first 8 bytes of BLAKE2b (as a signed int64, the wire's type) over the
topic id's 16 bytes (zeros: none), then per partition the broker replicates, in ascending
index order, little-endian int32s: index, leader, leader epoch, partition epoch, the replica
count and replicas, the ISR count and ISR (:func:`partition_words`). Both sides build it
here, so they agree by construction.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import uuid
from array import array
from collections.abc import Iterable

#: topics a registration reports at most (its size is bounded; the rest are sent whole)
MAX_DIGEST_TOPICS = 50_000
_ZERO = bytes(16)
_SWAP = sys.byteorder != "little"
_INT32 = struct.Struct("<i")


def partition_words(
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
) -> tuple[int, ...]:
    """One partition's words after its index (equal states: computed once and reused)."""
    return (leader, leader_epoch, partition_epoch, len(replicas), *replicas, len(isr), *isr)


def topic_digest(
    topic_id: uuid.UUID | None, partitions: Iterable[tuple[int, tuple[int, ...]]]
) -> int:
    """The digest over ``(index, partition_words(...))`` given in ascending index order."""
    words = array("i")
    append, extend = words.append, words.extend
    for index, tail in partitions:
        append(index)
        extend(tail)
    if _SWAP:
        words.byteswap()
    return digest_of_bytes(topic_id, words.tobytes())


def digest_of_bytes(topic_id: uuid.UUID | None, data: bytes) -> int:
    """The digest over the words already laid out as little-endian int32s (``data``: what
    :func:`topic_digest` lays out; :func:`index_bytes` and :func:`words_bytes` give the
    pieces, so a caller with few distinct states joins bytes instead of words)."""
    h = hashlib.blake2b(_ZERO if topic_id is None else topic_id.bytes, digest_size=8)
    h.update(data)
    return int.from_bytes(h.digest(), "little", signed=True)


def words_bytes(words: tuple[int, ...]) -> bytes:
    """``words`` as little-endian int32s (a partition's words, laid out once per state)."""
    out = array("i", words)
    if _SWAP:
        out.byteswap()
    return out.tobytes()


#: index -> its little-endian int32 bytes, for the indexes below the bound (kept: every
#: topic has partition 0, 1, ...; 65,536 short bytes objects are ~2.4 MB at most)
_INDEXES: list[bytes] = []
_INDEXES_KEPT = 1 << 16


def index_bytes(index: int) -> bytes:
    """``index`` as a little-endian int32 (a negative one too: a peer's request may carry it,
    and it must never read the list from its end)."""
    if 0 <= index < len(_INDEXES):
        return _INDEXES[index]
    if 0 <= index < _INDEXES_KEPT:
        _INDEXES.extend(_INT32.pack(i) for i in range(len(_INDEXES), index + 1))
        return _INDEXES[index]
    return _INT32.pack(index)
