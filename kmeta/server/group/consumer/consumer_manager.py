"""The consumer groups of one ``__consumer_offsets`` partition (the KIP-848 half of Kafka's
``GroupMetadataManager``): replays their records and decides heartbeats, leaves, timeouts,
metadata refreshes and describes. The state changes only in ``replay``; every decision
returns an :class:`Outcome` whose records the coordinator writes (see consumer_heartbeat,
which also holds the heartbeat's checks); a described group is consumer_describe's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.errors import CorruptMessageError, ErrorCode, UnsupportedVersionError
from kmeta.protocol.messages import consumer_group_describe as cgd
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.assignors import PartitionAssignor, assignors
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_describe import described_group
from kmeta.server.group.consumer.consumer_group import DEAD, EMPTY, ConsumerGroup
from kmeta.server.group.consumer.consumer_heartbeat import (
    ConsumerGroupConfig,
    Decision,
    GroupError,
    Outcome,
    check_epoch,
    check_static_member,
    joined,
    member_records,
    new_member_id,
    reconcile_member,
    removal_records,
    response_assignment,
    validate,
)
from kmeta.server.group.consumer.consumer_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from kmeta.server.group.consumer.consumer_records import Record
from kmeta.server.group.consumer.consumer_target import target_member_record
from kmeta.server.group.records import group_metadata_key

log = logging.getLogger(__name__)


class ConsumerGroupManager:
    def __init__(
        self,
        config: ConsumerGroupConfig | None = None,
        offered: dict[str, PartitionAssignor] | None = None,
        groups: dict[str, Any] | None = None,
    ) -> None:
        self.config = config or ConsumerGroupConfig()
        self.assignors = offered if offered is not None else assignors(self.config.assignors)
        #: group id -> group: the shard's one map of classic and consumer groups (one id
        #: names one group of either kind)
        self.groups: dict[str, Any] = {} if groups is None else groups

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def other_group_type(self, group_id: str) -> str | None:
        """The type of a group of another kind with this id (a classic group; a Dead one is
        gone)."""
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ConsumerGroup) or group.state_name == DEAD:
            return None
        return str(group.group_type)

    # -- replay --------------------------------------------------------------------------------
    def replay(self, key: bytes, value: bytes | None) -> None:
        """A committed consumer-group record (key versions 3-8)."""
        try:
            version, group_id, member_id = rec.decode_key(key)
            group = self.consumer_group(group_id)
            if group is None:
                if value is None:
                    return
                # (a classic group of that id before these records is replaced, as Kafka's
                # loader converts it)
                group = self.groups[group_id] = ConsumerGroup(group_id)
            group.replay(version, member_id, value)
        except (CorruptMessageError, UnsupportedVersionError) as exc:
            log.error("skipping a consumer group record that does not decode: %s", exc)
            return
        if version == rec.GROUP_METADATA and value is None:
            self.groups.pop(group_id, None)  # DeleteGroups wrote the group's tombstones

    # -- heartbeat -----------------------------------------------------------------------------
    def heartbeat(
        self, request: cgh.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str, snap: MetadataSnapshot
    ) -> Outcome:
        try:
            validate(request, list(self.assignors))
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request, snap)
            return self._heartbeat(request, client_id, client_host, snap)
        except GroupError as exc:
            response = cgh.ConsumerGroupHeartbeatResponse(
                version=request.version, error_code=exc.code, error_message=exc.message
            )
            return Outcome(response=response)

    def _group(self, group_id: str, create: bool, records: list[Record]) -> ConsumerGroup:
        group = self.consumer_group(group_id)
        if group is not None:
            return group
        other = self.groups.get(group_id)
        if create and other is not None and other.state_name == EMPTY and other.group_type == "classic":
            # Kafka's maybeDeleteEmptyClassicGroup: an empty classic group of that id goes (its
            # metadata's tombstone first) and a consumer group takes the id; its offsets stay
            records.append((group_metadata_key(group_id), None))
            return ConsumerGroup(group_id)
        if self.other_group_type(group_id) is not None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)  # it exists once its first records are replayed

    def _heartbeat(
        self, request: cgh.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str, snap: MetadataSnapshot
    ) -> Outcome:
        epoch = request.member_epoch
        upgrade: list[Record] = []
        group = self._group(request.group_id, epoch == 0, upgrade)
        if len(group.members) >= self.config.max_size and not group.has_member(request.member_id):
            raise GroupError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        member_id = request.member_id or new_member_id()
        member, counted, replaces = self._member(group, member_id, request)
        updated = joined(member, request, client_id, client_host)
        d = Decision(group, snap, self.assignors)
        d.out.records.extend(upgrade)
        if replaces is not None:
            d.out.records.extend(removal_records(group.group_id, replaces))
        is_new = counted is None or replaces is not None
        if is_new or updated.metadata_value() != member.metadata_value():
            d.out.records.append(member_records(group.group_id, updated)[0])
        bump = counted is None or updated.subscription() != member.subscription()
        before = len(d.out.records)
        target_epoch, target = d.bump_and_assign(counted, updated, bump, replaces)
        if replaces is not None and not any(
            r[0] == rec.encode_key(rec.TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id) for r in d.out.records[before:]
        ):
            d.out.records.append(target_member_record(group.group_id, member_id, target or {}))
        reconciled = reconcile_member(d, updated, target_epoch, target or {}, request.topic_partitions)
        if is_new and reconciled == updated:
            d.out.records.append(member_records(group.group_id, reconciled)[1])
        d.out.session = (group.group_id, member_id)
        full = epoch == 0 or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.topic_partitions is not None
        )
        changed = reconciled.assigned_partitions != member.assigned_partitions
        d.out.response = cgh.ConsumerGroupHeartbeatResponse(
            version=request.version,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=response_assignment(reconciled) if full or changed else None,
        )
        return d.out

    def _member(
        self, group: ConsumerGroup, member_id: str, request: cgh.ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None, str | None]:
        """(the member as this heartbeat starts from, the member as the group counts it, the
        member id a static member takes over)."""
        known = group.members.get(member_id)
        instance_id = request.instance_id
        static = group.static_member(instance_id)
        if request.member_epoch == 0:
            if instance_id is None or static is None:
                return known or ConsumerGroupMember(member_id), known, None
            if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group "
                    f"because the instance id is owned by {static.member_id} member.",
                )
            # the new incarnation takes over the old one's partitions from epoch 0 (Kafka's
            # replaceStaticMember), and reconciles from them
            heir = replace(
                static, member_id=member_id, member_epoch=0, previous_member_epoch=-1,
                state=MemberState.STABLE, partitions_pending_revocation={},
            )  # fmt: skip
            return heir, static, static.member_id
        if known is None:
            raise GroupError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
        if instance_id is not None:
            check_static_member(static, member_id, instance_id)
        check_epoch(known, request.member_epoch, request.topic_partitions)
        return known, known, None

    def _leave(self, request: cgh.ConsumerGroupHeartbeatRequest, snap: MetadataSnapshot) -> Outcome:
        group = self._group(request.group_id, False, [])
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise GroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {request.member_id} is not a member of group {group.group_id}.",
                )
        else:
            static = group.static_member(request.instance_id)
            member = check_static_member(static, request.member_id, request.instance_id)
        d = Decision(group, snap, self.assignors)
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # a static member leaving for a while keeps its partitions for its next incarnation
            left = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
            d.out.records.append(member_records(group.group_id, left)[1])
            d.out.cancel_rebalance = (group.group_id, member.member_id)
        else:
            d.fence(member)
        d.out.response = cgh.ConsumerGroupHeartbeatResponse(
            version=request.version, member_id=request.member_id, member_epoch=request.member_epoch
        )
        return d.out

    # -- timers and metadata -------------------------------------------------------------------
    def expire(self, group_id: str, member_id: str, snap: MetadataSnapshot, revoking_epoch: int | None = None) -> Outcome | None:
        """A session timeout (or, with ``revoking_epoch``, a rebalance timeout: the member did
        not revoke in time at that epoch) fences the member; None when there is nothing to do."""
        group = self.consumer_group(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return None
        if revoking_epoch is not None and (
            member.member_epoch != revoking_epoch or member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            return None
        d = Decision(group, snap, self.assignors)
        d.fence(member)
        return d.out

    def stale_groups(self, snap: MetadataSnapshot, topics: Iterable[str] | None = None) -> list[str]:
        """The groups whose subscribed topics' partitions differ from ``snap`` (``topics``: only
        groups that may care about these changed topics)."""
        changed = None if topics is None else set(topics)
        stale = []
        for group_id, group in self.groups.items():
            if not isinstance(group, ConsumerGroup) or not group.members:
                continue
            if changed is not None and not group.subscribed_regexes and not (
                changed & (set(group.subscribed_topic_names) | set(group.subscription_metadata))
            ):
                continue
            wanted = group.subscription_metadata_of(group.subscribed_topics(snap), snap)
            if wanted != group.subscription_metadata:
                stale.append(group_id)
        return stale

    def refresh(self, group_id: str, snap: MetadataSnapshot) -> Outcome | None:
        """Metadata changed under a group: new subscription metadata, a group epoch bump and a
        new target assignment (None: nothing changed for it after all)."""
        group = self.consumer_group(group_id)
        if group is None or group_id not in self.stale_groups(snap):
            return None
        d = Decision(group, snap, self.assignors)
        d.bump_and_assign(None, None, bump=False)
        return d.out

    # -- describe ------------------------------------------------------------------------------
    def describe(self, group_id: str, snap: MetadataSnapshot) -> cgd.DescribedGroup:
        group = self.consumer_group(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a consumer group."
                if self.other_group_type(group_id) is not None
                else f"Group {group_id} not found."
            )
            return cgd.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id)
        return described_group(group, snap, self.assignors)
