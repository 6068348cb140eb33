"""Metadata (api key 3): versions 0-13, on client and control listeners.

Kafka 3.x ZooKeeper-mode semantics (``KafkaApis.handleTopicMetadataRequest`` and
``ZkMetadataCache.getTopicMetadata``):

* Topics: null means all (v1+); an empty list means none, except v0 where it means all.
  Duplicates are answered once.
* Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; a name that is not a legal topic name
  (empty, "." or "..", over 249 chars, outside ``[a-zA-Z0-9._-]``): INVALID_TOPIC_EXCEPTION.
  Unless auto-creation (``auto_create_topics_enable``, v4+ ``allow_auto_topic_creation``)
  creates it: :mod:`kmeta.server.auto_topic_creation` says how it is answered then.
* Leader not alive: LEADER_NOT_AVAILABLE, leader -1, the leader epoch still sent. Leader
  alive but without the request's listener: LISTENER_NOT_FOUND (v6+), LEADER_NOT_AVAILABLE
  before.
* v0 only: replicas and ISR are filtered to brokers alive on the listener, and a partition
  that lost any gets REPLICA_NOT_AVAILABLE (its leader is still given).
* Brokers listed: the live brokers that have the listener the request came in on, with that
  listener's host and port. Controller id (-1 when none), cluster id, topic ids (v10+).
* v10-11: a null topic name or a non-zero topic id is an invalid request: every requested
  topic is answered with INVALID_REQUEST and no partitions (Kafka's getErrorResponse).
* v12+: topics given by id are looked up by id (names are then ignored); unknown ids get
  UNKNOWN_TOPIC_ID with a null name.
* v13: top-level error code (always NONE here).
* Authorized operations (v8+), when asked for: everything (no authorizer), as Kafka does.
* With an authorizer (``--authorizer acl``): a topic the principal may not DESCRIBE is left
  out of all-topics answers, and a named one is TOPIC_AUTHORIZATION_FAILED whether it exists
  or not (by id, v12+: with a null name); authorized operations are the principal's. Such
  answers depend on the principal: never memoised by request body; a principal's all-topics
  body is kept per snapshot and ACL set. A super user gets the unrestricted answer (the
  same cached blocks as without an authorizer).

Responses are spliced from encoded per-topic blocks cached on the snapshot, and whole answers
are memoised by request body (:mod:`kmeta.server.metadata_blocks`): never re-encoded per
request.

Versions: v1 adds rack, controller id, is_internal and null-for-all; v2 cluster id; v3
throttle time; v4 allow_auto_topic_creation; v5 offline replicas; v6 LISTENER_NOT_FOUND;
v7 leader epoch; v8 authorized operations; v9 flexible; v10 topic ids; v11 drops cluster
authorized operations; v12 lookup by topic id, nullable names; v13 top-level error code.
"""

from __future__ import annotations

import asyncio
import functools
import re
import struct
import sys
import time
import uuid
from array import array
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kmeta.metadata.partitions import LeadershipKey, TopicPartitions, iota
from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.dispatch import EncodedPieces
from kmeta.net.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kmeta.net.security.authorizer import Authorizer, client_host
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.splice import Splice
from kmeta.protocol.types import ZERO_UUID
from kmeta.server import auto_topic_creation, metadata_blocks
from kmeta.server.metadata_blocks import (
    AUTHORIZED_ENTRIES,
    AllTopicsKey,
    MetadataBlocks,
    View,
    sendable,
    splice,
)
from kmeta.server.state import BrokerContext, BrokerRegistry

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME = 249
# AclOperation bit fields when there is no authorizer (every supported operation):
# topic: READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# cluster: CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
OPERATIONS_NOT_ASKED = -(2**31)


def is_valid_topic_name(name: str) -> bool:
    """Kafka's ``Topic.validate``."""
    return (
        0 < len(name) <= MAX_TOPIC_NAME
        and name not in (".", "..")
        and _LEGAL_TOPIC.fullmatch(name) is not None
    )


def partitions(
    snap: MetadataSnapshot, topic: str, version: int, listener: str
) -> tuple[md.MetadataResponsePartition, ...]:
    """The partition records of ``topic`` as seen from ``listener`` at ``version``."""
    alive = snap.alive_nodes
    return tuple(
        _partition(
            alive, listener, version, index, state.leader, state.leader_epoch,
            state.replicas, state.isr, state.offline_replicas,
        )
        for index, state in sorted(snap.partition_states[topic].items())
    )


def _partition(
    alive: Mapping[int, Mapping[str, object]],
    listener: str,
    version: int,
    index: int,
    leader_id: int,
    leader_epoch: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    offline: tuple[int, ...],
) -> md.MetadataResponsePartition:
    """One partition's record (see the module docstring for the error codes)."""
    leader_nodes = alive.get(leader_id)
    all_replicas, all_isr = replicas, isr
    if version == 0:
        replicas = tuple(b for b in replicas if listener in alive.get(b, ()))
        isr = tuple(b for b in isr if listener in alive.get(b, ()))
    if leader_nodes is None or listener not in leader_nodes:
        if leader_nodes is None or version < 6:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            error = ErrorCode.LISTENER_NOT_FOUND
        leader = -1
    else:
        leader = leader_id
        short = len(replicas) < len(all_replicas) or len(isr) < len(all_isr)
        error = ErrorCode.REPLICA_NOT_AVAILABLE if short else ErrorCode.NONE
    return md.MetadataResponsePartition(
        error, index, leader, leader_epoch, replicas, isr, offline
    )


_INDEX = struct.Struct(">i")


@functools.cache
def _topic_splice(version: int) -> Splice | None:
    """A topic block laid out around its partitions, when a partition's element is its
    error code, its index, then bytes that do not depend on the index (checked here on the
    encoder's own output, once per version); else None."""
    topic = splice(version).inner("partitions")
    probe = md.MetadataResponsePartition(0, 0x01020304, 5, 6, (5, 7), (5,), ())
    a, b = topic.element(probe), topic.element(probe._replace(partition_index=0))
    same_rest = a[:2] + a[6:] == b[:2] + b[6:]
    return topic if a[2:6] == b"\x01\x02\x03\x04" and b[2:6] == bytes(4) and same_rest else None


def encode_topic(snap: MetadataSnapshot, view: View, name: str, topic_id: uuid.UUID) -> bytes:
    """``name``'s encoded MetadataResponseTopic for ``view``: the bytes
    ``splice(version).element`` writes for the record :func:`partitions` makes. A topic's
    partitions share few distinct (leader, epoch, replica sets): each is encoded once and
    the block joined from them and the indexes, read off the cache's columns (at 1M
    partitions a broker's first all-topics answer spent most of its time making a record
    per partition, then encoding each)."""
    parts = snap.partition_states[name]
    topic = _topic_splice(view.version)
    if topic is None or not isinstance(parts, TopicPartitions):
        record = md.MetadataResponseTopic(
            ErrorCode.NONE,
            name,
            topic_id,
            name in INTERNAL_TOPICS,
            partitions(snap, name, view.version, view.listener),
            _ops(view.topic_ops),
        )
        return splice(view.version).element(record)
    period = parts.period(MAX_PERIOD) if len(parts) >= PERIODIC_FROM else None
    indexes, keys, sets = parts.leadership(period)
    alive, listener, version = snap.alive_nodes, view.listener, view.version
    encoded: dict[LeadershipKey, bytes] = {}  # each distinct state's element, index 0
    for key in dict.fromkeys(keys):
        leader, epoch, isr, replicas, offline = key
        encoded[key] = topic.element(_partition(
            alive, listener, version, 0, leader, epoch, sets[replicas], sets[isr], sets[offline]
        ))  # fmt: skip
    out: list[bytes | bytearray] = [
        topic.head(error_code=ErrorCode.NONE, name=name, topic_id=topic_id,
                   is_internal=name in INTERNAL_TOPICS),
        topic.count(len(parts)),
    ]  # fmt: skip
    sizes = set(map(len, encoded.values()))
    if len(sizes) == 1:
        # every element the same size (the common case): joined at C speed, then the
        # indexes written in as byte columns (an element is error code, index, the rest);
        # partitions repeating every ``period`` are that many elements repeated
        (stride,) = sizes
        if period is not None:
            n = len(parts)
            body = bytearray((b"".join(map(encoded.__getitem__, keys)) * (n // period + 1))[: n * stride])
            big = iota(n)  # (partitions 0..n-1 in order)
        else:
            body = bytearray(b"".join(map(encoded.__getitem__, keys)))
            big = array("i", indexes)
        if sys.byteorder == "little":
            big.byteswap()
        raw = big.tobytes()
        for j in range(4):
            body[2 + j :: stride] = raw[j::4]
        out.append(body)
    else:
        if period is not None:  # (each partition's key is its period's)
            indexes, keys, sets = parts.leadership()
        append, pack = out.append, _INDEX.pack
        for index, key in zip(indexes, keys, strict=True):
            element = encoded[key]
            append(element[:2])
            append(pack(index))
            append(element[6:])
    out.append(topic.tail(topic_authorized_operations=_ops(view.topic_ops)))
    return b"".join(out)


#: a topic this large is first tried as partitions repeating every few (TopicPartitions.period)
PERIODIC_FROM = 16
#: the longest period tried (the controller's assignment repeats every n * (n - 1) partitions
#: on n brokers: 6 on 3, 30 on 6)
MAX_PERIOD = 30


def _ops(topic_ops: bool) -> int:
    return TOPIC_OPERATIONS if topic_ops else OPERATIONS_NOT_ASKED


#: views (version, listener, topic_ops) whose blocks a topic keeps across snapshots
TOPIC_MEMO_VIEWS = 2


def _topic_block(blocks: MetadataBlocks, view: View, table: dict[str, bytes], name: str) -> bytes:
    """``name``'s encoded block for ``view``: from this snapshot's table, else from the topic's
    own memo (``TopicPartitions.derived``: it outlives snapshots while the topic is unchanged,
    so an update of some topics re-encodes those only, not the other 999,000 partitions),
    else encoded now. A memo entry counts only with the same live nodes and topic id."""
    block = table.get(name)
    if block is None:
        snap = blocks.snap
        parts = snap.partition_states[name]
        topic_id = snap.topic_ids.get(name, ZERO_UUID)
        memo: dict[View, tuple[object, uuid.UUID, bytes]] | None = getattr(parts, "derived", None)
        kept = None if memo is None else memo.get(view)
        if kept is not None and kept[0] is snap.alive_nodes and kept[1] == topic_id:
            block = table[name] = kept[2]
            return block
        block = table[name] = encode_topic(snap, view, name, topic_id)
        if memo is not None:
            if len(memo) >= TOPIC_MEMO_VIEWS:  # bounded: each view is ~42 B per partition
                memo.pop(next(iter(memo)))
            memo[view] = (snap.alive_nodes, topic_id, block)
    return block


#: an all-topics answer that must encode blocks for more partitions than this (a broker that
#: just started, or a new view, at 1M partitions: seconds of work), or whose body is that
#: large (joining it at 2M partitions held the loop ~110 ms of CPU), is made in steps
ENCODE_IN_STEPS_PARTITIONS = 20_000
#: the longest one such step runs before it yields the loop (one topic is never split)
STEP_S = 0.02
#: an all-topics body is kept as pieces of about this size (the last may be shorter), each
#: joined in one step and sent by sendfile from its own sealed memfd (2M partitions: ~84 MB,
#: 21 pieces); a body under it is one piece, as before
PIECE_BYTES = 4 * 1024 * 1024


def _unencoded(blocks: MetadataBlocks, view: View) -> tuple[list[str], int]:
    """The topics whose block for ``view`` is neither in this snapshot's table nor kept by the
    topic (see :func:`_topic_block`), and all topics' partition count."""
    snap, table = blocks.snap, blocks.topic_blocks(view)
    names, total = [], 0
    for name, parts in snap.partition_states.items():
        total += len(parts)
        if name in table:
            continue
        memo = getattr(parts, "derived", None)
        kept = None if memo is None else memo.get(view)
        if kept is None or kept[0] is not snap.alive_nodes:
            names.append(name)
    return names, total


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


def _all_topics_parts(blocks: MetadataBlocks, view: View, tail: bytes) -> Iterator[bytes]:
    """The all-topics body's parts in order: head, topic count, each topic's block, tail."""
    names = blocks.snap.topic_names_sorted
    table = blocks.topic_blocks(view)
    yield blocks.head(view.version, view.listener)
    yield splice(view.version).count(len(names))
    for name in names:
        yield _topic_block(blocks, view, table, name)
    yield tail


async def _all_topics_in_steps(
    blocks: MetadataBlocks, view: View, tail: bytes, names: list[str]
) -> EncodedPieces:
    """:func:`_all_topics`, its missing topic blocks encoded first, then its pieces joined, in
    steps that yield the loop (other requests are answered meanwhile; the answer is still of
    ``blocks.snap``)."""
    table = blocks.topic_blocks(view)
    deadline = time.monotonic() + STEP_S
    for name in names:
        _topic_block(blocks, view, table, name)
        if time.monotonic() >= deadline:
            await asyncio.sleep(0)
            deadline = time.monotonic() + STEP_S
    key = AllTopicsKey(view, tail)
    body = blocks.all_topics.get(key)  # (made meanwhile for another request)
    if body is None:
        pieces: list[bytes] = []
        for _ in _join_steps(_all_topics_parts(blocks, view, tail), pieces):
            if time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + STEP_S
        body = blocks.all_topics.setdefault(key, EncodedPieces(pieces))
    return body


def _all_topics(blocks: MetadataBlocks, view: View, tail: bytes) -> EncodedPieces:
    """The whole answer body for all topics, as pieces (sent without a copy when large)."""
    key = AllTopicsKey(view, tail)
    body = blocks.all_topics.get(key)
    if body is None:
        pieces: list[bytes] = []
        for _ in _join_steps(_all_topics_parts(blocks, view, tail), pieces):
            pass
        body = blocks.all_topics[key] = EncodedPieces(pieces)
    return body


def _missing_block(name: str | None, topic_id: uuid.UUID, error: ErrorCode, view: View) -> bytes:
    record = md.MetadataResponseTopic(
        error, name, topic_id, name in INTERNAL_TOPICS, (), _ops(view.topic_ops)
    )
    return splice(view.version).element(record)


def _creatable(snap: MetadataSnapshot, names: Iterable[str]) -> list[str]:
    """The names auto-creation may create (kmeta.server.auto_topic_creation): unknown, legal,
    not internal."""
    known = snap.partition_states
    return [n for n in names if n not in known and n not in INTERNAL_TOPICS and is_valid_topic_name(n)]


def _by_name(
    blocks: MetadataBlocks, view: View, names: Iterable[str], created: Mapping[str, ErrorCode]
) -> list[bytes]:
    out = []
    known = blocks.snap.partition_states
    table = blocks.topic_blocks(view)
    for name in dict.fromkeys(names):
        if name in known:
            out.append(_topic_block(blocks, view, table, name))
        else:
            error = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if is_valid_topic_name(name)
                else ErrorCode.INVALID_TOPIC_EXCEPTION
            )
            out.append(_missing_block(name, ZERO_UUID, created.get(name, error), view))
    return out


def _by_id(blocks: MetadataBlocks, view: View, ids: Iterable[uuid.UUID]) -> list[bytes]:
    known = blocks.names_by_id()
    table = blocks.topic_blocks(view)
    out = []
    for topic_id in dict.fromkeys(ids):
        name = known.get(topic_id)
        if name is None:
            out.append(_missing_block(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, view))
        else:
            out.append(_topic_block(blocks, view, table, name))
    return out


def error_response(request: md.MetadataRequest, error: ErrorCode) -> md.MetadataResponse:
    """Kafka's MetadataRequest.getErrorResponse: each requested topic carries ``error``."""
    topics = tuple(
        md.MetadataResponseTopic(error, t.name if t.name is not None else "", t.topic_id, False, ())
        for t in request.topics or ()
    )
    return md.MetadataResponse(version=request.version, topics=topics)


def _malformed(requested: Sequence[md.MetadataRequestTopic], version: int) -> bool:
    """v10-11: a null name or a topic id; v12+: a null name without a topic id."""
    if any(t.name is None for t in requested) or (
        version < 12 and any(t.topic_id != ZERO_UUID for t in requested)
    ):
        return not (version >= 12 and all(t.topic_id != ZERO_UUID for t in requested if t.name is None))
    return False


def _authorized(
    ctx: BrokerContext, authorizer: Authorizer, blocks: MetadataBlocks, view: View, request: md.MetadataRequest, cluster_ops: bool
) -> md.MetadataResponse | EncodedPieces:
    """The answer for the connection's principal (Kafka's handleTopicMetadataRequest with an
    authorizer): topics it may not DESCRIBE are left out of all-topics answers and answered
    TOPIC_AUTHORIZATION_FAILED when named (whether they exist or not; by id: a null name);
    authorized operations are the principal's."""
    principal, host = ctx.principal, client_host(ctx.peer)
    version, snap = view.version, blocks.snap

    def may(name: str) -> bool:
        return authorizer.authorize(principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    table = blocks.topic_blocks(view)

    def block(name: str) -> bytes:
        if not view.topic_ops:
            return _topic_block(blocks, view, table, name)
        ops = authorizer.operations(principal, host, ResourceType.TOPIC, name)
        record = md.MetadataResponseTopic(
            ErrorCode.NONE, name, snap.topic_ids.get(name, ZERO_UUID), name in INTERNAL_TOPICS,
            partitions(snap, name, version, view.listener), ops,
        )  # fmt: skip
        return splice(version).element(record)

    def refused(name: str | None, topic_id: uuid.UUID) -> bytes:
        record = md.MetadataResponseTopic(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, topic_id, False, (), OPERATIONS_NOT_ASKED
        )
        return splice(version).element(record)

    bits = OPERATIONS_NOT_ASKED
    if cluster_ops:
        bits = authorizer.operations(principal, host, ResourceType.CLUSTER, CLUSTER_NAME)
    tail = metadata_blocks.tail(version, bits)
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        # kept per snapshot for this principal, host and ACL set: repeated all-topics
        # requests cost a lookup (the per-connection memo cannot tell principals apart)
        key = (view, tail, principal, host, authorizer.acls)
        body = blocks.authorized.get(key)
        if body is None:
            names = [n for n in snap.topic_names_sorted if may(n)]
            body = sendable(b"".join((
                blocks.head(version, ctx.listener), splice(version).count(len(names)),
                *(block(n) for n in names), tail,
            )))  # fmt: skip
            if len(blocks.authorized) < AUTHORIZED_ENTRIES:
                blocks.authorized[key] = body
        return EncodedPieces((body,))
    if _malformed(requested, version):
        return error_response(request, ErrorCode.INVALID_REQUEST)
    elif version >= 12 and any(t.topic_id != ZERO_UUID for t in requested):
        known = blocks.names_by_id()
        parts = []
        for topic_id in dict.fromkeys(t.topic_id for t in requested if t.topic_id != ZERO_UUID):
            name = known.get(topic_id)
            if name is None:
                parts.append(_missing_block(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, view))
            else:
                parts.append(block(name) if may(name) else refused(None, topic_id))
    else:
        parts = []
        # (no null name is left here: _malformed refused those without a topic id)
        names = [t.name for t in requested if t.name is not None]
        created = auto_topic_creation.create_topics(ctx, request, filter(may, _creatable(snap, names)))
        for name in dict.fromkeys(names):
            if not may(name):
                parts.append(refused(name, ZERO_UUID))
            elif name in snap.partition_states:
                parts.append(block(name))
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if is_valid_topic_name(name) else ErrorCode.INVALID_TOPIC_EXCEPTION
                parts.append(_missing_block(name, ZERO_UUID, created.get(name, error), view))
    return EncodedPieces((blocks.head(version, ctx.listener), splice(version).count(len(parts)), *parts, tail))


def handle(
    ctx: BrokerContext, request: md.MetadataRequest
) -> md.MetadataResponse | EncodedPieces | Coroutine[Any, Any, EncodedPieces]:
    """The response: a record (error path) or the encoded body pieces.

    The one entry point. Its answers depend only on the snapshot, the listener, the version
    and the request body (never on the client or correlation id), so the connection memoises
    them by body through :func:`kmeta.server.metadata_blocks.answer_memo`.
    """
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    blocks = MetadataBlocks.of(snap)
    version: int = request.version
    view = View(version, ctx.listener, version >= 8 and request.include_topic_authorized_operations)
    cluster_ops = 8 <= version <= 10 and request.include_cluster_authorized_operations
    tail = metadata_blocks.tail(version, CLUSTER_OPERATIONS if cluster_ops else OPERATIONS_NOT_ASKED)
    requested = request.topics
    authorizer = ctx.state.authorizer
    if authorizer is not None and not authorizer.is_super_user(ctx.principal):
        return _authorized(ctx, authorizer, blocks, view, request, cluster_ops)
    if requested is None or (version == 0 and not requested):
        if AllTopicsKey(view, tail) not in blocks.all_topics:
            names, total = _unencoded(blocks, view)
            if total > ENCODE_IN_STEPS_PARTITIONS:
                return _all_topics_in_steps(blocks, view, tail, names)
        return _all_topics(blocks, view, tail)
    if _malformed(requested, version):
        return error_response(request, ErrorCode.INVALID_REQUEST)
    ids = [t.topic_id for t in requested if t.topic_id != ZERO_UUID] if version >= 12 else []
    created: dict[str, ErrorCode] = {}
    if ids:
        parts = _by_id(blocks, view, ids)
    else:
        # no null name is left here: _malformed refused those without a topic id
        asked = [t.name for t in requested if t.name is not None]
        created = auto_topic_creation.create_topics(ctx, request, _creatable(snap, asked))
        parts = _by_name(blocks, view, asked, created)
    head = blocks.head(version, ctx.listener)
    return auto_topic_creation.answer(EncodedPieces((head, splice(version).count(len(parts)), *parts, tail)), created)


def register(registry: BrokerRegistry) -> None:
    registry.register(md.API, handle, memo=metadata_blocks.answer_memo)
