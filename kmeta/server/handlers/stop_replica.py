"""StopReplica (api key 5): versions 0-4, control listener only.

Behaviour (Kafka 3.x ``ReplicaManager.stopReplicas``):

* On a client listener, or without CLUSTER_ACTION on the cluster for the connection's
  principal (an authorizer is configured): CLUSTER_AUTHORIZATION_FAILED for the request and
  every partition, nothing changes.
* Fenced by broker epoch (STALE_BROKER_EPOCH) then controller epoch (STALE_CONTROLLER_EPOCH):
  the top-level error and every partition carry it, and no replica state changes.
* Per partition (v3+ carries a leader epoch): -1 (no epoch) or -2 (epoch during delete), or
  an epoch at least the one held, stops the replica: its leader/follower state is dropped,
  its waiting fetches are answered, with ``delete_partition`` (v0-2: ``delete_partitions``)
  its log is deleted, and it gets NONE.
  An older epoch: FENCED_LEADER_EPOCH, state kept. A partition this
  broker does not hold is stopped anyway: NONE, as Kafka does.

Versions: v1 broker epoch and partitions grouped by topic; v2 flexible; v3 per-partition
leader epoch and delete flag (KIP-570); v4 KRaft controller flag.
"""

from __future__ import annotations

import asyncio
import time

from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import stop_replica as sr
from kmeta.server.control_order import in_turn
from kmeta.server.handlers.control_log import admission, log_apply
from kmeta.server.state import BrokerContext, BrokerRegistry, BrokerState

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2


def partitions(request: sr.StopReplicaRequest) -> list[tuple[str, int, int]]:
    """(topic, partition, leader epoch) for every partition, whatever the version's layout."""
    if request.version == 0:
        return [(p.topic_name, p.partition_index, NO_EPOCH) for p in request.ungrouped_partitions]
    if request.version <= 2:
        return [(t.name, i, NO_EPOCH) for t in request.topics for i in t.partition_indexes]
    return [
        (t.topic_name, p.partition_index, p.leader_epoch)
        for t in request.topic_states
        for p in t.partition_states
    ]


def _response(request: sr.StopReplicaRequest, error: ErrorCode, errors: list[tuple[str, int, int]]) -> sr.StopReplicaResponse:
    return sr.StopReplicaResponse(
        version=request.version,
        error_code=error,
        partition_errors=tuple(sr.StopReplicaPartitionError(*e) for e in errors),
    )


def refuse(request: sr.StopReplicaRequest, error: ErrorCode) -> sr.StopReplicaResponse:
    """Kafka's StopReplicaRequest.getErrorResponse: every partition carries ``error``."""
    return _response(request, error, [(t, p, int(error)) for t, p, _ in partitions(request)])


def _deleted(request: sr.StopReplicaRequest) -> set[TopicPartitionKey]:
    """The partitions whose logs go with their replica."""
    if request.version <= 2:
        return {(t, p) for t, p, _ in partitions(request)} if request.delete_partitions else set()
    return {
        (t.topic_name, p.partition_index)
        for t in request.topic_states
        for p in t.partition_states
        if p.delete_partition
    }


def _stop(state: BrokerState, topic: str, partition: int, epoch: int, delete: bool) -> ErrorCode:
    held = state.replicas.get((topic, partition))
    if held is not None and epoch not in (NO_EPOCH, EPOCH_DURING_DELETE) and epoch < held.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    state.replicas.pop((topic, partition), None)
    state.replica_stopped(topic, partition, delete)
    return ErrorCode.NONE


def handle(ctx: BrokerContext, request: sr.StopReplicaRequest) -> sr.StopReplicaResponse | asyncio.Task[sr.StopReplicaResponse]:
    """Applied now, or after a control request still being applied in steps."""
    return in_turn(ctx.state.control_order, lambda: _apply(ctx, request))


def _apply(ctx: BrokerContext, request: sr.StopReplicaRequest) -> sr.StopReplicaResponse:
    state: BrokerState = ctx.state
    start = time.monotonic()
    error = admission(ctx, request)
    parts = partitions(request)
    if error != ErrorCode.NONE:
        response = refuse(request, error)
    else:
        deleted = _deleted(request)
        response = _response(
            request,
            ErrorCode.NONE,
            [(t, p, int(_stop(state, t, p, e, (t, p) in deleted))) for t, p, e in parts],
        )
    log_apply(
        ctx,
        request,
        ApiKey.STOP_REPLICA,
        topics=[t for t, _, _ in parts],
        partitions=len(parts),
        start_s=start,
        error=error,
    )
    return response


def register(registry: BrokerRegistry) -> None:
    registry.register(sr.API, handle, on_client=False, refuse=refuse)
