"""The all-topics answer body: kept per snapshot as sendable pieces, made in steps when large.

An all-topics answer that must encode blocks for more partitions than
:data:`ENCODE_IN_STEPS_PARTITIONS` (a broker that just started, or a new view, at 1M
partitions: seconds of work) is made in steps that yield the loop; its body is kept as pieces
of about :data:`PIECE_BYTES`, each joined in one step (joining 2M partitions' body in one
piece held the loop ~110 ms of CPU) and sent by sendfile from its own sealed memfd.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any

from kmeta.net.dispatch import EncodedPieces
from kmeta.server.metadata_blocks.cache import AllTopicsKey, MetadataBlocks, View, sendable, splice
from kmeta.server.metadata_blocks.topics import TopicRecord, topic_block, unencoded

#: an all-topics answer that must encode blocks for more partitions than this, or whose body
#: is that large, is made in steps
ENCODE_IN_STEPS_PARTITIONS = 20_000
#: the longest one such step runs before it yields the loop (one topic is never split)
STEP_S = 0.02
#: an all-topics body is kept as pieces of about this size (the last may be shorter), each
#: joined in one step and sent by sendfile from its own sealed memfd (2M partitions: ~84 MB,
#: 21 pieces); a body under it is one piece
PIECE_BYTES = 4 * 1024 * 1024


def all_topics(
    blocks: MetadataBlocks, view: View, tail: bytes, rule: TopicRecord
) -> EncodedPieces | Coroutine[Any, Any, EncodedPieces]:
    """The whole answer body for all topics as pieces (sent without a copy when large): kept
    per snapshot, view and tail; made in steps (a coroutine) when large and not made yet."""
    key = AllTopicsKey(view, tail)
    body = blocks.all_topics.get(key)
    if body is not None:
        return body
    names, total = unencoded(blocks, view)
    if total > ENCODE_IN_STEPS_PARTITIONS:
        return _in_steps(blocks, view, tail, names, rule)
    pieces: list[bytes] = []
    for _ in _join_steps(_parts(blocks, view, tail, rule), pieces):
        pass
    body = blocks.all_topics[key] = EncodedPieces(pieces)
    return body


def _join_steps(parts: Iterable[bytes], out: list[bytes]) -> Iterator[None]:
    """Join ``parts`` into ``out`` as :func:`sendable` pieces of about :data:`PIECE_BYTES`,
    yielding after each piece (where a caller in steps may give the loop back)."""
    group: list[bytes] = []
    size = 0
    for part in parts:
        group.append(part)
        size += len(part)
        if size >= PIECE_BYTES:
            out.append(sendable(b"".join(group)))
            group, size = [], 0
            yield
    if group or not out:
        out.append(sendable(b"".join(group)))


def _parts(blocks: MetadataBlocks, view: View, tail: bytes, rule: TopicRecord) -> Iterator[bytes]:
    """The all-topics body's parts in order: head, topic count, each topic's block, tail."""
    names = blocks.snap.topic_names_sorted
    table = blocks.topic_blocks(view)
    yield blocks.head(view.version, view.listener)
    yield splice(view.version).count(len(names))
    for name in names:
        yield topic_block(blocks, view, table, name, rule)
    yield tail


async def _in_steps(
    blocks: MetadataBlocks, view: View, tail: bytes, names: list[str], rule: TopicRecord
) -> EncodedPieces:
    """:func:`all_topics`, its missing topic blocks encoded first, then its pieces joined, in
    steps that yield the loop (other requests are answered meanwhile; the answer is still of
    ``blocks.snap``)."""
    table = blocks.topic_blocks(view)
    deadline = time.monotonic() + STEP_S
    for name in names:
        topic_block(blocks, view, table, name, rule)
        if time.monotonic() >= deadline:
            await asyncio.sleep(0)
            deadline = time.monotonic() + STEP_S
    key = AllTopicsKey(view, tail)
    body = blocks.all_topics.get(key)  # (made meanwhile for another request)
    if body is None:
        pieces: list[bytes] = []
        for _ in _join_steps(_parts(blocks, view, tail, rule), pieces):
            if time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + STEP_S
        body = blocks.all_topics.setdefault(key, EncodedPieces(pieces))
    return body
