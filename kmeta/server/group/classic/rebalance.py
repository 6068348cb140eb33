"""Rebalances of classic groups (Kafka's ``GroupMetadataManager`` classic path): preparing a
rebalance, completing the join, removing members, and the timers that drive them.

Timers (runtime timers on the shard's partition, keyed by purpose):

* ``join-<group>``: the delayed join. From Empty it is the initial delay
  (group.initial.rebalance.delay.ms), taken again while new members keep coming, up to the
  rebalance timeout; otherwise the largest rebalance timeout of the members, completed early
  once every member (and no pending one) has rejoined.
* ``heartbeat-<group>-<member>``: a member's session; while it waits in a join, its rebalance
  timeout (a new member's: the new-member join timeout). Expiry removes it and rebalances.
* ``pending-<group>-<member>``: an id handed out with MEMBER_ID_REQUIRED that never came back.
* ``sync-<group>``: members of a completed join that never sent SyncGroup within the rebalance
  timeout are removed and the group rebalances.

Classic members live in memory only between rebalances, as in Kafka; what is written is the
group's metadata when a generation is assigned (SyncGroup) or left empty.
"""

from __future__ import annotations

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import ClassicGroup, GroupState, JoinResult, SyncResult
from kmeta.server.group.context import ShardContext, log, now_ms, write_error
from kmeta.server.group.records import group_metadata_key, group_metadata_value


class Rebalancer:
    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx

    # -- timers -------------------------------------------------------------------------------
    def schedule_heartbeat(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        group_id = group.group_id

        async def expire() -> None:
            self.heartbeat_expired(group_id, member_id)

        self.ctx.schedule(f"heartbeat-{group_id}-{member_id}", timeout_ms / 1000.0, expire)

    def cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        self.ctx.cancel(f"heartbeat-{group.group_id}-{member_id}")

    def schedule_pending(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        group_id = group.group_id

        async def expire() -> None:
            current = self.ctx.groups.get(group_id)
            if isinstance(current, ClassicGroup) and member_id in current.pending_members:
                current.pending_members.discard(member_id)
                if current.state == GroupState.PREPARING_REBALANCE:
                    self.maybe_complete_join(current)

        self.ctx.schedule(f"pending-{group_id}-{member_id}", timeout_ms / 1000.0, expire)

    def heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.ctx.groups.get(group_id)
        if isinstance(group, ClassicGroup) and group.state != GroupState.DEAD and member_id in group.members:
            member = group.members[member_id]
            if member.sync_waiter is not None and not member.is_new:
                # Kafka's hasSatisfiedHeartbeat: a member awaiting its SyncGroup answer is alive;
                # its session runs again once the assignment is propagated, or the sync timeout
                # starts a rebalance (whose join removes it unless it rejoins)
                return
            self.remove_member_and_update(group, member_id, f"session timeout of {member_id} expired")

    # -- rebalancing --------------------------------------------------------------------------
    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Kafka's ``prepareRebalance``: answer pending syncs with REBALANCE_IN_PROGRESS, move
        to PreparingRebalance and start the delayed join."""
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                member.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self.ctx.cancel(f"sync-{group.group_id}")
        initial = group.state == GroupState.EMPTY
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms())
        if initial:
            delay = self.ctx.config.initial_rebalance_delay_ms
            timeout = group.max_rebalance_timeout_ms()
            group.initial_join_pending = True
            group.new_member_added = False
            self._schedule_initial_join(group, min(delay, timeout), max(timeout - delay, 0))
        else:
            group.initial_join_pending = False
            self._schedule_join(group, group.max_rebalance_timeout_ms())
            self.maybe_complete_join(group)

    def _schedule_join(self, group: ClassicGroup, delay_ms: int) -> None:
        group_id = group.group_id

        async def expire() -> None:
            current = self.ctx.groups.get(group_id)
            if current is group:
                self.complete_join(group)

        self.ctx.schedule(f"join-{group_id}", delay_ms / 1000.0, expire)

    def _schedule_initial_join(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        group_id = group.group_id

        async def expire() -> None:
            if self.ctx.groups.get(group_id) is not group or group.state != GroupState.PREPARING_REBALANCE:
                return
            if group.new_member_added and remaining_ms > 0:
                group.new_member_added = False
                delay = min(self.ctx.config.initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, delay, max(remaining_ms - delay, 0))
            else:
                self.complete_join(group)

        self.ctx.schedule(f"join-{group_id}", delay_ms / 1000.0, expire)

    def maybe_complete_join(self, group: ClassicGroup) -> None:
        """The regular delayed join completes as soon as every member has rejoined."""
        if (
            group.state == GroupState.PREPARING_REBALANCE
            and not group.initial_join_pending
            and group.all_members_joined()
        ):
            self.ctx.cancel(f"join-{group.group_id}")
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        """Kafka's ``completeClassicGroupJoin``: dynamic members that did not rejoin go; the next
        generation starts (CompletingRebalance, or Empty and written when nobody is left) and
        every waiting member gets its JoinGroup answer, the leader with the members."""
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        group.initial_join_pending = False
        # (dynamic members that did not rejoin go; a static one keeps its place until its
        # session expires: it may be restarting)
        for member in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            self.cancel_heartbeat(group, member.member_id)
            group.remove(member.member_id)
        group.init_next_generation(now_ms())
        if group.in_state(GroupState.EMPTY):
            self.ctx.spawn(self.store_empty(group))
            return
        for member in group.members.values():
            member.is_new = False
            leader = group.is_leader(member.member_id)
            member.answer_join(group.join_result(member.member_id, with_members=leader))
            self.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
        self._schedule_sync_timeout(group)

    def _schedule_sync_timeout(self, group: ClassicGroup) -> None:
        group_id, generation = group.group_id, group.generation_id

        async def expire() -> None:
            if self.ctx.groups.get(group_id) is not group or group.generation_id != generation:
                return
            if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync:
                for member_id in list(group.pending_sync):
                    self._drop(group, member_id)
                if group.members:
                    self.prepare_rebalance(group, "members never sent SyncGroup")
                else:
                    self.prepare_rebalance(group, "every member failed to sync")

        self.ctx.schedule(f"sync-{group_id}", group.max_rebalance_timeout_ms() / 1000.0, expire)

    async def store_empty(self, group: ClassicGroup) -> None:
        """An empty generation is written, as Kafka does, so a reloaded group starts Empty."""
        error = await self.ctx.runtime.write(
            self.ctx.partition,
            [(group_metadata_key(group.group_id), group_metadata_value(group.to_record()))],
        )
        if error != ErrorCode.NONE:
            # (Kafka logs and carries on: the group stays Empty in memory)
            log.warning("writing empty group %s failed: %s", group.group_id, write_error(error).name)

    # -- members leaving ----------------------------------------------------------------------
    def _drop(self, group: ClassicGroup, member_id: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        self.cancel_heartbeat(group, member_id)
        member.answer_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        member.answer_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))

    def remove_member_and_update(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        """A member left or expired: gone, and the group rebalances (or, mid-join, may now
        complete it)."""
        self._drop(group, member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, reason)
        elif group.state == GroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(group)

    def remove_pending(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.ctx.cancel(f"pending-{group.group_id}-{member_id}")
        if group.state == GroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(group)

    def unload(self, group: ClassicGroup) -> None:
        """Leadership lost or the group deleted: Dead; everyone waiting is told to find the
        coordinator again."""
        for member in group.members.values():
            member.answer_join(JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
            member.answer_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
            self.cancel_heartbeat(group, member.member_id)
        for member_id in group.pending_members:
            self.ctx.cancel(f"pending-{group.group_id}-{member_id}")
        self.ctx.cancel(f"join-{group.group_id}")
        self.ctx.cancel(f"sync-{group.group_id}")
        group.transition_to(GroupState.DEAD, now_ms())
