"""AlterPartition (api key 56, v0-3): a partition leader's ISR change, one controller event.

The leader of a partition asks for a new ISR (a follower fell behind, or caught up again);
the checks, the commit and the push are :mod:`kmeta.controller.topics.isr`'s. This module
adds what comes before the event:

* With ``--authorizer acl`` it needs CLUSTER_ACTION on the cluster (the brokers' principal is
  a super user or granted it): anyone else is answered CLUSTER_AUTHORIZATION_FAILED and
  nothing changes (Kafka's ``authorizeClusterOperation``).
* A controller not active yet (its Startup event not done) or deposed answers
  NOT_CONTROLLER: the leader sends it again, to whichever controller is active then.
* A change the store refused is KAFKA_STORAGE_ERROR at the top level (nothing was kept or
  sent).

The answer comes once the change is durable, without waiting for the brokers to apply it
(Kafka's controller answers after its write, the UpdateMetadata follows).
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
from kmeta.controller.topics.isr import response
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition as ap


async def handle(ctx: ControllerRequestContext, req: ap.AlterPartitionRequest) -> ap.AlterPartitionResponse:
    c = controller_of(ctx)
    if not cluster_action(ctx, "AlterPartition", req.broker_id):
        return response(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    if not c.active:
        return response(req, ErrorCode.NOT_CONTROLLER, [])
    try:
        error, outcomes = await c.enqueue("AlterPartition", lambda: c.isr.alter_partition(req))
    except StorageError as exc:
        return response(req, refusal_code(exc), [])
    return response(req, error, outcomes)


def register(registry: ControllerRegistry) -> None:
    registry.register(ap.API, handle)
