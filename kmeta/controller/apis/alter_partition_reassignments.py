"""AlterPartitionReassignments (api key 45): version 0, forwarded by brokers.

Behaviour (the reassignment itself: :mod:`kmeta.controller.topics.reassignment`):

* Each partition's target replicas start (or replace) a reassignment; null replicas cancel the
  one in progress. Errors per partition as Kafka's: UNKNOWN_TOPIC_OR_PARTITION,
  NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT (with Kafka's messages).
* Applied in one event; answered once the first step (RS = TRS + ORS, or the final replica set
  when nothing has to catch up) reached the live brokers, or after timeout_ms with
  REQUEST_TIMED_OUT for the partitions that were accepted (they still proceed).
* The store refusing the event's writes (disk full, I/O error): KAFKA_STORAGE_ERROR for each
  partition; nothing of the request was kept.
* More partitions than ``--max-partitions-per-request`` in one request: refused whole, every
  entry POLICY_VIOLATION (the rule CreateTopics, CreatePartitions and DeleteTopics share, see
  :func:`kmeta.controller.apis.common.too_large`); counted before any event is queued.
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    refusal_code,
    too_large,
    wait_for,
)
from kmeta.controller.store.errors import StorageError
from kmeta.controller.topics.reassignment import AlterResult
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition_reassignments as apr


def _response(request: apr.AlterPartitionReassignmentsRequest, results: list[AlterResult]) -> apr.AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[apr.ReassignablePartitionResponse]] = {}
    for topic, p, code, message in results:
        by_topic.setdefault(topic, []).append(apr.ReassignablePartitionResponse(p, code, message))
    return apr.AlterPartitionReassignmentsResponse(
        version=request.version,
        error_code=0,
        error_message=None,
        responses=tuple(
            apr.ReassignableTopicResponse(topic, tuple(parts)) for topic, parts in by_topic.items()
        ),
    )


async def handle(ctx: ControllerRequestContext, request: apr.AlterPartitionReassignmentsRequest) -> apr.AlterPartitionReassignmentsResponse:
    c = controller_of(ctx)
    entries = [
        (t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
        for t in request.topics
        for p in t.partitions
    ]
    limit = c.config.max_partitions_per_request
    refusal = too_large(0, len(entries), limit, what="partitions to reassign")
    if refusal is not None:
        return _response(
            request, [(t, p, ErrorCode.POLICY_VIOLATION, refusal) for t, p, _ in entries]
        )
    try:
        results, barrier = await c.enqueue(
            "ApiPartitionReassignment",
            lambda: c.reassignments.alter(entries, forwarder_of(ctx)),
        )
    except StorageError as exc:  # nothing was kept (see kmeta.controller.controller)
        refused = refusal_code(exc)
        return _response(request, [(t, p, refused, str(exc)) for t, p, _ in entries])
    if not await wait_for(barrier, request.timeout_ms):
        results = [
            (t, p, ErrorCode.REQUEST_TIMED_OUT, None) if code == 0 else (t, p, code, message)
            for t, p, code, message in results
        ]
    return _response(request, results)


def register(registry: ControllerRegistry) -> None:
    registry.register(apr.API, handle)
