"""LeaveGroup (api key 13): versions 0-5, client listeners.

Kafka's ``KafkaApis.handleLeaveGroupRequest`` and ``classicGroupLeave``: READ on the group,
else GROUP_AUTHORIZATION_FAILED; an empty group id: INVALID_GROUP_ID; the coordinator errors
as JoinGroup's; no such group: UNKNOWN_MEMBER_ID. Each member leaving (by group.instance.id
when given: another member id than the instance's is FENCED_INSTANCE_ID; else by member id:
unknown is UNKNOWN_MEMBER_ID) is removed and the group rebalances.

Versions: v0-2 one member id, its error the answer's; v3 a batch of members, each answered
(KIP-345); v4 flexible; v5 a reason per member (KIP-800).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import leave_group as lg
from kmeta.server.group.lookup import group_allowed, group_shard
from kmeta.server.state import BrokerContext, BrokerRegistry


def handle(ctx: BrokerContext, request: lg.LeaveGroupRequest) -> lg.LeaveGroupResponse:
    version: int = request.version
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]

    def failed(error: ErrorCode) -> lg.LeaveGroupResponse:
        return lg.LeaveGroupResponse(version=version, error_code=error)

    if not group_allowed(ctx, AclOperation.READ, request.group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return failed(ErrorCode.INVALID_GROUP_ID)
    shard = group_shard(ctx, request.group_id)
    if isinstance(shard, ErrorCode):
        return failed(shard)
    error, each = shard.groups.leave(request.group_id, leaving)
    if error != ErrorCode.NONE:
        return failed(error)
    if version < 3:
        return failed(each[0])
    return lg.LeaveGroupResponse(
        version=version,
        error_code=ErrorCode.NONE,
        members=tuple(lg.MemberResponse(m, i, e) for (m, i), e in zip(leaving, each, strict=True)),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(lg.API, handle, on_control=False)
