"""Produce (api key 0): versions 0-11, client listeners.

A broker takes a Produce the way a Kafka broker's ``KafkaApis.handleProduceRequest`` and
``ReplicaManager.appendRecords`` do: it checks the records as Kafka's log would, appends them
to the leader's partition log (:mod:`kmeta.server.replica.replica_manager`) and answers with the
offsets the log assigned.

Per partition, in Kafka's order:

* Transactional records (a batch with the transactional bit): without a transactional id, or
  without WRITE on it (with an authorizer), the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
* WRITE on the topic (with an authorizer), else TOPIC_AUTHORIZATION_FAILED (idempotent batches
  need nothing more: Kafka stopped asking IDEMPOTENT_WRITE of Produce in 2.8, KIP-679; it is
  InitProducerId's); a topic or partition the broker's MetadataCache does not hold:
  UNKNOWN_TOPIC_OR_PARTITION.
* ``ProduceRequest.validateRecords`` and the log's checks (:mod:`kmeta.protocol.records.record_batch`):
  CORRUPT_MESSAGE (bad length, magic or CRC), INVALID_RECORD (none or several batches, not
  magic 2, base offset not 0, bad counts, control batch, sequence), UNSUPPORTED_COMPRESSION_TYPE
  (zstd before v7), MESSAGE_TOO_LARGE (over the topic's max.message.bytes, default 1048588).
* ``acks`` not in {-1, 0, 1}: INVALID_REQUIRED_ACKS for every partition that got this far.
* An internal topic (``__consumer_offsets``, ``__transaction_state``): INVALID_TOPIC_EXCEPTION.
* Not a replica here, or not the leader (per the last LeaderAndIsr): NOT_LEADER_OR_FOLLOWER;
  v10+ adds the current leader and epoch (this broker's replica state's, else its
  MetadataCache's, as ``KafkaApis.getCurrentLeader``) and the leader's endpoint on this
  listener (KIP-951), so the producer re-routes without waiting for a metadata refresh.
* Transactional batches (Kafka's transaction verification, KIP-890): appended when the
  producer (id and epoch) has a transaction open in the partition already; the first batch of
  a transaction needs the coordinator to vouch that it added the partition
  (:mod:`kmeta.server.txn.verification`: INVALID_TXN_STATE when it did not,
  NOT_ENOUGH_REPLICAS while the coordinator cannot be asked).
* ``acks=-1`` with fewer in-sync replicas than the topic's min.insync.replicas (default 1):
  NOT_ENOUGH_REPLICAS.
* The log's append (``UnifiedLog.appendAsLeader``): the errors it raises (MESSAGE_TOO_LARGE,
  INVALID_TIMESTAMP, ...; KAFKA_STORAGE_ERROR when the write fails), nothing stored then;
  for a batch with a producer id the producer state's checks
  (:mod:`kmeta.log.producer.producer_state`): OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
  INVALID_TXN_STATE; a retry of one of the producer's last five batches is answered NONE with
  the original's base offset (and its timestamp as log append time), nothing stored.
* Else success: the base offset the log assigned, the log append time (-1 unless the topic's
  message.timestamp.type is LogAppendTime), the log start offset (v5+).

``acks=-1`` waits until the high watermark (the smallest log end
over the ISR, ``Partition.maybe_increment_leader_hw``) covers the batch, at most
``timeout_ms`` (then REQUEST_TIMED_OUT), in the produce purgatory
(:mod:`kmeta.server.replica.delayed_produce`); NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
below min.insync.replicas meanwhile. With an ISR of the leader alone (RF 1) that is at once.

``acks=0``: no response at all (Kafka's sendNoOpResponse); if any partition failed, the
connection is closed instead, so the producer notices and refreshes its metadata, as Kafka
does.

v0-2 (deprecated in Kafka 3.x, removed in 4.0; old clients still send them without asking
ApiVersions) are served as Kafka 3.x serves them: ``ProduceRequest.validateRecords`` checks
nothing before v3, a legacy message set (magic 0/1) is up-converted to one v2 batch as the log
appends it (:func:`kmeta.protocol.records.legacy_records.check_old_produce_records`: uncompressed,
gzip, snappy, lz4; the codec kept), a v2 batch is checked as the log checks a client's.

Versions: v1 throttle time; v2 log append time; v3 transactional id (and magic 2 only, one
batch); v5 log start offset; v7 zstd; v8 record errors and error message; v9 flexible; v10
current leader and node endpoints (tagged); v11 TRANSACTION_ABORTABLE (never answered here).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable
from typing import TypeAlias

from kmeta.log.append_info import LogAppendInfo
from kmeta.metadata.model import TopicPartitionKey
from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.dispatch import NO_RESPONSE, NoResponse
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.records.legacy_records import check_old_produce_records
from kmeta.protocol.records.record_batch import (
    DEFAULT_MAX_MESSAGE_BYTES,
    LOG_OVERHEAD,
    MAGIC_V2,
    RecordBytes,
    RecordsChecked,
    check_produce_records,
)
from kmeta.server.handlers.metadata import INTERNAL_TOPICS
from kmeta.server.replica.delayed_produce import ProducePending
from kmeta.server.replica.partition import Partition
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.txn.verification import verify_transaction

MIN_VERSION = 0
#: Produce v0-2 requests with more record bytes than this are checked in a worker thread
LEGACY_INLINE_BYTES = 64 * 1024
VALID_ACKS = (-1, 0, 1)
_TRANSACTIONAL = 0x10
_PRODUCER = struct.Struct(">qh")  # a batch's producer id and epoch, at byte 43


#: a partition's records checked, and the records to append
Checked = tuple[RecordsChecked, RecordBytes | None]
#: a partition's outcome: the log's append, or the error (and its message)
Outcome: TypeAlias = tuple[ErrorCode, str | None] | LogAppendInfo


def _transactional(records: RecordBytes | None) -> bool:
    """``RequestUtils.hasTransactionalRecords``: the first batch says it is transactional."""
    if records is None or len(records) <= 22 or records[16] != MAGIC_V2:
        return False
    return bool(records[22] & _TRANSACTIONAL)  # (attributes' low byte)


def _in_transaction(partition: Partition, records: RecordBytes) -> bool:
    """Kafka's ``hasOngoingTransaction(producerId, producerEpoch)``: no verification needed."""
    producer_id, epoch = _PRODUCER.unpack_from(records, 43)
    entry = partition.log.producer_state.producers.get(producer_id)
    return entry is not None and entry.producer_epoch == epoch and entry.current_txn_first_offset >= 0


def _partition_response(index: int, outcome: Outcome) -> pr.PartitionProduceResponse:
    if isinstance(outcome, LogAppendInfo):
        return pr.PartitionProduceResponse(
            index=index, error_code=0, base_offset=outcome.first_offset,
            log_append_time_ms=outcome.log_append_time_ms, log_start_offset=outcome.log_start_offset,
        )  # fmt: skip
    error, message = outcome
    return pr.PartitionProduceResponse(
        index=index, error_code=error, base_offset=-1, error_message=message
    )


def _limits(snap: MetadataSnapshot, topic: str) -> tuple[int, int]:
    """The topic's max.message.bytes and min.insync.replicas (its overrides, else Kafka's)."""
    configs = snap.topic_configs.get(topic, {})
    try:
        return (
            int(configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES)),
            int(configs.get("min.insync.replicas", 1)),
        )
    except ValueError:  # (the controller validates configs: not expected)
        return DEFAULT_MAX_MESSAGE_BYTES, 1


def _check_all(snap: MetadataSnapshot, request: pr.ProduceRequest) -> list[Checked]:
    """Every partition's records checked (CRC included), in the request's order, with the
    records to append (v0-2: a legacy set's up-converted batch)."""
    if request.version < 3:
        return [
            check_old_produce_records(p.records, _limits(snap, t.name)[0])
            for t in request.topic_data
            for p in t.partition_data
        ]
    return [
        (check_produce_records(request.version, p.records, _limits(snap, t.name)[0], legacy=False), p.records)
        for t in request.topic_data
        for p in t.partition_data
    ]


def _append(
    ctx: BrokerContext, snap: MetadataSnapshot, acks: int, topic: str, index: int,
    records: RecordBytes | None, checked: RecordsChecked, version: int,
    verified: dict[TopicPartitionKey, ErrorCode] | None = None,
) -> Outcome:  # fmt: skip
    """One partition through ``ReplicaManager.appendRecords``: the append or the error."""
    if checked.error != ErrorCode.NONE:
        return checked.error, checked.message if version >= 8 else None
    if acks not in VALID_ACKS:
        return ErrorCode.INVALID_REQUIRED_ACKS, None
    if topic in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}"
    rm = ctx.state.replica_manager
    partition, error = rm.leader_partition_or_error(topic, index)
    if partition is None:
        return error, None
    assert records is not None  # (checked: one whole batch)
    if checked.transactional and not _in_transaction(partition, records):
        vouched = ErrorCode.INVALID_TXN_STATE if verified is None else verified.get((topic, index), ErrorCode.INVALID_TXN_STATE)
        if vouched != ErrorCode.NONE:
            return vouched, None
    size = int.from_bytes(records[8:12], "big") + LOG_OVERHEAD
    batch = records if len(records) == size else records[:size]  # (a trailing partial batch: none)
    # (checked above, CRC included: the log does not recompute it)
    outcome = rm.append_records(partition, batch, acks, _limits(snap, topic)[1], crc_checked=True)
    if not isinstance(outcome, LogAppendInfo) and version < 8:
        return outcome[0], None
    return outcome


def handle(
    ctx: BrokerContext, request: pr.ProduceRequest
) -> pr.ProduceResponse | NoResponse | Awaitable[pr.ProduceResponse | NoResponse]:
    """Checked and appended on the event loop: with the C CRC-32C a 1 MiB batch is checked in
    ~35 us, where handing it to a worker thread took ~73 us of wall time (best of 5 x 20,
    load ~10), so the thread offload the pure-Python CRC needed is gone. v0-2's legacy sets
    are up-converted record by record in Python (1 MiB of 100-byte records: ~110 ms), so a
    large one is checked in a worker thread while the loop serves the others."""
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    if request.version < 3 and sum(
        len(p.records or b"") for t in request.topic_data for p in t.partition_data
    ) > LEGACY_INLINE_BYTES:
        return _answer_off_loop(ctx, request, snap)
    checks = _check_all(snap, request)
    unverified = _unverified(ctx, request, checks)
    if unverified:
        return _verified_answer(ctx, request, checks, unverified)
    return _answer(ctx, request, snap, checks)


def _unverified(ctx: BrokerContext, request: pr.ProduceRequest, checks: list[Checked]) -> dict[TopicPartitionKey, RecordBytes]:
    """The partitions led here whose transactional batch would open the producer's transaction
    there (their records): the coordinator must vouch for them first."""
    if request.transactional_id is None:
        return {}
    out: dict[TopicPartitionKey, RecordBytes] = {}
    checked = iter(checks)
    rm = ctx.state.replica_manager
    for t in request.topic_data:
        for p in t.partition_data:
            check, records = next(checked)
            if not check.transactional or records is None or check.error != ErrorCode.NONE:
                continue
            partition, _ = rm.leader_partition_or_error(t.name, p.index)
            if partition is not None and not _in_transaction(partition, records):
                out[(t.name, p.index)] = records
    return out


async def _verified_answer(
    ctx: BrokerContext, request: pr.ProduceRequest, checks: list[Checked], unverified: dict[TopicPartitionKey, RecordBytes],
) -> pr.ProduceResponse | NoResponse:  # fmt: skip
    producer_id, epoch = _PRODUCER.unpack_from(next(iter(unverified.values())), 43)
    verified = await verify_transaction(
        ctx.state.txn_coordinator, ctx.state.broker_id, request.transactional_id or "", producer_id, epoch, list(unverified)
    )
    answer = _answer(ctx, request, ctx.state.cache.snapshot, checks, verified)
    return await answer if isinstance(answer, asyncio.Future) else answer


async def _answer_off_loop(
    ctx: BrokerContext, request: pr.ProduceRequest, snap: MetadataSnapshot
) -> pr.ProduceResponse | NoResponse:
    checks = await asyncio.to_thread(_check_all, snap, request)
    answer = _answer(ctx, request, snap, checks)
    return await answer if isinstance(answer, asyncio.Future) else answer


def _answer(
    ctx: BrokerContext, request: pr.ProduceRequest, snap: MetadataSnapshot,
    checks: list[Checked], verified: dict[TopicPartitionKey, ErrorCode] | None = None,
) -> pr.ProduceResponse | NoResponse | asyncio.Future[pr.ProduceResponse | NoResponse]:  # fmt: skip
    version: int = request.version
    acks: int = request.acks
    txn_id: str | None = request.transactional_id
    outcomes: dict[TopicPartitionKey, Outcome]
    if any(_transactional(p.records) for t in request.topic_data for p in t.partition_data) and (
        txn_id is None
        or not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
    ):
        refused: Outcome = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        outcomes = {
            (t.name, p.index): refused for t in request.topic_data for p in t.partition_data
        }
    else:
        outcomes = {}
        checked = iter(checks)
        # (a partition named twice: the last one counts, as in Kafka's map; the followers
        # waiting on the partitions are woken once all are appended: ReplicaManager.actions)
        with ctx.state.replica_manager.actions():
            for t in request.topic_data:
                write = allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, t.name)
                partitions = snap.partition_states.get(t.name)
                for p in t.partition_data:
                    check, records = next(checked)
                    outcome: Outcome
                    if not write:
                        outcome = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                    elif partitions is None or p.index not in partitions:
                        outcome = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                    else:
                        outcome = _append(ctx, snap, acks, t.name, p.index, records, check, version, verified)
                    outcomes[(t.name, p.index)] = outcome
    if acks == -1:
        pending = {
            key: ProducePending(o.last_offset + 1, _limits(snap, key[0])[1])
            for key, o in outcomes.items()
            if isinstance(o, LogAppendInfo)
        }
        if pending:
            return _replicated(ctx, request, snap, outcomes, pending)
    return _finish(ctx, snap, version, acks, outcomes)


def _replicated(
    ctx: BrokerContext, request: pr.ProduceRequest, snap: MetadataSnapshot,
    outcomes: dict[tuple[str, int], Outcome], pending: dict[tuple[str, int], ProducePending],
) -> pr.ProduceResponse | NoResponse | asyncio.Future[pr.ProduceResponse | NoResponse]:  # fmt: skip
    """acks=-1: answered once every appended partition's high watermark covers its batch
    (at once when it does already: RF 1), else from the produce purgatory; a partition not
    replicated within ``timeout_ms`` is REQUEST_TIMED_OUT, as Kafka's DelayedProduce."""
    now: list[pr.ProduceResponse | NoResponse] = []
    later: asyncio.Future[pr.ProduceResponse | NoResponse] | None = None

    def done(errors: dict[tuple[str, int], ErrorCode]) -> None:
        for key, error in errors.items():
            if error != ErrorCode.NONE:
                outcomes[key] = (error, None)
        current = ctx.state.cache.snapshot  # (leaders may have moved while it waited)
        if later is None:
            now.append(_finish(ctx, current, request.version, -1, outcomes))
        elif not later.done():  # (else the connection went away meanwhile)
            try:
                later.set_result(_finish(ctx, current, request.version, -1, outcomes))
            except Exception as exc:  # (a bug: fail this request, not what woke it)
                later.set_exception(exc)

    ctx.state.replica_manager.await_replication(pending, request.timeout_ms, done)
    if now:
        return now[0]
    later = asyncio.get_running_loop().create_future()
    return later


def _finish(
    ctx: BrokerContext, snap: MetadataSnapshot, version: int, acks: int,
    outcomes: dict[tuple[str, int], Outcome],
) -> pr.ProduceResponse | NoResponse:  # fmt: skip
    results = ctx.state.produce_results
    for outcome in outcomes.values():
        results["NONE" if isinstance(outcome, LogAppendInfo) else ErrorCode(outcome[0]).name] += 1
    if acks == 0:
        failed = sorted(
            f"{t}-{i}: {ErrorCode(o[0]).name}"
            for (t, i), o in outcomes.items()
            if not isinstance(o, LogAppendInfo)
        )
        if failed:  # no response expected: closing tells the producer (KafkaApis does the same)
            raise ProtocolError(
                f"Produce with acks=0 failed ({', '.join(failed)}): closing the connection"
            )
        return NO_RESPONSE
    return _response(ctx, snap, version, outcomes)


def _response(
    ctx: BrokerContext,
    snap: MetadataSnapshot,
    version: int,
    outcomes: dict[TopicPartitionKey, Outcome],
) -> pr.ProduceResponse:
    by_topic: dict[str, list[pr.PartitionProduceResponse]] = {}
    endpoints: dict[int, pr.NodeEndpoint] = {}
    for (topic, index), outcome in outcomes.items():
        response = _partition_response(index, outcome)
        if version >= 10 and response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leader, epoch = ctx.state.replica_manager.current_leader(topic, index)
            response = response._replace(current_leader=pr.LeaderIdAndEpoch(leader, epoch))
            node = snap.alive_nodes.get(leader, {}).get(ctx.listener)
            if node is not None:
                endpoints[node.id] = pr.NodeEndpoint(node.id, node.host, node.port, node.rack)
        by_topic.setdefault(topic, []).append(response)
    return pr.ProduceResponse(
        version=version,
        responses=tuple(
            pr.TopicProduceResponse(name, tuple(parts)) for name, parts in by_topic.items()
        ),
        node_endpoints=tuple(endpoints[n] for n in sorted(endpoints)),
    )


def register(registry: BrokerRegistry) -> None:
    # (each partition's records a view of the request's frame, not a copy: kmeta.protocol.codec.record_views)
    registry.register(
        pr.API, handle, on_control=False, min_version=MIN_VERSION, decode=pr.REQUEST.decode_viewing_records
    )
