"""What every control request does first and last (not a handler module: no ``register``):
its admission (:func:`admission`: CLUSTER_ACTION, then the epochs) and its state-change log
line (:func:`log_apply`).

The line format and the writer are kmeta.metadata.state_change_log's, shared with the
controller and the analysis pipeline.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.server.state import BrokerContext, BrokerState
from kmeta.server.streamed import ControlRequest


def admission(ctx: BrokerContext, request: ControlRequest) -> ErrorCode:
    """NONE if the request may change this broker: CLUSTER_AUTHORIZATION_FAILED without
    CLUSTER_ACTION on the cluster (checked first, so a refused request raises no epoch), else
    the epoch fence's answer (STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH)."""
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ctx.state.fence(request.controller_epoch, request.broker_epoch)


def log_apply(
    ctx: BrokerContext,
    request: ControlRequest,
    api_key: int,
    *,
    topics: Iterable[str],
    partitions: int,
    start_s: float,
    error: ErrorCode,
) -> None:
    """Write one "apply" line (when a log is configured): who sent it, what it touched, how
    long it took since ``start_s`` (monotonic) and its top-level error."""
    state: BrokerState = ctx.state
    if state.state_log is not None:
        state.state_log.write(
            "apply",
            controller_epoch=request.controller_epoch,
            api_key=int(api_key),
            correlation_id=ctx.header.correlation_id,
            controller_id=request.controller_id,
            snapshot_version=state.cache.snapshot.version,
            topics=sorted(set(topics)),
            partitions=partitions,
            apply_ms=round((time.monotonic() - start_s) * 1000.0, 4),
            error_code=int(error),
        )
        state.state_log.flush()
