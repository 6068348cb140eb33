"""ListGroups (api key 16): versions 0-5, client listeners.

Kafka's ``KafkaApis.handleListGroupsRequest``: the groups this broker coordinates (a client
asks every broker). DESCRIBE on the cluster lists them all; otherwise only those with DESCRIBE
on the group. A ``__consumer_offsets`` partition still loading here makes the answer
COORDINATOR_LOAD_IN_PROGRESS, with the groups of the loaded ones.

Versions: v1 throttle time; v3 flexible; v4 the group state, and a states filter
(case-insensitive; empty: all); v5 the group type ("classic", "consumer") and a types filter
(KIP-848).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol.messages import list_groups as lsg
from kmeta.server.group.lookup import group_allowed, led_shards
from kmeta.server.state import BrokerContext, BrokerRegistry


def handle(ctx: BrokerContext, request: lsg.ListGroupsRequest) -> lsg.ListGroupsResponse:
    version: int = request.version
    states = set(request.states_filter) if version >= 4 else set()
    types = set(request.types_filter) if version >= 5 else set()
    shards, error = led_shards(ctx)
    everything = cluster_allowed(ctx, AclOperation.DESCRIBE)
    groups = tuple(
        lsg.ListedGroup(
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.state if version >= 4 else "",
            group_type=g.group_type if version >= 5 else "",
        )
        for shard in shards
        for g in shard.groups.list_groups(states, types)
        if everything or group_allowed(ctx, AclOperation.DESCRIBE, g.group_id)
    )
    return lsg.ListGroupsResponse(version=version, error_code=error, groups=groups)


def register(registry: BrokerRegistry) -> None:
    registry.register(lsg.API, handle, on_control=False)
