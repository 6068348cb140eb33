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

This module holds the rules; the answers are spliced from encoded per-topic blocks cached on
the snapshot, and whole answers are memoised by request body, behind one seam
(:mod:`kmeta.server.metadata_blocks`, fed :func:`topic_record`): never re-encoded per request.

Versions: v1 adds rack, controller id, is_internal and null-for-all; v2 cluster id; v3
throttle time; v4 allow_auto_topic_creation; v5 offline replicas; v6 LISTENER_NOT_FOUND;
v7 leader epoch; v8 authorized operations; v9 flexible; v10 topic ids; v11 drops cluster
authorized operations; v12 lookup by topic id, nullable names; v13 top-level error code.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.dispatch import EncodedPieces
from kmeta.net.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kmeta.net.security.authorizer import Authorizer, client_host
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md
from kmeta.server import auto_topic_creation, metadata_blocks
from kmeta.server.metadata_blocks import (
    AUTHORIZED_ENTRIES,
    MetadataBlocks,
    PartitionRow,
    View,
    all_topics,
    sendable,
    splice,
    topic_block,
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


def topic_record(
    snap: MetadataSnapshot, view: View, name: str, topic_id: uuid.UUID, rows: Sequence[PartitionRow]
) -> md.MetadataResponseTopic:
    """The rule the cached blocks are encoded from (:data:`kmeta.server.metadata_blocks
    .TopicRecord`): a known topic's record for ``view``, one partition per row, in order."""
    alive, listener, version = snap.alive_nodes, view.listener, view.version
    return md.MetadataResponseTopic(
        ErrorCode.NONE, name, topic_id, name in INTERNAL_TOPICS,
        tuple(_partition(alive, listener, version, *row) for row in rows), _ops(view.topic_ops),
    )  # fmt: skip


def _ops(topic_ops: bool) -> int:
    return TOPIC_OPERATIONS if topic_ops else OPERATIONS_NOT_ASKED


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
            out.append(topic_block(blocks, view, table, name, topic_record))
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
            out.append(topic_block(blocks, view, table, name, topic_record))
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
            return topic_block(blocks, view, table, name, topic_record)
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
        return all_topics(blocks, view, tail, topic_record)
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
