"""AllocateProducerIds (api key 67, v0): a block of producer ids for a broker, one controller
event (:mod:`kmeta.controller.producer_ids` says what is checked and kept).

* With ``--authorizer acl`` it needs CLUSTER_ACTION on the cluster (the brokers' principal is
  a super user or granted it): anyone else is answered CLUSTER_AUTHORIZATION_FAILED and
  nothing is handed out (Kafka's ``authorizeClusterOperation``). Without one, the broker id
  and epoch must still name a live registered broker.
* A controller not active yet (its Startup event not done) or deposed answers NOT_CONTROLLER:
  the broker asks again, whichever controller is active then.
* A block the store refused is KAFKA_STORAGE_ERROR (nothing was kept, nothing handed out).

The answer comes once the block is durable; an error answer carries no ids (start and
length 0).
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    cluster_action,
    controller_of,
    refusal_code,
)
from kmeta.controller.store.errors import StorageError
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import allocate_producer_ids as api


def _refused(req: api.AllocateProducerIdsRequest, error: ErrorCode) -> api.AllocateProducerIdsResponse:
    return api.AllocateProducerIdsResponse(version=req.version, error_code=error)


async def handle(
    ctx: ControllerRequestContext, req: api.AllocateProducerIdsRequest
) -> api.AllocateProducerIdsResponse:
    c = controller_of(ctx)
    if not cluster_action(ctx, "AllocateProducerIds", req.broker_id):
        return _refused(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if not c.active:
        return _refused(req, ErrorCode.NOT_CONTROLLER)
    try:
        error, block = await c.enqueue(
            "AllocateProducerIds", lambda: c.producer_ids.allocate(req.broker_id, req.broker_epoch)
        )
    except StorageError as exc:
        return _refused(req, refusal_code(exc))
    if block is None:
        return _refused(req, error)
    return api.AllocateProducerIdsResponse(
        version=req.version, producer_id_start=block.first_producer_id, producer_id_len=block.size
    )


def register(registry: ControllerRegistry) -> None:
    registry.register(api.API, handle)
