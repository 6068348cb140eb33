"""WriteTxnMarkers (api key 27): versions 0-1, control listener only (a transaction
coordinator's broker sends it to partition leaders).

Behaviour (Kafka 3.x ``KafkaApis.handleWriteTxnMarkersRequest``):

* On a client listener, or without CLUSTER_ACTION on the cluster (an authorizer is
  configured): CLUSTER_AUTHORIZATION_FAILED for every partition of every marker.
* Per marker, per partition: a partition this broker holds no replica of (or the metadata
  does not know): UNKNOWN_TOPIC_OR_PARTITION. Else the COMMIT (``transaction_result`` true) or
  ABORT control batch is appended at the leader with the marker's producer id, producer epoch
  and coordinator epoch (internal topics included), as ``appendRecords`` with acks=-1:
  NOT_LEADER_OR_FOLLOWER on a follower, NOT_ENOUGH_REPLICAS below min.insync.replicas,
  INVALID_PRODUCER_EPOCH (an epoch older than the producer's), TRANSACTION_COORDINATOR_FENCED
  (a coordinator epoch older than the last marker's), KAFKA_STORAGE_ERROR.
* The transaction completes in the partition's producer state (an abort enters the
  aborted-transaction index) and the last stable offset moves once the marker is below the
  high watermark; the answer waits for that (REQUEST_TIMED_OUT after 30 s, Kafka's
  request.timeout.ms; NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
  min.insync.replicas meanwhile).

Versions: v1 flexible.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kmeta.log.append_info import LogAppendInfo
from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import write_txn_markers as wtm
from kmeta.server.replica.delayed_produce import ProducePending
from kmeta.server.replica.replica_manager import ReplicaManager
from kmeta.server.state import BrokerContext, BrokerRegistry

#: Kafka's request.timeout.ms, which its marker appends wait at most
MARKER_TIMEOUT_MS = 30_000

Key = tuple[str, int]


def _response(request: wtm.WriteTxnMarkersRequest, errors: list[dict[Key, ErrorCode]]) -> wtm.WriteTxnMarkersResponse:
    markers = []
    for marker, by_partition in zip(request.markers, errors, strict=True):
        topics: dict[str, list[wtm.WritableTxnMarkerPartitionResult]] = {}
        for (topic, index), error in by_partition.items():
            topics.setdefault(topic, []).append(wtm.WritableTxnMarkerPartitionResult(index, error))
        markers.append(wtm.WritableTxnMarkerResult(
            marker.producer_id,
            tuple(wtm.WritableTxnMarkerTopicResult(t, tuple(ps)) for t, ps in topics.items()),
        ))  # fmt: skip
    return wtm.WriteTxnMarkersResponse(version=request.version, markers=tuple(markers))


def refuse(request: wtm.WriteTxnMarkersRequest, error: ErrorCode) -> wtm.WriteTxnMarkersResponse:
    return _response(
        request,
        [{(t.name, i): error for t in m.topics for i in t.partition_indexes} for m in request.markers],
    )


def _min_insync(snap: MetadataSnapshot, topic: str) -> int:
    try:
        return int(snap.topic_configs.get(topic, {}).get("min.insync.replicas", 1))
    except ValueError:
        return 1


def _append(
    rm: ReplicaManager, snap: MetadataSnapshot, marker: wtm.WritableTxnMarker,
    errors: dict[Key, ErrorCode], pending: dict[Key, ProducePending],
) -> None:  # fmt: skip
    for t in marker.topics:
        for index in t.partition_indexes:
            key = (t.name, index)
            partition, _ = rm.get_partition_or_error(t.name, index)
            if partition is None or snap.partition(t.name, index) is None:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            min_isr = _min_insync(snap, t.name)
            outcome = rm.append_txn_marker(
                partition, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                marker.transaction_result, min_isr,
            )  # fmt: skip
            if isinstance(outcome, LogAppendInfo):
                errors[key] = ErrorCode.NONE
                pending[key] = ProducePending(outcome.last_offset + 1, min_isr)
            else:
                errors[key] = outcome[0]


async def handle(ctx: BrokerContext, request: wtm.WriteTxnMarkersRequest) -> wtm.WriteTxnMarkersResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    rm: ReplicaManager = ctx.state.replica_manager
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    loop = asyncio.get_running_loop()
    errors: list[dict[Key, ErrorCode]] = []
    waits: list[asyncio.Future[dict[Key, ErrorCode]]] = []
    for marker in request.markers:
        by_partition: dict[Key, ErrorCode] = {}
        pending: dict[Key, ProducePending] = {}
        _append(rm, snap, marker, by_partition, pending)
        errors.append(by_partition)
        if pending:
            done: asyncio.Future[dict[Key, ErrorCode]] = loop.create_future()
            rm.await_replication(pending, MARKER_TIMEOUT_MS, _settle(done))
            waits.append(done)
        else:
            waits.append(_resolved(loop))
    for by_partition, done in zip(errors, waits, strict=True):
        by_partition.update(await done)
    return _response(request, errors)


def _settle(done: asyncio.Future[dict[Key, ErrorCode]]) -> Callable[[dict[Key, ErrorCode]], None]:
    def settle(got: dict[Key, ErrorCode]) -> None:
        if not done.done():  # (the connection may have gone meanwhile)
            done.set_result(dict(got))

    return settle


def _resolved(loop: asyncio.AbstractEventLoop) -> asyncio.Future[dict[Key, ErrorCode]]:
    done: asyncio.Future[dict[Key, ErrorCode]] = loop.create_future()
    done.set_result({})
    return done


def register(registry: BrokerRegistry) -> None:
    registry.register(wtm.API, handle, on_client=False, refuse=refuse)
