"""UpdateMetadata (api key 6): versions 0-8, control listener only.

Behaviour:

* On a client listener: CLUSTER_AUTHORIZATION_FAILED, cache untouched (Kafka's CLUSTER_ACTION
  authorization fails for anyone but the controller).
* Without CLUSTER_ACTION on the cluster for the connection's principal (an authorizer is
  configured): CLUSTER_AUTHORIZATION_FAILED, nothing changes (Kafka's ``authorizeClusterOperation``).
* Fenced first by broker epoch (STALE_BROKER_EPOCH), then by controller epoch
  (STALE_CONTROLLER_EPOCH); a fenced request leaves the cache untouched.
* Otherwise applied to the MetadataCache, which publishes a new snapshot (see
  :mod:`kmeta.metadata.cache` for the rules: live brokers replaced wholesale, leader -2
  deletes, v8 FULL replaces the partition set). The ACL set in kmeta's tagged field, when
  present, replaces the authorizer's (the controller sends it on FULL updates and after an
  ACL change).
* Every outcome is written to the state-change log ("apply") when one is configured.

Versions: v1 endpoints per broker; v2 rack; v3 listener names; v4 offline replicas; v5 broker
epoch and partitions grouped by topic; v6 flexible; v7 topic ids; v8 KRaft controller flag
and the Type tag (KIP-866).
"""

from __future__ import annotations

import time
from typing import Any

from kmeta.metadata.cache import FULL_UPDATE
from kmeta.net.security.acl import AclBinding, AclOperation
from kmeta.net.security.authorizer import AclSet, cluster_allowed
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages.update_metadata import UpdateMetadataResponse
from kmeta.server.state import BrokerContext, BrokerRegistry, BrokerState


def partition_states(request: Any) -> list[Any]:
    if request.version < 5:
        return list(request.ungrouped_partition_states)
    return [p for t in request.topic_states for p in t.partition_states]


def topic_names(request: Any) -> list[str]:
    if request.version < 5:
        return [p.topic_name for p in request.ungrouped_partition_states]
    return [t.topic_name for t in request.topic_states]


def refuse(request: Any, error: ErrorCode) -> Any:
    return UpdateMetadataResponse(version=request.version, error_code=error)


def handle(ctx: BrokerContext, request: Any) -> Any:
    state: BrokerState = ctx.state
    start = time.monotonic()
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        error = state.fence(request.controller_epoch, request.broker_epoch)
    if error == ErrorCode.NONE:
        state.cache.update_metadata(ctx.header.correlation_id, request)
        if request.kmeta_acls is not None and state.authorizer is not None:
            state.authorizer.replace(AclSet(AclBinding(*acl) for acl in request.kmeta_acls))
        state.apply_credentials(getattr(request, "kmeta_scram_credentials", None))
        state.update_apply.observe(time.monotonic() - start)
        state.metadata_applied(request.version >= 8 and request.type == FULL_UPDATE)
    if state.state_log is not None:
        state.state_log.apply(
            api_key=ApiKey.UPDATE_METADATA,
            correlation_id=ctx.header.correlation_id,
            controller_id=request.controller_id,
            controller_epoch=request.controller_epoch,
            snapshot_version=state.cache.snapshot.version,
            topics=topic_names(request),
            partitions=len(partition_states(request)),
            apply_ms=(time.monotonic() - start) * 1000.0,
            error_code=error,
        )
    return refuse(request, error)


def register(registry: BrokerRegistry) -> None:
    registry.register(ApiKey.UPDATE_METADATA, handle, on_client=False, refuse=refuse)
