"""SyncGroup, Heartbeat and LeaveGroup for classic groups (Kafka's ``classicGroupSync``,
``classicGroupHeartbeat``, ``classicGroupLeave``).

SyncGroup: no group or member: UNKNOWN_MEMBER_ID (a static member named by another id:
FENCED_INSTANCE_ID); another generation: ILLEGAL_GENERATION; v5's protocol type or name other
than the group's: INCONSISTENT_GROUP_PROTOCOL. Empty: UNKNOWN_MEMBER_ID; PreparingRebalance:
REBALANCE_IN_PROGRESS. In CompletingRebalance the member waits; the leader's assignment (an
empty one for each member it left out) is written as the group's metadata record and, once
committed, the group is Stable and every waiting member gets its assignment; a failed write
answers them all with the error and rebalances. In Stable the member gets its assignment.

Heartbeat: the same member and generation checks; PreparingRebalance answers
REBALANCE_IN_PROGRESS (after renewing the session, so the member has time to rejoin);
CompletingRebalance and Stable renew the session.

LeaveGroup: each member (by instance id, then member id; a static member named with another
member id is FENCED_INSTANCE_ID) is removed, or a pending member forgotten; the group then
rebalances.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import ClassicGroup, GroupState, SyncResult
from kmeta.server.group.classic.rebalance import Rebalancer
from kmeta.server.group.context import ShardContext, write_error
from kmeta.server.group.records import group_metadata_key, group_metadata_value

#: LeaveGroup's member id for "any id" with an instance id (Kafka's UNKNOWN_MEMBER_ID)
UNKNOWN_MEMBER = ""


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


class ClassicSync:
    def __init__(self, ctx: ShardContext, rebalancer: Rebalancer) -> None:
        self.ctx = ctx
        self.rebalancer = rebalancer

    def _group(self, group_id: str) -> ClassicGroup | ErrorCode:
        group = self.ctx.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return group

    async def sync(self, req: SyncRequest) -> SyncResult:
        group = self._group(req.group_id)
        if isinstance(group, ErrorCode):
            return SyncResult(group)
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error != ErrorCode.NONE:
            return SyncResult(error)
        if req.generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state == GroupState.EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[req.member_id]
        group.pending_sync.discard(req.member_id)
        if group.state == GroupState.STABLE:
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        answer: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

        def waiter(result: SyncResult) -> None:
            if not answer.done():
                answer.set_result(result)

        member.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # (a repeated SyncGroup)
        member.sync_waiter = waiter
        if group.is_leader(req.member_id):
            await self._store_assignment(group, req.assignments)
        return await answer

    async def _store_assignment(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        generation = group.generation_id
        record = (group_metadata_key(group.group_id), group_metadata_value(group.to_record(assignments)))
        error = await self.ctx.runtime.write(self.ctx.partition, [record])
        if group.state != GroupState.COMPLETING_REBALANCE or group.generation_id != generation:
            return  # (the group moved on meanwhile; its waiters were answered by that)
        if error != ErrorCode.NONE:
            for member in group.members.values():
                member.assignment = b""
                member.answer_sync(SyncResult(write_error(error)))
            self.rebalancer.prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        group.transition_to(GroupState.STABLE)
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
            member.answer_sync(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            # (Kafka's propagateAssignment: every session runs from here, as a member whose
            # session ran out while it awaited the assignment was kept alive)
            self.rebalancer.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        group = self._group(group_id)
        if isinstance(group, ErrorCode):
            return group
        error = group.validate_member(member_id, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if group.state == GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        if group.state == GroupState.PREPARING_REBALANCE:
            if not member.awaiting_join:
                self.rebalancer.schedule_heartbeat(group, member_id, member.session_timeout_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        self.rebalancer.schedule_heartbeat(group, member_id, member.session_timeout_ms)
        return ErrorCode.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """The group's error (UNKNOWN_MEMBER_ID without one), and one per (member id,
        instance id) asked."""
        group = self._group(group_id)
        if isinstance(group, ErrorCode):
            return group, []
        answers = []
        for member_id, instance_id in members:
            answers.append(self._leave_one(group, member_id, instance_id))
        return ErrorCode.NONE, answers

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id != UNKNOWN_MEMBER and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        elif member_id in group.pending_members:
            self.rebalancer.remove_pending(group, member_id)
            return ErrorCode.NONE
        elif member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalancer.remove_member_and_update(group, member_id, f"{member_id} left the group")
        return ErrorCode.NONE
