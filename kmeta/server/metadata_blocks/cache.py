"""The Metadata answer cache of one snapshot: heads, topic blocks, all-topics bodies, memos.

:class:`MetadataBlocks` holds every piece, the whole all-topics body and the memoised answers
(:class:`kmeta.net.dispatch.AnswerMemo`) built from one snapshot in one object,
``MetadataBlocks.of(snap)``, under typed keys. It is kept in ``snap.derived`` under its own class
and dies with the snapshot, so nothing in it can go stale: an answer is a few dict lookups and
one join, never a re-encode of unchanged topics.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.dispatch import AnswerMemo, EncodedPieces
from kmeta.net.inbound import zerocopy
from kmeta.protocol.codec.splice import Splice
from kmeta.protocol.messages import metadata as md

if TYPE_CHECKING:
    from kmeta.metadata.cache import MetadataCache
    from kmeta.server.state import BrokerState


class Audience(NamedTuple):
    """Who an answer is for: the request's version and the listener it came in on."""

    version: int
    listener: str


class View(NamedTuple):
    """What a topic block depends on besides the snapshot and the topic."""

    version: int
    listener: str
    topic_ops: bool  # include_topic_authorized_operations (v8+)


class AllTopicsKey(NamedTuple):
    view: View
    tail: bytes


def splice(version: int) -> Splice:
    """The codec's layout of a MetadataResponse around its topics, at ``version``."""
    return md.RESPONSE.splice(version, "topics")


def sendable(body: bytes) -> bytes:
    """The zero-copy seam: a large cached body, sent by sendfile from a sealed memfd.

    The all-topics answer for 1000 topics x 10 partitions is ~456 KB, spliced from cached
    blocks at almost no cost; copying it into the socket then cost the broker ~40 % of its CPU
    per answer (perf: ``_copy_from_iter`` under ``tcp_sendmsg``). Measured in one run of
    ``benchmarks/metadata_load.py`` (BENCHMARKS.md, 2026-11-22): 91.6 us of server CPU per
    answer sent this way against 121 us copying (x0.76), with the kernel's own floor for the
    sendfile path at 78 us. Bodies under :data:`kmeta.net.inbound.zerocopy.MIN_SIZE` stay plain bytes;
    :meth:`kmeta.net.inbound.answer_writer.AnswerWriter.write` does the sending.
    """
    return zerocopy.spliceable(body)


#: all-topics bodies kept per snapshot for principals an authorizer restricts
AUTHORIZED_ENTRIES = 1024


class MetadataBlocks:
    """Everything encoded for Metadata answers from one snapshot (see the module docstring)."""

    __slots__ = ("_names_by_id", "all_topics", "authorized", "heads", "memos", "snap", "topics")

    def __init__(self, snap: MetadataSnapshot) -> None:
        self.snap = snap
        self.heads: dict[Audience, bytes] = {}
        #: per view: topic name -> encoded topic block
        self.topics: dict[View, dict[str, bytes]] = {}
        #: the whole all-topics body (head to tail), as :func:`sendable` pieces of a few MB
        self.all_topics: dict[AllTopicsKey, EncodedPieces] = {}
        #: memoised answers by request body; a plain (version, listener) tuple finds its entry
        self.memos: dict[tuple[int, str], AnswerMemo] = {}
        #: with an authorizer: the all-topics body of one principal, host and ACL set (the set
        #: object itself is in the key: a new set is a new key), bounded by AUTHORIZED_ENTRIES
        self.authorized: dict[tuple[object, ...], bytes] = {}
        self._names_by_id: dict[uuid.UUID, str] | None = None

    @staticmethod
    def of(snap: MetadataSnapshot) -> MetadataBlocks:
        blocks: MetadataBlocks | None = snap.derived.get(MetadataBlocks)
        if blocks is None:
            blocks = snap.derived[MetadataBlocks] = MetadataBlocks(snap)
        return blocks

    def head(self, version: int, listener: str) -> bytes:
        key = Audience(version, listener)
        cached = self.heads.get(key)
        if cached is None:
            snap = self.snap
            cached = self.heads[key] = splice(version).head(
                throttle_time_ms=0,
                brokers=brokers(snap, listener),
                cluster_id=snap.cluster_id,
                controller_id=-1 if snap.controller_id is None else snap.controller_id,
            )
        return cached

    def topic_blocks(self, view: View) -> dict[str, bytes]:
        """The encoded topic blocks of ``view`` made so far (the caller adds missing ones)."""
        table = self.topics.get(view)
        if table is None:
            table = self.topics[view] = {}
        return table

    def answer_memo(self, version: int, listener: str, holder: MetadataCache) -> AnswerMemo:
        """The memo of answers for ``version`` and ``listener``; ``holder`` publishes this
        blocks' snapshot (the memo is current while it still does)."""
        memo = self.memos.get((version, listener))
        if memo is None:
            memo = self.memos[Audience(version, listener)] = AnswerMemo(holder, self.snap)
        return memo

    def names_by_id(self) -> dict[uuid.UUID, str]:
        if self._names_by_id is None:
            self._names_by_id = {v: k for k, v in self.snap.topic_ids.items()}
        return self._names_by_id


def answer_memo(state: BrokerState, version: int, listener: str) -> AnswerMemo:
    """The handler's memo hook (:data:`kmeta.net.dispatch.MemoFn`): the current snapshot's.

    With an authorizer, answers depend on the principal: a memo of its own each time, which
    keeps nothing for anyone else (the connection's memo reads then always miss)."""
    cache = state.cache
    if state.authorizer is not None:
        return AnswerMemo(cache, cache.snapshot)
    return MetadataBlocks.of(cache.snapshot).answer_memo(version, listener, cache)


def brokers(snap: MetadataSnapshot, listener: str) -> tuple[md.MetadataResponseBroker, ...]:
    """Live brokers that have ``listener``, with that listener's host and port."""
    out = []
    for broker_id in sorted(snap.alive_nodes):
        node = snap.alive_nodes[broker_id].get(listener)
        if node is not None:
            out.append(md.MetadataResponseBroker(node.id, node.host, node.port, node.rack))
    return tuple(out)


@cache
def tail(version: int, cluster_authorized_operations: int) -> bytes:
    return splice(version).tail(cluster_authorized_operations=cluster_authorized_operations, error_code=0)
