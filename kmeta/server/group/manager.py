"""GroupMetadataManager: the groups of one ``__consumer_offsets`` partition (Kafka's class of
that name, classic path), and what the group APIs and the offsets code ask of them.

Replay: while the partition loads, each GroupMetadata record rebuilds its group (Stable with
its members, or Empty) and a tombstone drops it. Once loaded, a classic group's memory is
ahead of its records (Kafka's classic groups do not replay what they wrote): the record a
SyncGroup or an empty generation wrote is already the group in memory, so it is not replayed
over it.

Consumer (KIP-848) groups share the map: ``put_group`` / ``remove_group`` are their hook.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.classic.classic import ClassicGroup, GroupState, JoinResult, SyncResult
from kmeta.server.group.classic.classic_join import ClassicJoin, JoinRequest
from kmeta.server.group.classic.classic_sync import ClassicSync, SyncRequest
from kmeta.server.group.classic.rebalance import Rebalancer
from kmeta.server.group.context import Group, Record, ShardContext
from kmeta.server.group.records import (
    group_metadata_key,
    read_group_metadata_key,
    read_group_metadata_value,
)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


class GroupMetadataManager:
    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx
        self.rebalancer = Rebalancer(ctx)
        self._join = ClassicJoin(ctx, self.rebalancer)
        self._sync = ClassicSync(ctx, self.rebalancer)
        self.loaded = False

    # -- the group map ------------------------------------------------------------------------
    def group_or_none(self, group_id: str) -> Group | None:
        """The group (classic or consumer) of that id, None when there is none (a Dead classic
        group is gone)."""
        group = self.ctx.groups.get(group_id)
        if isinstance(group, ClassicGroup) and group.state == GroupState.DEAD:
            return None
        return group

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.ctx.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) and group.state != GroupState.DEAD else None

    def put_group(self, group: Group) -> None:
        """kip848's hook: a consumer group enters the map."""
        self.ctx.groups[group.group_id] = group

    def remove_group(self, group_id: str) -> None:
        self.ctx.groups.pop(group_id, None)

    def list_groups(self, states: set[str], types: set[str]) -> list[ListedGroup]:
        """States and types compared case-insensitively, as Kafka does; empty: all."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = []
        for group in self.ctx.groups.values():
            if isinstance(group, ClassicGroup) and group.state == GroupState.DEAD:
                continue
            if wanted_states and group.state_name.lower() not in wanted_states:
                continue
            if wanted_types and group.group_type.lower() not in wanted_types:
                continue
            listed.append(ListedGroup(group.group_id, group.protocol_type or "", group.state_name, group.group_type))
        return listed

    # -- classic operations -------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        return await self._join.join(req)

    async def sync(self, req: SyncRequest) -> SyncResult:
        return await self._sync.sync(req)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        return self._sync.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        return self._sync.leave(group_id, members)

    def deletable(self, group_id: str) -> ErrorCode:
        """DeleteGroups' check (Kafka's ``validateDeleteGroup``): only an empty group goes."""
        group = self.ctx.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.state == GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state_name != GroupState.EMPTY.value:
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    def delete_records(self, group_id: str) -> list[Record]:
        group = self.ctx.groups.get(group_id)
        tombstones = getattr(group, "tombstones", None)
        if tombstones is not None:  # a KIP-848 consumer group: its own records
            return list(tombstones())
        return [(group_metadata_key(group_id), None)]

    def begin_delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups passed its checks: a classic group is Dead while its tombstones are
        written, so no member joins it meanwhile (they are told to find the coordinator)."""
        error = self.deletable(group_id)
        group = self.ctx.groups.get(group_id)
        if error == ErrorCode.NONE and isinstance(group, ClassicGroup):
            self.rebalancer.unload(group)
        return error

    def delete_failed(self, group_id: str) -> None:
        """The tombstones were not written: the group is Empty again, as it was."""
        group = self.ctx.groups.get(group_id)
        if isinstance(group, ClassicGroup) and group.state == GroupState.DEAD:
            self.ctx.groups[group_id] = ClassicGroup(
                group_id, generation_id=group.generation_id, protocol_type=group.protocol_type
            )

    def deleted(self, group_id: str) -> None:
        """The tombstones are committed: the group is gone."""
        group = self.ctx.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup) and group.state != GroupState.DEAD:
            self.rebalancer.unload(group)

    # -- replay and lifecycle -----------------------------------------------------------------
    def replay(self, key: bytes, value: bytes | None) -> None:
        if self.loaded:
            return  # (see the module docstring)
        group_id = read_group_metadata_key(key)
        if value is None:
            self.ctx.groups.pop(group_id, None)
            return
        self.ctx.groups[group_id] = ClassicGroup.from_record(group_id, read_group_metadata_value(value))

    def on_loaded(self) -> None:
        """Loaded members get a session each: those that do not heartbeat the new coordinator
        in time go, and their group rebalances."""
        self.loaded = True
        for group in list(self.ctx.groups.values()):
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self.rebalancer.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def on_unloaded(self) -> None:
        for group in list(self.ctx.groups.values()):
            if isinstance(group, ClassicGroup) and group.state != GroupState.DEAD:
                self.rebalancer.unload(group)
        self.ctx.groups.clear()
        for task in list(self.ctx.tasks):
            task.cancel()
