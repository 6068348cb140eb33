"""DeleteGroups (api key 42): versions 0-2, client listeners.

Kafka's ``KafkaApis.handleDeleteGroupsRequest`` and ``GroupCoordinatorShard.deleteGroups``,
per group: DELETE on the group, else GROUP_AUTHORIZATION_FAILED; an empty id:
INVALID_GROUP_ID; the coordinator errors as JoinGroup's; no such group: GROUP_ID_NOT_FOUND; a
group with members: NON_EMPTY_GROUP. Otherwise tombstones for its committed offsets and its
metadata are written to ``__consumer_offsets``, and once committed the group is gone; a failed
write answers its error.

Versions: v1 throttle time (as v0); v2 flexible.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_groups as dlg
from kmeta.server.group.context import Record, write_error
from kmeta.server.group.lookup import group_allowed, group_shard
from kmeta.server.group.shard import GroupCoordinatorShard
from kmeta.server.state import BrokerContext, BrokerRegistry


async def delete_one(ctx: BrokerContext, group_id: str) -> ErrorCode:
    if not group_allowed(ctx, AclOperation.DELETE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    shard = group_shard(ctx, group_id)
    if isinstance(shard, ErrorCode):
        return shard
    def delete(current: GroupCoordinatorShard) -> tuple[list[Record], ErrorCode]:
        return current.delete_group(group_id)

    written, refused = await ctx.state.coordinators.groups.write_op(shard.partition, delete)
    if refused is None:  # (the shard went away before the operation ran)
        return written
    if refused != ErrorCode.NONE:
        return refused
    if written != ErrorCode.NONE:
        shard.groups.delete_failed(group_id)
        return write_error(written)
    shard.groups.deleted(group_id)
    return ErrorCode.NONE


async def handle(ctx: BrokerContext, request: dlg.DeleteGroupsRequest) -> dlg.DeleteGroupsResponse:
    results = {}
    for group_id in request.groups_names:  # (one after another: each waits for its write)
        results[group_id] = await delete_one(ctx, group_id)
    return dlg.DeleteGroupsResponse(
        version=request.version,
        results=tuple(dlg.DeletableGroupResult(group_id, error) for group_id, error in results.items()),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(dlg.API, handle, on_control=False)
