"""DescribeGroups (api key 15): versions 0-5, client listeners.

Kafka's ``KafkaApis.handleDescribeGroupsRequest`` and ``GroupMetadataManager.describeGroups``,
per group: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; an empty id:
INVALID_GROUP_ID; the coordinator errors as JoinGroup's. A group this coordinator does not
know (or a consumer group, which only ConsumerGroupDescribe describes) is answered Dead with
no error. A Stable group names its protocol and gives each member's subscription and
assignment; in other states the members are listed without them (Kafka's ``summary``).

Versions: v1 throttle time; v3 authorized operations (READ, DESCRIBE, DELETE bits) when
asked; v4 group.instance.id of each member; v5 flexible.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_groups as dg
from kmeta.server.group.classic.classic import ClassicGroup, GroupState
from kmeta.server.group.lookup import group_allowed, group_operations, group_shard
from kmeta.server.handlers.metadata import OPERATIONS_NOT_ASKED
from kmeta.server.state import BrokerContext, BrokerRegistry


def describe(group_id: str, group: ClassicGroup | None) -> dg.DescribedGroup:
    if group is None:
        return dg.DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state=GroupState.DEAD.value)
    stable = group.state == GroupState.STABLE
    protocol = group.protocol_name if stable else None
    return dg.DescribedGroup(
        error_code=ErrorCode.NONE,
        group_id=group_id,
        group_state=group.state_name,
        protocol_type=group.protocol_type or "",
        protocol_data=protocol or "",
        members=tuple(
            dg.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ),
    )


def handle(ctx: BrokerContext, request: dg.DescribeGroupsRequest) -> dg.DescribeGroupsResponse:
    version: int = request.version
    answers = []
    for group_id in request.groups:
        if not group_allowed(ctx, AclOperation.DESCRIBE, group_id):
            answers.append(dg.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        shard = group_shard(ctx, group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if isinstance(shard, ErrorCode):
            answers.append(dg.DescribedGroup(error_code=shard, group_id=group_id))
            continue
        described = describe(group_id, shard.groups.classic_group(group_id))
        if version >= 3 and request.include_authorized_operations:
            described = described._replace(authorized_operations=group_operations(ctx, group_id))
        else:
            described = described._replace(authorized_operations=OPERATIONS_NOT_ASKED)
        answers.append(described)
    return dg.DescribeGroupsResponse(version=version, groups=tuple(answers))


def register(registry: BrokerRegistry) -> None:
    registry.register(dg.API, handle, on_control=False)
