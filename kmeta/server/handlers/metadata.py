"""Metadata (api key 3): versions 0-13, on client and control listeners.

Kafka 3.x ZooKeeper-mode semantics (``KafkaApis.handleTopicMetadataRequest`` and
``ZkMetadataCache.getTopicMetadata``), with topic auto-creation off:

* Topics: null means all (v1+); an empty list means none, except v0 where it means all.
  Duplicates are answered once.
* Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; a name that is not a legal topic name
  (empty, "." or "..", over 249 chars, outside ``[a-zA-Z0-9._-]``): INVALID_TOPIC_EXCEPTION.
  The broker never creates topics (as Kafka with auto.create.topics.enable=false).
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

Responses are spliced from encoded per-topic blocks cached on the snapshot
(:mod:`kmeta.server.metadata_blocks`), never re-encoded per request.

Versions: v1 adds rack, controller id, is_internal and null-for-all; v2 cluster id; v3
throttle time; v4 allow_auto_topic_creation; v5 offline replicas; v6 LISTENER_NOT_FOUND;
v7 leader epoch; v8 authorized operations; v9 flexible; v10 topic ids; v11 drops cluster
authorized operations; v12 lookup by topic id, nullable names; v13 top-level error code.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net import zerocopy
from kmeta.net.dispatch import EncodedPieces, HandlerRegistry, RequestContext
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md
from kmeta.server import metadata_blocks as blocks

ZERO_UUID = uuid.UUID(int=0)
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


def partitions(snap: MetadataSnapshot, topic: str, version: int, listener: str) -> tuple[Any, ...]:
    """The partition records of ``topic`` as seen from ``listener`` at ``version``."""
    alive = snap.alive_nodes
    filter_dead = version == 0
    out = []
    for index, state in sorted(snap.partition_states[topic].items()):
        leader_nodes = alive.get(state.leader)
        replicas, isr = state.replicas, state.isr
        if filter_dead:
            replicas = tuple(b for b in replicas if listener in alive.get(b, ()))
            isr = tuple(b for b in isr if listener in alive.get(b, ()))
        if leader_nodes is None or listener not in leader_nodes:
            if leader_nodes is None or version < 6:
                error = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                error = ErrorCode.LISTENER_NOT_FOUND
            leader = -1
        else:
            leader = state.leader
            short = len(replicas) < len(state.replicas) or len(isr) < len(state.isr)
            error = ErrorCode.REPLICA_NOT_AVAILABLE if short else ErrorCode.NONE
        out.append(
            md.MetadataResponsePartition(
                error, index, leader, state.leader_epoch, replicas, isr, state.offline_replicas
            )
        )
    return tuple(out)


def _ops(topic_ops: bool) -> int:
    return TOPIC_OPERATIONS if topic_ops else OPERATIONS_NOT_ASKED


def _topic_block(
    snap: MetadataSnapshot, name: str, version: int, listener: str, topic_ops: bool
) -> bytes:
    memo_key = ("md-topics", version, listener, topic_ops)
    memo: dict[str, bytes] | None = snap.derived.get(memo_key)
    if memo is None:
        memo = snap.derived[memo_key] = {}
    block = memo.get(name)
    if block is None:
        record = md.MetadataResponseTopic(
            ErrorCode.NONE,
            name,
            snap.topic_ids.get(name, ZERO_UUID),
            name in INTERNAL_TOPICS,
            partitions(snap, name, version, listener),
            _ops(topic_ops),
        )
        block = memo[name] = blocks.encode_topic(version, record)
    return block


def _all_topics(snap: MetadataSnapshot, version: int, listener: str, topic_ops: bool, tail: bytes) -> bytes:
    """The whole answer body for all topics, as one piece (sent without a copy when large)."""
    key = ("md-all", version, listener, topic_ops, tail)
    body: bytes | None = snap.derived.get(key)
    if body is None:
        names = snap.topic_names_sorted
        body = snap.derived[key] = zerocopy.spliceable(b"".join((
            blocks.head(snap, version, listener),
            blocks.count_prefix(version, len(names)),
            *(_topic_block(snap, n, version, listener, topic_ops) for n in names),
            tail,
        )))  # fmt: skip
    return body


def _missing_block(name: str | None, topic_id: uuid.UUID, error: ErrorCode, version: int, topic_ops: bool) -> bytes:
    record = md.MetadataResponseTopic(
        error, name, topic_id, name in INTERNAL_TOPICS, (), _ops(topic_ops)
    )
    return blocks.encode_topic(version, record)


def _by_name(snap: MetadataSnapshot, names: Iterable[str], version: int, listener: str, topic_ops: bool) -> list[bytes]:
    out = []
    for name in dict.fromkeys(names):
        if name in snap.partition_states:
            out.append(_topic_block(snap, name, version, listener, topic_ops))
        else:
            error = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if is_valid_topic_name(name)
                else ErrorCode.INVALID_TOPIC_EXCEPTION
            )
            out.append(_missing_block(name, ZERO_UUID, error, version, topic_ops))
    return out


def _names_by_id(snap: MetadataSnapshot) -> dict[uuid.UUID, str]:
    names: dict[uuid.UUID, str] | None = snap.derived.get("topic-names-by-id")
    if names is None:
        names = snap.derived["topic-names-by-id"] = {v: k for k, v in snap.topic_ids.items()}
    return names


def error_response(request: Any, error: ErrorCode) -> Any:
    """Kafka's MetadataRequest.getErrorResponse: each requested topic carries ``error``."""
    topics = tuple(
        md.MetadataResponseTopic(error, t.name if t.name is not None else "", t.topic_id, False, ())
        for t in request.topics or ()
    )
    return md.MetadataResponse(version=request.version, topics=topics)


def handle(ctx: RequestContext, request: Any) -> Any:
    """The response: a record (error path) or the encoded body pieces."""
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    version: int = request.version
    listener = ctx.listener
    topic_ops = version >= 8 and request.include_topic_authorized_operations
    cluster_ops = 8 <= version <= 10 and request.include_cluster_authorized_operations
    tail = blocks.tail(version, CLUSTER_OPERATIONS if cluster_ops else OPERATIONS_NOT_ASKED)
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        return EncodedPieces((_all_topics(snap, version, listener, topic_ops, tail),))
    head = blocks.head(snap, version, listener)
    if any(t.name is None for t in requested) or (
        version < 12 and any(t.topic_id != ZERO_UUID for t in requested)
    ):
        by_id = version >= 12 and all(t.topic_id != ZERO_UUID for t in requested if t.name is None)
        if not by_id:
            return error_response(request, ErrorCode.INVALID_REQUEST)
    ids = [t.topic_id for t in requested if t.topic_id != ZERO_UUID] if version >= 12 else []
    if ids:
        known = _names_by_id(snap)
        parts = []
        for topic_id in dict.fromkeys(ids):
            name = known.get(topic_id)
            if name is None:
                parts.append(_missing_block(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, version, topic_ops))
            else:
                parts.append(_topic_block(snap, name, version, listener, topic_ops))
    else:
        parts = _by_name(snap, (t.name for t in requested), version, listener, topic_ops)
    return EncodedPieces((head, blocks.count_prefix(version, len(parts)), *parts, tail))


#: raw request bodies up to this size are memoised per snapshot, up to this many of them
_MEMO_BODY_MAX = 1024
_MEMO_ENTRIES_MAX = 4096
#: memoised answers smaller than this are kept joined (one piece to copy per answer)
_JOIN_BELOW = 32 * 1024


def memo(state: Any, listener: str, version: int, body: bytes) -> Any:
    """The memoised answer to exactly this request body, or None (see :func:`handle_raw`)."""
    table: dict[Any, Any] | None = state.cache.snapshot.derived.get("md-raw")
    return None if table is None else table.get((version, listener, body))


def handle_raw(ctx: RequestContext, frame: bytes, pos: int) -> Any:
    """Same answer as :func:`handle`; repeated identical requests skip decoding entirely.

    The answer depends only on the snapshot, listener, version and body bytes (never on the
    client id or correlation id), so it is memoised on the snapshot under those, bounded in
    key size and count. Small answers are memoised joined into one ``bytes``.
    """
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    version = ctx.header.api_version
    key = (version, ctx.listener, frame[pos:])
    table: dict[Any, Any] | None = snap.derived.get("md-raw")
    if table is None:
        table = snap.derived["md-raw"] = {}
    else:
        hit = table.get(key)
        if hit is not None:
            return hit
    result = handle(ctx, md.REQUEST.decode(frame, version, pos))
    if isinstance(result, EncodedPieces) and len(key[2]) <= _MEMO_BODY_MAX and len(table) < _MEMO_ENTRIES_MAX:
        if sum(map(len, result)) < _JOIN_BELOW:
            result = b"".join(result)
        table[key] = result
    return result


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.METADATA, handle, handle_raw=handle_raw, memo=memo)
