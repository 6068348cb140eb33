"""Heartbeat (api key 12): versions 0-4, client listeners.

Kafka's ``KafkaApis.handleHeartbeatRequest`` and ``classicGroupHeartbeat``: READ on the group,
else GROUP_AUTHORIZATION_FAILED; an empty group id: INVALID_GROUP_ID; the coordinator errors
as JoinGroup's; then UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, or
REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member must rejoin); every
accepted heartbeat renews the member's session. While the group's partition is still loading
on a new coordinator the answer is NONE, as Kafka's ("the group is still loading, so respond
just blindly"): clients do not expect COORDINATOR_LOAD_IN_PROGRESS here (aiokafka's heartbeat
task dies of it).

Versions: v1 throttle time; v3 group.instance.id; v4 flexible.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import heartbeat as hb
from kmeta.server.group.lookup import group_allowed, group_shard
from kmeta.server.state import BrokerContext, BrokerRegistry


def handle(ctx: BrokerContext, request: hb.HeartbeatRequest) -> hb.HeartbeatResponse:
    version: int = request.version
    if not group_allowed(ctx, AclOperation.READ, request.group_id):
        return hb.HeartbeatResponse(version=version, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return hb.HeartbeatResponse(version=version, error_code=ErrorCode.INVALID_GROUP_ID)
    shard = group_shard(ctx, request.group_id)
    if isinstance(shard, ErrorCode):
        blind = shard == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return hb.HeartbeatResponse(version=version, error_code=ErrorCode.NONE if blind else shard)
    error = shard.groups.heartbeat(request.group_id, request.member_id, request.group_instance_id, request.generation_id)
    return hb.HeartbeatResponse(version=version, error_code=error)


def register(registry: BrokerRegistry) -> None:
    registry.register(hb.API, handle, on_control=False)
