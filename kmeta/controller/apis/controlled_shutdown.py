"""ControlledShutdown (api key 7, v0-3): leaderships move away before the answer.

The answer lists the partitions that could not move; an epoch other than the registered one
(-1 included, hence v0-1, which carry none) is STALE_BROKER_EPOCH and moves nothing; a change
the store refused is KAFKA_STORAGE_ERROR.

With ``--authorizer acl`` it needs CLUSTER_ACTION on the cluster (the brokers' principal is a
super user or granted it): anyone else is answered CLUSTER_AUTHORIZATION_FAILED and nothing
changes (Kafka's ``authorizeClusterOperation``).
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    cluster_action,
    controller_of,
    refusal_code,
    wait_for,
)
from kmeta.controller.store.errors import StorageError
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import controlled_shutdown as cs


async def handle(ctx: ControllerRequestContext, req: cs.ControlledShutdownRequest) -> cs.ControlledShutdownResponse:
    c = controller_of(ctx)
    if not cluster_action(ctx, "ControlledShutdown", req.broker_id):
        return cs.ControlledShutdownResponse(
            version=req.version,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            remaining_partitions=(),
        )
    try:
        error, remaining, barrier = await c.enqueue(
            "ControlledShutdown",
            lambda: c.brokers.controlled_shutdown(req.broker_id, req.broker_epoch, ctx.peer),
        )
    except StorageError as exc:
        return cs.ControlledShutdownResponse(
            version=req.version, error_code=refusal_code(exc), remaining_partitions=()
        )
    await wait_for(barrier, c.config.request_timeout_ms)
    return cs.ControlledShutdownResponse(
        version=req.version,
        error_code=error,
        remaining_partitions=tuple(cs.RemainingPartition(t, p) for t, p in remaining),
    )


def register(registry: ControllerRegistry) -> None:
    registry.register(cs.API, handle)
