"""How the group APIs find a group's shard on this broker, and who is asking."""

from __future__ import annotations

from typing import cast

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, authorizer_of, client_host
from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.shard import GroupCoordinatorShard
from kmeta.server.state import BrokerContext

#: DescribeGroups' authorized operations of a group (Kafka: READ, DESCRIBE, DELETE)
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)


def group_shard(ctx: BrokerContext, group_id: str) -> GroupCoordinatorShard | ErrorCode:
    """The shard coordinating ``group_id`` here; NOT_COORDINATOR when another broker leads its
    ``__consumer_offsets`` partition, COORDINATOR_LOAD_IN_PROGRESS while it loads."""
    runtime = ctx.state.coordinators.groups
    shard, error = runtime.shard_or_error(runtime.partition_for(group_id))
    if shard is None:
        return error
    return cast(GroupCoordinatorShard, shard)


def led_shards(ctx: BrokerContext) -> tuple[list[GroupCoordinatorShard], ErrorCode]:
    """Every shard active here, and COORDINATOR_LOAD_IN_PROGRESS if one is still loading
    (ListGroups answers what it has with that error, as Kafka)."""
    runtime = ctx.state.coordinators.groups
    shards: list[GroupCoordinatorShard] = []
    error = ErrorCode.NONE
    for partition in range(runtime.num_partitions):
        shard, shard_error = runtime.shard_or_error(partition)
        if shard is not None:
            shards.append(cast(GroupCoordinatorShard, shard))
        elif shard_error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = shard_error
    return shards, error


def group_allowed(ctx: BrokerContext, operation: AclOperation, group_id: str) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, group_id)


def group_operations(ctx: BrokerContext, group_id: str) -> int:
    """The group's authorized-operations bit field for this principal."""
    if authorizer_of(ctx) is None:
        return sum(1 << op for op in GROUP_OPERATIONS)
    return sum(1 << op for op in GROUP_OPERATIONS if group_allowed(ctx, op, group_id))


def member_client(ctx: BrokerContext) -> tuple[str, str]:
    """(client id, client host) as Kafka records a member's: the host as ``/address``."""
    return ctx.header.client_id or "", "/" + client_host(ctx.peer)
