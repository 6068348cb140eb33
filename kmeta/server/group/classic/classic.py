"""A classic group and its members, as pure state (Kafka's ``ClassicGroup`` /
``ClassicGroupMember``): no I/O, no timers; :mod:`.rebalance` drives it.

States and the transitions Kafka allows (``ClassicGroupState``)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲         │ (no member left: Empty)           │ leader's SyncGroup
      └─────────────────┼─────────┘                                   ▼ written
                        └──────── join, leave, expiry ─────────── Stable
    any state ──DeleteGroups / unload──▶ Dead

A member's waiters are callables the operations layer hands in (a JoinGroup or SyncGroup
answer still owed); the group calls each at most once and forgets it.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.records import GroupMetadataValue, MemberMetadata


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: target state -> the states it may be entered from (ClassicGroupState's validPreviousStates)
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(Exception):
    """A bug: the operations layer asked for a transition Kafka never makes."""


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A JoinGroup answer (members: the leader's view, else empty)."""

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinWaiter = Callable[[JoinResult], None]
SyncWaiter = Callable[[SyncResult], None]


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_waiter: JoinWaiter | None = None
    sync_waiter: SyncWaiter | None = None
    #: joined for the first time and not yet part of a completed generation
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return tuple((n, bytes(m)) for n, m in protocols) == self.protocols

    def answer_join(self, result: JoinResult) -> None:
        waiter, self.join_waiter = self.join_waiter, None
        if waiter is not None:
            waiter(result)

    def answer_sync(self, result: SyncResult) -> None:
        waiter, self.sync_waiter = self.sync_waiter, None
        if waiter is not None:
            waiter(result)


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    #: member id -> member, in join order (the first one left leads when the leader goes)
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    #: group.instance.id -> member id (KIP-345)
    static_members: dict[str, str] = field(default_factory=dict)
    #: ids handed out with MEMBER_ID_REQUIRED, not yet rejoined with (KIP-394)
    pending_members: set[str] = field(default_factory=set)
    #: members of the current generation that have not sent SyncGroup yet
    pending_sync: set[str] = field(default_factory=set)
    #: a member joined since the initial rebalance delay last ran (it waits once more)
    new_member_added: bool = False
    #: the initial delayed join (group.initial.rebalance.delay.ms) is running, not the regular one
    initial_join_pending: bool = False
    current_state_timestamp_ms: int = -1

    group_type = "classic"

    # -- views the offsets code and the describe/list APIs read --------------------------------
    @property
    def state_name(self) -> str:
        return self.state.value

    def in_state(self, *states: GroupState) -> bool:
        """(A call, not a comparison: the state changes under an await or a transition.)"""
        return self.state in states

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateMember``: a static member must be the one its instance id names."""
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    # -- state --------------------------------------------------------------------------------
    def transition_to(self, target: GroupState, now_ms: int = -1) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, new_member_id: str) -> ClassicGroupMember:
        """The static member ``group_instance_id`` comes back as ``new_member_id`` (KIP-345):
        same place, same assignment; the leadership follows it."""
        old_id = self.static_members[group_instance_id]
        member = self.members[old_id]
        self.members = {(new_member_id if k == old_id else k): v for k, v in self.members.items()}
        member.member_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member_id)
        return member

    def supports_protocols(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Kafka's ``supportsProtocols``: the first member names a type and some protocols;
        later ones must name the group's type and a protocol every member supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        wanted = {name for name, _ in protocols}
        return bool(wanted & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        candidates: set[str] | None = None
        for member in self.members.values():
            names = {name for name, _ in member.protocols}
            candidates = names if candidates is None else candidates & names
        return candidates or set()

    def select_protocol(self) -> str:
        """Each member votes for the first candidate it prefers; the most votes wins (ties: the
        first candidate voted for)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id}: no protocol every member supports")
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        return votes.most_common(1)[0][0]

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def init_next_generation(self, now_ms: int = -1) -> None:
        """A join completed: the next generation, CompletingRebalance with a chosen protocol,
        or Empty when nobody rejoined."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync = set(self.members)

    def join_result(self, member_id: str, *, with_members: bool, skip_assignment: bool = False) -> JoinResult:
        members = (
            tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values())
            if with_members
            else ()
        )
        return JoinResult(
            ErrorCode.NONE,
            member_id=member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=members,
            skip_assignment=skip_assignment,
        )

    # -- records ------------------------------------------------------------------------------
    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """This group as a GroupMetadataValue (with ``assignments`` instead of the members'
        own, for the leader's SyncGroup before it is written)."""
        return GroupMetadataValue(
            version=3,
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.current_state_timestamp_ms,
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=m.assignment if assignments is None else assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A group as loaded from its last record: Stable with its members, or Empty."""
        group = cls(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            current_state_timestamp_ms=value.current_state_timestamp,
        )
        for m in value.members:
            group.add(
                ClassicGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    # (v0 records carry no rebalance timeout: Kafka takes the session timeout)
                    rebalance_timeout_ms=m.rebalance_timeout if value.version >= 1 else m.session_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol or "", bytes(m.subscription)),),
                    assignment=bytes(m.assignment),
                )
            )
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.protocol_type = value.protocol_type or None
        return group
