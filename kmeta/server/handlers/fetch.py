"""Fetch (api key 1): versions 4-17, client and control listeners (followers fetch on the control listener, kmeta.server.fetcher.replica_fetcher).

Behaviour (Kafka 3.x ``KafkaApis.handleFetchRequest`` and ``ReplicaManager.fetchMessages``):

* Fetch sessions (KIP-227) are declined as Kafka allows: a full fetch (session epoch 0 or -1)
  is answered in full with session id 0, so the client sends full fetches from then on
  (``FetchSessionHandler``); an incremental one (any other epoch) names a session this broker
  never made: FETCH_SESSION_ID_NOT_FOUND, no partitions.
* Per partition, in the request's order: a v13+ topic id this broker does not know:
  UNKNOWN_TOPIC_ID. A consumer (replica id < 0) needs READ on the topic, else
  TOPIC_AUTHORIZATION_FAILED; a replica fetch (replica id >= 0, or ReplicaState's from v15)
  needs CLUSTER_ACTION, else every partition is TOPIC_AUTHORIZATION_FAILED. A partition the
  MetadataCache does not hold: UNKNOWN_TOPIC_OR_PARTITION.
* Then the replica manager reads (``readFromLog``): a replica not held here
  NOT_LEADER_OR_FOLLOWER; ``current_leader_epoch`` older than ours FENCED_LEADER_EPOCH, newer
  UNKNOWN_LEADER_EPOCH; not the leader NOT_LEADER_OR_FOLLOWER (no follower reads, KIP-392); a
  replica fetch from a broker that is not one of the partition's replicas NOT_LEADER_OR_FOLLOWER
  (UNKNOWN_LEADER_EPOCH when it gave an epoch), or naming a broker epoch (v15 ReplicaState)
  older than that replica fetched with before NOT_LEADER_OR_FOLLOWER; a replica fetch records
  the follower's log end, which moves the high watermark (:mod:`kmeta.server.replica.replica_reads`);
  a fetch offset outside [log start, log end] OFFSET_OUT_OF_RANGE; a v12+
  ``last_fetched_epoch`` whose end is below the fetch offset: the diverging epoch, no records.
  From v16 NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry the current leader and epoch
  and that leader's endpoint on this listener (KIP-951).
* Sizes: ``max_bytes`` capped at fetch.max.bytes (55 MiB); the first partition with records
  returns its first batch whole whatever the limits (KIP-74), the others only whole batches
  within their ``partition_max_bytes`` and what is left of ``max_bytes``. A negative size met
  with records to read is UNKNOWN_SERVER_ERROR, as Kafka's segment read refuses it.
* Isolation: consumers read up to the high watermark (read_uncommitted) or the last stable
  offset (read_committed: below the first open transaction's first offset), with the aborted
  transactions (producer id, first offset) the records read overlap, from the log's index
  (``UnifiedLog.collectAbortedTransactions``); replicas read to the log end.
* ``min_bytes``/``max_wait_ms``: with fewer bytes readable, no error and ``max_wait_ms`` > 0,
  the fetch waits in the purgatory until an append (or a leader change, a stopped replica)
  makes it answerable, or the time is up (:mod:`kmeta.server.replica.delayed_fetch`).
* ``preferred_read_replica`` is always -1 (no rack-aware follower reads).
* Before v10 a topic whose compression.type is zstd is UNSUPPORTED_COMPRESSION_TYPE; before
  v6 KAFKA_STORAGE_ERROR is answered NOT_LEADER_OR_FOLLOWER (those clients do not know it).
* Record bytes go out as the log stored them, never re-encoded: a partition's records are a
  piece of the answer of their own (:func:`_encoded`), so a large read reaches the socket
  without being copied into the answer's buffer.

Versions (served 4-17: message format v2 only, as Kafka 4.0): v5 log start offset; v7
sessions; v9 current leader epoch; v10 zstd; v11 rack id and preferred read replica; v12
flexible, last fetched epoch and diverging epoch; v13 topic ids; v15 ReplicaState; v16 node
endpoints (KIP-951); v17 replica directory id.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Mapping

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.dispatch import EncodedPieces
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, cluster_allowed
from kmeta.protocol.codec.codegen import uvarint_bytes
from kmeta.protocol.codec.splice import Splice
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import fetch as fe
from kmeta.server.replica.delayed_fetch import (
    FetchIsolation,
    FetchParams,
    FetchPartitionInfo,
    LogReadResult,
)
from kmeta.server.replica.replica_manager import FETCH_MAX_BYTES, ReplicaManager
from kmeta.server.state import BrokerContext, BrokerRegistry

MIN_VERSION = 4
_FULL_EPOCHS = (0, -1)  # (INITIAL_EPOCH, FINAL_EPOCH: a full fetch)
_LEADER_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

#: a partition's place in the answer: (topic name or None if unknown, topic id, index)
Slot = tuple[str | None, uuid.UUID, int]


def _names_by_id(snap: MetadataSnapshot) -> Mapping[uuid.UUID, str]:
    """Topic id -> name, once per snapshot (Fetch v13+ names topics by id)."""
    names: dict[uuid.UUID, str] | None = snap.derived.get("fetch.names_by_id")
    if names is None:
        names = snap.derived["fetch.names_by_id"] = {i: n for n, i in snap.topic_ids.items()}
    return names


def replica_id_of(request: fe.FetchRequest) -> int:
    """The fetching replica (-1: a consumer): ReplicaState's from v15 (KIP-903)."""
    if request.version >= 15:
        return -1 if request.replica_state is None else request.replica_state.replica_id
    return request.replica_id


def replica_epoch_of(request: fe.FetchRequest) -> int:
    """The fetching broker's epoch (-1: not given): ReplicaState's from v15 (KIP-903)."""
    if request.version >= 15 and request.replica_state is not None:
        return request.replica_state.replica_epoch
    return -1


def handle(ctx: BrokerContext, request: fe.FetchRequest) -> fe.FetchResponse | EncodedPieces | Awaitable[EncodedPieces]:
    version: int = request.version
    if request.session_epoch not in _FULL_EPOCHS:
        return fe.FetchResponse(version=version, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    replica_id = replica_id_of(request)
    follower = replica_id >= 0
    cluster_action = follower and cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    names = _names_by_id(snap) if version >= 13 else {}
    readable: dict[str, bool] = {}
    errors: dict[Slot, ErrorCode] = {}
    wanted: dict[Slot, FetchPartitionInfo] = {}
    slots: dict[Slot, None] = {}  # (a partition named twice: its first place, its last data)
    for t in request.topics:
        name: str | None = names.get(t.topic_id) if version >= 13 else t.topic
        for p in t.partitions:
            slot = (name, t.topic_id, p.partition)
            slots[slot] = None
            error = ErrorCode.NONE
            if follower and not cluster_action:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            elif not follower and not readable.setdefault(
                name, allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name)
            ):  # fmt: skip
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif snap.partition(name, p.partition) is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if error != ErrorCode.NONE:
                errors[slot] = error
                wanted.pop(slot, None)
                continue
            errors.pop(slot, None)
            assert name is not None
            wanted[slot] = FetchPartitionInfo(
                name, p.partition, p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch, p.last_fetched_epoch if version >= 12 else -1,
            )  # fmt: skip
    max_bytes = min(request.max_bytes, FETCH_MAX_BYTES)
    params = FetchParams(
        replica_id, request.max_wait_ms, min(request.min_bytes, max_bytes), max_bytes,
        FetchIsolation.of(replica_id, request.isolation_level), replica_epoch_of(request),
    )  # fmt: skip
    rm: ReplicaManager = ctx.state.replica_manager
    order = list(wanted)
    now: list[EncodedPieces] = []  # (answered at once: no future needed)
    later: asyncio.Future[EncodedPieces] | None = None

    def answer(results: list[LogReadResult]) -> None:
        read = dict(zip(order, results, strict=True))
        if later is None:
            now.append(_encoded(ctx, rm, version, params, list(slots), read, errors))
        elif not later.done():  # (else the connection went away meanwhile)
            try:
                later.set_result(_encoded(ctx, rm, version, params, list(slots), read, errors))
            except Exception as exc:  # (a bug: fail this request, not the append that woke it)
                later.set_exception(exc)

    rm.fetch_messages(params, list(wanted.values()), answer)
    if now:
        return now[0]
    later = asyncio.get_running_loop().create_future()
    return later


def _leader_hint(
    ctx: BrokerContext, rm: ReplicaManager, snap: MetadataSnapshot, topic: str, index: int,
    endpoints: dict[int, fe.NodeEndpoint],
) -> fe.LeaderIdAndEpoch:  # fmt: skip
    """KIP-951: the current leader (:meth:`ReplicaManager.current_leader`); its endpoint on
    this listener joins ``endpoints``."""
    leader, epoch = rm.current_leader(topic, index)
    node = snap.alive_node(leader, ctx.listener)
    if node is not None:
        endpoints[node.id] = fe.NodeEndpoint(node.id, node.host, node.port, node.rack)
    return fe.LeaderIdAndEpoch(leader, epoch)


def _encoded(
    ctx: BrokerContext, rm: ReplicaManager, version: int, params: FetchParams, slots: list[Slot],
    read: dict[Slot, LogReadResult], errors: dict[Slot, ErrorCode],
) -> EncodedPieces:  # fmt: skip
    """The answer as pieces: each partition's records a piece of its own, as the log gave
    them (the codec would copy them into the answer's buffer)."""
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    committed = params.isolation is FetchIsolation.TXN_COMMITTED
    outer, inner = _splices(version)
    flexible = outer.flexible
    endpoints: dict[int, fe.NodeEndpoint] = {}
    topics: list[tuple[str | None, uuid.UUID, list[int], list[bytes]]] = []
    for slot in slots:
        name, topic_id, index = slot
        if not topics or topics[-1][:2] != (name, topic_id):
            topics.append((name, topic_id, [0], []))
        topics[-1][2][0] += 1
        pieces = topics[-1][3]
        result = read.get(slot)
        if result is None:
            result = LogReadResult.failed(errors[slot])
        elif version < 10 and name is not None and _zstd(snap, name):
            result = LogReadResult.failed(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        elif version <= 5 and result.error == ErrorCode.KAFKA_STORAGE_ERROR:
            result = LogReadResult.failed(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        hint = None
        if version >= 16 and result.error in _LEADER_HINTED and name is not None:
            hint = _leader_hint(ctx, rm, snap, name, index, endpoints)
        ok = result.error == ErrorCode.NONE
        diverging = result.diverging_epoch
        data = fe.PartitionData(
            partition_index=index, error_code=result.error, high_watermark=result.high_watermark,
            last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
            diverging_epoch=None if diverging is None else fe.EpochEndOffset(*diverging),
            current_leader=hint,
            aborted_transactions=tuple(fe.AbortedTransaction(*a) for a in result.aborted_transactions)
            if committed and ok else None,
        )  # fmt: skip
        records = result.records
        element = inner.element(data)  # (records empty: the last field before the tags)
        if not records:
            pieces.append(element)
            continue
        # a partition with records has no tagged field set: its element ends with the empty
        # records' length (compact 0x01 / int32 0) and, when flexible, an empty tag section
        cut = 2 if flexible else 4
        pieces.append(element[:-cut])
        pieces.append(_length(len(records), flexible))
        pieces.append(records if type(records) is bytes else bytes(records))
        if flexible:
            pieces.append(b"\x00")
    out: list[bytes] = [
        outer.head(throttle_time_ms=0, error_code=0, session_id=0), outer.count(len(topics))
    ]
    for name, topic_id, count, pieces in topics:
        head = inner.head(topic=name or "", topic_id=topic_id if version >= 13 else ZERO_UUID)
        out += (head, inner.count(count[0]), *pieces, inner.tail())
    out.append(outer.tail(node_endpoints=tuple(endpoints[n] for n in sorted(endpoints))))
    return EncodedPieces(out)


def _zstd(snap: MetadataSnapshot, topic: str) -> bool:
    """The topic's compression.type is zstd: a fetcher older than v10 cannot read it."""
    return snap.topic_configs.get(topic, {}).get("compression.type") == "zstd"


_SPLICES: dict[int, tuple[Splice, Splice]] = {}


def _splices(version: int) -> tuple[Splice, Splice]:
    """The answer laid out around its topics, and a topic around its partitions (compiled
    once per version)."""
    splices = _SPLICES.get(version)
    if splices is None:
        outer = fe.RESPONSE.splice(version, "responses")
        splices = _SPLICES[version] = (outer, outer.inner("partitions"))
    return splices


def _length(n: int, flexible: bool) -> bytes:
    """A records field's length prefix: compact (uvarint n + 1) when flexible, else int32."""
    return uvarint_bytes(n + 1) if flexible else n.to_bytes(4, "big")


def register(registry: BrokerRegistry) -> None:
    registry.register(fe.API, handle, min_version=MIN_VERSION)
