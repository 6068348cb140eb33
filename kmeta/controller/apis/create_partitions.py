"""CreatePartitions (api key 37, v0-3).

Forwarded by brokers: validated with Kafka's error codes, applied in one event (see
:mod:`kmeta.controller.topics.admin_manager`), answered after the propagation barrier (or the
forwarding broker's ack with the barrier off). A change not propagated within the request's
timeout_ms is answered REQUEST_TIMED_OUT (it still happened), with a message naming the
brokers that rejected it or did not answer. The limits on one request are
:mod:`kmeta.controller.apis.common`' (POLICY_VIOLATION for the whole request). A
change the store refused is KAFKA_STORAGE_ERROR with the cause as the message.
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    MAX_TOPICS_PER_REQUEST,
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    not_propagated,
    outcome,
    refusal_code,
    requested,
    too_large,
    wait_for,
)
from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.store.errors import StorageError
from kmeta.controller.topics.admin import TopicPlan
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp


async def handle(ctx: ControllerRequestContext, req: cp.CreatePartitionsRequest) -> cp.CreatePartitionsResponse:
    c = controller_of(ctx)
    cfg = c.config

    def run() -> tuple[str | None, list[TopicPlan], Barrier | None]:
        # counted in the event: what a topic adds depends on its current partition count
        asked = 0
        if len(req.topics) <= MAX_TOPICS_PER_REQUEST:
            for t in req.topics:
                info = c.state.topics.get(t.name)
                if info is not None and requested(t.count, cfg.max_partitions_per_topic):
                    asked += max(0, t.count - len(info.partitions))
        refusal = too_large(len(req.topics), asked, cfg.max_partitions_per_request)
        if refusal is not None:
            return refusal, [], None
        plans, barrier = c.admin.create_partitions(req.topics, req.validate_only, forwarder_of(ctx))
        return None, plans, barrier

    refused_with = ErrorCode.POLICY_VIOLATION
    try:
        refusal, plans, barrier = await c.enqueue("CreatePartitions", run)
    except StorageError as exc:
        refusal, refused_with = str(exc), refusal_code(exc)
    if refusal is not None:
        return cp.CreatePartitionsResponse(
            version=req.version,
            results=tuple(
                cp.CreatePartitionsTopicResult(
                    name=t.name, error_code=refused_with, error_message=refusal
                )
                for t in req.topics
            ),
        )
    propagated = await wait_for(barrier, req.timeout_ms)
    late = "" if propagated else not_propagated("Partition creation", barrier)
    results = []
    for plan in plans:
        error, message = outcome(plan, propagated, req.validate_only, late)
        results.append(
            cp.CreatePartitionsTopicResult(name=plan.name, error_code=error, error_message=message)
        )
    return cp.CreatePartitionsResponse(version=req.version, results=tuple(results))


def register(registry: ControllerRegistry) -> None:
    registry.register(cp.API, handle)
