"""ListPartitionReassignments (api key 46): version 0, forwarded by brokers.

Behaviour:

* Null topics: every reassignment in progress; else those among the partitions listed (a
  partition not being reassigned, or that does not exist, is left out, as Kafka).
* Each with its full replica set (RS = TRS + ORS), adding (AR) and removing (RR) replicas.
* Read in a controller event, so it reflects every reassignment acknowledged before it.
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    refusal_code,
)
from kmeta.controller.store.errors import StorageError
from kmeta.protocol.messages import list_partition_reassignments as lpr


async def handle(ctx: ControllerRequestContext, request: lpr.ListPartitionReassignmentsRequest) -> lpr.ListPartitionReassignmentsResponse:
    c = controller_of(ctx)
    asked = None
    if request.topics is not None:
        asked = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    try:
        listed = await c.enqueue(
            "ListPartitionReassignments", lambda: c.reassignments.in_progress(asked)
        )
    except StorageError as exc:  # (its group's commit failed: the state was reloaded)
        return lpr.ListPartitionReassignmentsResponse(
            version=request.version,
            error_code=refusal_code(exc),
            error_message=str(exc),
            topics=(),
        )
    by_topic: dict[str, list[lpr.OngoingPartitionReassignment]] = {}
    for (topic, p), replicas, adding, removing in listed:
        by_topic.setdefault(topic, []).append(
            lpr.OngoingPartitionReassignment(p, replicas, adding, removing)
        )
    return lpr.ListPartitionReassignmentsResponse(
        version=request.version,
        error_code=0,
        error_message=None,
        topics=tuple(
            lpr.OngoingTopicReassignment(topic, tuple(parts)) for topic, parts in by_topic.items()
        ),
    )


def register(registry: ControllerRegistry) -> None:
    registry.register(lpr.API, handle)
