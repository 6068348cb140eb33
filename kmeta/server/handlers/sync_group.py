"""SyncGroup (api key 14): versions 0-5, client listeners.

Kafka's ``KafkaApis.handleSyncGroupRequest`` and ``GroupCoordinatorService.syncGroup``: READ on
the group, else GROUP_AUTHORIZATION_FAILED; an empty group id: INVALID_GROUP_ID; the
coordinator errors as JoinGroup's. Then :mod:`kmeta.server.group.classic.classic_sync`: the leader's
assignment is written to ``__consumer_offsets`` before anyone is answered; a member waits for
it without holding up its connection's other requests.

Versions: v1 throttle time; v3 group.instance.id; v4 flexible; v5 the protocol type and name
in both directions (KIP-559), checked against the group's (INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import sync_group as sg
from kmeta.server.group.classic.classic import SyncResult
from kmeta.server.group.classic.classic_sync import SyncRequest
from kmeta.server.group.lookup import group_allowed, group_shard
from kmeta.server.state import BrokerContext, BrokerRegistry


def response(version: int, result: SyncResult) -> sg.SyncGroupResponse:
    ok = result.error == ErrorCode.NONE
    return sg.SyncGroupResponse(
        version=version,
        error_code=result.error,
        protocol_type=result.protocol_type if ok else None,
        protocol_name=result.protocol_name if ok else None,
        assignment=result.assignment,
    )


async def handle(ctx: BrokerContext, request: sg.SyncGroupRequest) -> sg.SyncGroupResponse:
    version: int = request.version
    if not group_allowed(ctx, AclOperation.READ, request.group_id):
        return response(version, SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if not request.group_id:
        return response(version, SyncResult(ErrorCode.INVALID_GROUP_ID))
    shard = group_shard(ctx, request.group_id)
    if isinstance(shard, ErrorCode):
        return response(version, SyncResult(shard))
    sync = SyncRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return response(version, await shard.groups.sync(sync))


def register(registry: BrokerRegistry) -> None:
    registry.register(sg.API, handle, on_control=False)
