"""BrokerHeartbeat (api key 63, v0-1): answered at once (no event).

Refreshes the session (:mod:`kmeta.controller.brokers.sessions`), or answers STALE_BROKER_EPOCH when
the broker is unknown, fenced, on another epoch, or when the heartbeat does not come on the
connection that registered the session (the broker then registers again); a refused heartbeat
extends nothing, so a silent broker is fenced whatever others send.

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
)
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_heartbeat as bh


def handle(ctx: ControllerRequestContext, req: bh.BrokerHeartbeatRequest) -> bh.BrokerHeartbeatResponse:
    c = controller_of(ctx)
    if not cluster_action(ctx, "BrokerHeartbeat", req.broker_id):
        return bh.BrokerHeartbeatResponse(
            version=req.version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, is_fenced=True
        )
    # (a controller that took over waits for a broker heard from: startup_resync)
    c.resync.heard(req.broker_id, req.broker_epoch)
    c.store_guard.heard(req.broker_id, req.broker_epoch)
    if not c.brokers.heartbeat(req.broker_id, req.broker_epoch, ctx.peer):
        return bh.BrokerHeartbeatResponse(
            version=req.version, error_code=ErrorCode.STALE_BROKER_EPOCH, is_fenced=True
        )
    return bh.BrokerHeartbeatResponse(
        version=req.version,
        error_code=0,
        is_caught_up=True,
        is_fenced=False,
        should_shut_down=req.want_shut_down,
    )


def register(registry: ControllerRegistry) -> None:
    registry.register(bh.API, handle)
