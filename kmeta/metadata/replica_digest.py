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
import sys
import uuid
from array import array
from collections.abc import Iterable

#: topics a registration reports at most (its size is bounded; the rest are sent whole)
MAX_DIGEST_TOPICS = 50_000
_ZERO = bytes(16)
_SWAP = sys.byteorder != "little"


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
    h = hashlib.blake2b(_ZERO if topic_id is None else topic_id.bytes, digest_size=8)
    h.update(words)
    return int.from_bytes(h.digest(), "little", signed=True)
