"""JoinGroup (api key 11): versions 0-9, client listeners.

Kafka's ``KafkaApis.handleJoinGroupRequest`` and ``GroupCoordinatorService.joinGroup``:

* READ on the group, else GROUP_AUTHORIZATION_FAILED; an empty group id: INVALID_GROUP_ID; a
  session timeout outside group.min.session.timeout.ms .. group.max.session.timeout.ms:
  INVALID_SESSION_TIMEOUT; the group's ``__consumer_offsets`` partition not led here:
  NOT_COORDINATOR (loading: COORDINATOR_LOAD_IN_PROGRESS).
* Then the classic join (:mod:`kmeta.server.group.classic.classic_join`): the answer waits for the
  rebalance to complete (the initial delay, the members' rebalance timeout) without holding
  up the connection's other requests.

Versions: v0 has no rebalance timeout (the session timeout is used); v4 a new member needs
the id it is given (MEMBER_ID_REQUIRED, KIP-394); v5 group.instance.id (KIP-345); v6
flexible; v7 the protocol type in the answer (KIP-559), the protocol name nullable; v8 the
reason (KIP-800); v9 skip_assignment for a static leader that rejoined (KIP-814).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import join_group as jg
from kmeta.server.group.classic.classic import JoinResult
from kmeta.server.group.classic.classic_join import JoinRequest, protocols_of
from kmeta.server.group.lookup import group_allowed, group_shard, member_client
from kmeta.server.state import BrokerContext, BrokerRegistry


def response(version: int, result: JoinResult) -> jg.JoinGroupResponse:
    return jg.JoinGroupResponse(
        version=version,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment and version >= 9,
        member_id=result.member_id,
        members=tuple(jg.JoinGroupResponseMember(m, i, meta) for m, i, meta in result.members),
    )


async def handle(ctx: BrokerContext, request: jg.JoinGroupRequest) -> jg.JoinGroupResponse:
    version: int = request.version
    member_id: str = request.member_id

    def error(code: ErrorCode) -> jg.JoinGroupResponse:
        return response(version, JoinResult(code, member_id=member_id))

    if not group_allowed(ctx, AclOperation.READ, request.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return error(ErrorCode.INVALID_GROUP_ID)
    config = ctx.state.config
    if not config.group_min_session_timeout_ms <= request.session_timeout_ms <= config.group_max_session_timeout_ms:
        return error(ErrorCode.INVALID_SESSION_TIMEOUT)
    shard = group_shard(ctx, request.group_id)
    if isinstance(shard, ErrorCode):
        return error(shard)
    client_id, client_host = member_client(ctx)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=member_id,
        group_instance_id=request.group_instance_id,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=protocols_of([(p.name, p.metadata) for p in request.protocols]),
        client_id=client_id,
        client_host=client_host,
        require_known_member_id=version >= 4,
    )
    return response(version, await shard.groups.join(join))


def register(registry: BrokerRegistry) -> None:
    registry.register(jg.API, handle, on_control=False)
