"""JoinGroup for classic groups (Kafka's ``classicGroupJoin``): new members, known members,
static members (KIP-345) and the member id handshake (KIP-394).

* No group and a member id given: UNKNOWN_MEMBER_ID; no group and none: a new Empty group.
* A consumer (KIP-848) group of that id: INCONSISTENT_GROUP_PROTOCOL; a Dead group:
  COORDINATOR_NOT_AVAILABLE (it is moving; find the coordinator again).
* A protocol type or protocol set the group cannot take: INCONSISTENT_GROUP_PROTOCOL; a full
  group (group.max.size) that this member is not already part of: GROUP_MAX_SIZE_REACHED.
* New dynamic member on v4+: its id (client id + "-" + uuid) comes back with
  MEMBER_ID_REQUIRED and waits as pending until it joins with it; below v4 it joins at once.
* New static member: a known instance id takes its old place under a new member id (the old
  id's waiting requests get FENCED_INSTANCE_ID); in a Stable group whose chosen protocol stays
  the same it gets the current generation back without a rebalance, once the new id is
  written. An unknown instance id joins as a new member.
* Known member: in PreparingRebalance it (re)joins the rebalance; in CompletingRebalance with
  the same protocols it gets its join answer again; in Stable the leader, or a member whose
  protocols changed, starts a rebalance, anyone else gets the current generation.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import (
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    JoinResult,
    JoinWaiter,
    SyncResult,
)
from kmeta.server.group.classic.rebalance import Rebalancer
from kmeta.server.group.context import ShardContext, write_error
from kmeta.server.group.records import group_metadata_key, group_metadata_value


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    client_id: str
    client_host: str
    #: v4+: a new member must come back with the id it is given (KIP-394)
    require_known_member_id: bool


class ClassicJoin:
    def __init__(self, ctx: ShardContext, rebalancer: Rebalancer) -> None:
        self.ctx = ctx
        self.rebalancer = rebalancer

    async def join(self, req: JoinRequest) -> JoinResult:
        group = self.ctx.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            group = self.ctx.groups[req.group_id] = ClassicGroup(req.group_id)
        if not isinstance(group, ClassicGroup):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        if group.state == GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
        if not self._accepts(group, req.member_id):
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        answer: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

        def waiter(result: JoinResult) -> None:
            if not answer.done():
                answer.set_result(result)

        if not req.member_id:
            await self._new_member(group, req, waiter)
        else:
            self._known_member(group, req, waiter)
        return await answer

    def _accepts(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's ``acceptJoiningMember``: below group.max.size, or already counted."""
        max_size = self.ctx.config.max_size
        member = group.members.get(member_id)
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.state == GroupState.PREPARING_REBALANCE:
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or awaiting < max_size
        return member is not None or len(group.members) < max_size

    async def _new_member(self, group: ClassicGroup, req: JoinRequest, waiter: JoinWaiter) -> None:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            if group.is_static_member(req.group_instance_id):
                await self._replace_static_member(group, req, member_id, waiter)
            else:
                self._add_and_rebalance(group, req, member_id, waiter)
        elif req.require_known_member_id:
            group.pending_members.add(member_id)
            self.rebalancer.schedule_pending(group, member_id, req.session_timeout_ms)
            waiter(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
        else:
            self._add_and_rebalance(group, req, member_id, waiter)

    def _known_member(self, group: ClassicGroup, req: JoinRequest, waiter: JoinWaiter) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.ctx.cancel(f"pending-{group.group_id}-{member_id}")
            self._add_and_rebalance(group, req, member_id, waiter)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error != ErrorCode.NONE:
            waiter(JoinResult(error, member_id=member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state == GroupState.PREPARING_REBALANCE:
            self._update_and_rebalance(group, member, req, waiter)
        elif state == GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                waiter(group.join_result(member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_and_rebalance(group, member, req, waiter)
        elif state == GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_and_rebalance(group, member, req, waiter)
            else:
                waiter(group.join_result(member_id, with_members=False))
        else:  # (Empty, Dead: it is not a member any more)
            waiter(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _add_and_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str, waiter: JoinWaiter) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            join_waiter=waiter,
            is_new=True,
        )
        group.add(member)
        group.new_member_added = True
        self.rebalancer.schedule_heartbeat(group, member_id, self.ctx.config.new_member_join_timeout_ms)
        if group.state == GroupState.PREPARING_REBALANCE:
            self.rebalancer.maybe_complete_join(group)
        else:
            self.rebalancer.prepare_rebalance(group, f"{member_id} joined")

    def _update_and_rebalance(
        self, group: ClassicGroup, member: ClassicGroupMember, req: JoinRequest, waiter: JoinWaiter
    ) -> None:
        _update(member, req)
        # (a second JoinGroup while the first still waits: the first is answered now, so
        # the connection's answers keep flowing; the client acts on the later one)
        member.answer_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_waiter = waiter
        self.rebalancer.schedule_heartbeat(group, member.member_id, member.rebalance_timeout_ms)
        if group.state == GroupState.PREPARING_REBALANCE:
            self.rebalancer.maybe_complete_join(group)
        else:
            self.rebalancer.prepare_rebalance(group, f"{member.member_id} rejoined")

    async def _replace_static_member(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, waiter: JoinWaiter
    ) -> None:
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members[old_id]
        old.answer_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        old.answer_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        self.rebalancer.cancel_heartbeat(group, old_id)
        previous = (old.protocols, old.client_id, old.client_host, old.session_timeout_ms, old.rebalance_timeout_ms)
        was_leader = group.is_leader(old_id)
        member = group.replace_static_member(req.group_instance_id, member_id)
        if group.state == GroupState.STABLE:
            _update(member, req)
            if group.select_protocol() != group.protocol_name:
                member.join_waiter = waiter
                self.rebalancer.schedule_heartbeat(group, member_id, member.rebalance_timeout_ms)
                self.rebalancer.prepare_rebalance(group, f"static member {req.group_instance_id} changed protocols")
                return
            generation = group.generation_id
            record = (group_metadata_key(group.group_id), group_metadata_value(group.to_record()))
            error = await self.ctx.runtime.write(self.ctx.partition, [record])
            if group.in_state(GroupState.DEAD) or group.members.get(member_id) is not member:
                waiter(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            elif error != ErrorCode.NONE:
                # the write failed: the old id stands again, this one is told why
                group.replace_static_member(req.group_instance_id, old_id)
                member.protocols, member.client_id, member.client_host = previous[0], previous[1], previous[2]
                member.session_timeout_ms, member.rebalance_timeout_ms = previous[3], previous[4]
                self.rebalancer.schedule_heartbeat(group, old_id, member.session_timeout_ms)
                waiter(JoinResult(write_error(error), member_id=member_id))
            else:
                self.rebalancer.schedule_heartbeat(group, member_id, member.session_timeout_ms)
                # (KIP-814: a returning leader gets the members but keeps the assignment)
                result = group.join_result(member_id, with_members=was_leader, skip_assignment=was_leader)
                waiter(result if group.generation_id == generation else JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member_id))
        else:
            self._update_and_rebalance(group, member, req, waiter)


def _update(member: ClassicGroupMember, req: JoinRequest) -> None:
    member.protocols = req.protocols
    member.client_id = req.client_id
    member.client_host = req.client_host
    member.session_timeout_ms = req.session_timeout_ms
    member.rebalance_timeout_ms = req.rebalance_timeout_ms


def protocols_of(pairs: Sequence[tuple[str, bytes]]) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, bytes(metadata)) for name, metadata in pairs)
