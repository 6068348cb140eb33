"""OffsetMetadataManager: one ``__consumer_offsets`` shard's committed offsets (Kafka's
``OffsetMetadataManager``).

The state is what the shard's records say, nothing more: every change arrives through
:meth:`OffsetMetadataManager.replay` once the coordinator runtime committed its batch (or while
the shard loads), so a new leader of the partition rebuilds exactly what the old one served.
The request-side methods only *compute records*; they change nothing until those records come
back through replay.

* Committed offsets per group / topic / partition: offset, leader epoch, metadata, commit
  timestamp, the optional expire timestamp of OffsetCommit v2-v4, and the offset of the record
  in ``__consumer_offsets`` (Kafka keeps it so that a transactional commit materialised late
  never overwrites a newer plain one).
* Pending transactional offsets per producer id (TxnOffsetCommit records from a transactional
  batch, producer id >= 0): moved to the committed offsets when the producer's COMMIT marker
  lands in the partition, dropped on ABORT. ``open_transactions_by_group`` lets OffsetFetch with
  ``require_stable`` answer UNSTABLE_OFFSET_COMMIT while one is pending.
* Tombstones (OffsetDelete, DeleteGroups, expiry) remove a committed offset and any pending
  transactional offset of that partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from kmeta.server.group.offsets.offset_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_key,
    decode_value,
    offset_commit_tombstone,
)

#: OffsetFetch's answer for a partition without a committed offset
INVALID_OFFSET = -1
NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """One committed offset (Kafka's ``OffsetAndMetadata``)."""

    committed_offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp_ms: int
    #: OffsetCommit v2-v4's retention time made absolute; None: the broker's retention applies
    expire_timestamp_ms: int | None
    #: where its record is in __consumer_offsets
    record_offset: int

    @classmethod
    def from_record(cls, record_offset: int, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            None if value.expire_timestamp == -1 else value.expire_timestamp,
            record_offset,
        )


#: group -> topic -> partition -> offset
GroupOffsets = dict[str, dict[int, OffsetAndMetadata]]


class Offsets:
    """Offsets by group, topic and partition (empty maps are removed as Kafka's are)."""

    def __init__(self) -> None:
        self.by_group: dict[str, GroupOffsets] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.by_group.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self.by_group.setdefault(group, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        topics = self.by_group.get(group)
        if topics is None or topic not in topics:
            return None
        removed = topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self.by_group[group]
        return removed

    def items(self) -> Iterator[tuple[str, str, int, OffsetAndMetadata]]:
        for group, topics in self.by_group.items():
            for topic, partitions in topics.items():
                for partition, offset in partitions.items():
                    yield group, topic, partition, offset

    def __len__(self) -> int:
        return sum(len(p) for topics in self.by_group.values() for p in topics.values())


class Startable(Protocol):
    def start(self) -> None: ...


class OffsetMetadataManager:
    """The offsets of the groups one shard coordinates."""

    def __init__(self) -> None:
        #: the shard's retention check (kmeta.server.group.offsets.offsets_expiry), started once loaded
        self.expiration: Startable | None = None
        #: called with the group of each offset commit replayed: the groups make a "simple"
        #: group (empty, no protocol type) of one they do not know, as Kafka's replay does
        self.group_seen: Callable[[str], None] | None = None
        self.offsets = Offsets()
        #: producer id -> its transaction's offsets, until its COMMIT / ABORT marker
        self.pending_transactional_offsets: dict[int, Offsets] = {}
        #: group -> producer ids with pending offsets for it
        self.open_transactions_by_group: dict[str, set[int]] = {}

    # -- replay: the only place state changes --------------------------------------------------
    def replay(self, record_offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None) -> None:
        """A ``__consumer_offsets`` record whose key is an OffsetCommitKey (the shard routes
        them here by key version), committed or read while loading."""
        self.replay_offset_commit(record_offset, producer_id, decode_key(key), None if value is None else decode_value(value))

    def replay_offset_commit(
        self, record_offset: int, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None
    ) -> None:
        group, topic, partition = key.group, key.topic, key.partition
        if value is not None:
            if self.group_seen is not None:
                self.group_seen(group)
            offset = OffsetAndMetadata.from_record(record_offset, value)
            if producer_id == NO_PRODUCER_ID:
                self.offsets.put(group, topic, partition, offset)
            else:
                self.pending_transactional_offsets.setdefault(producer_id, Offsets()).put(group, topic, partition, offset)
                self.open_transactions_by_group.setdefault(group, set()).add(producer_id)
            return
        self.offsets.remove(group, topic, partition)
        # a tombstone also drops what open transactions hold for the partition (Kafka's replay)
        for pid in self.open_transactions_by_group.get(group, ()):
            pending = self.pending_transactional_offsets.get(pid)
            if pending is not None:
                pending.remove(group, topic, partition)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A COMMIT / ABORT marker of ``producer_id`` landed in this partition."""
        pending = self.pending_transactional_offsets.pop(producer_id, None)
        if pending is None:
            return
        for group in pending.by_group:
            open_ = self.open_transactions_by_group.get(group)
            if open_ is not None:
                open_.discard(producer_id)
                if not open_:
                    del self.open_transactions_by_group[group]
        if not committed:
            return
        for group, topic, partition, offset in pending.items():
            existing = self.offsets.get(group, topic, partition)
            # the newest record wins: a plain commit written after the transactional one stays
            if existing is None or offset.record_offset > existing.record_offset:
                self.offsets.put(group, topic, partition, offset)

    def on_loaded(self) -> None:
        """The shard's whole log is replayed: the retention check starts."""
        if self.expiration is not None:
            self.expiration.start()

    # -- queries -----------------------------------------------------------------------------
    def offset(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group, topic, partition)

    def committed(self, group_id: str) -> Mapping[str, Mapping[int, OffsetAndMetadata]]:
        """The group's committed offsets by topic and partition (read-only; empty when none)."""
        return self.offsets.by_group.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        """Committed or pending offsets exist for the group (it cannot be dropped yet)."""
        return group_id in self.offsets.by_group or group_id in self.open_transactions_by_group

    def group_ids(self) -> set[str]:
        return set(self.offsets.by_group) | set(self.open_transactions_by_group)

    def has_committed_offset(self, group: str, topic: str, partition: int) -> bool:
        return self.offsets.get(group, topic, partition) is not None

    def has_pending_transactional_offsets(self, group: str, topic: str, partition: int) -> bool:
        for pid in self.open_transactions_by_group.get(group, ()):
            pending = self.pending_transactional_offsets.get(pid)
            if pending is not None and pending.get(group, topic, partition) is not None:
                return True
        return False

    def has_open_transactions(self, group: str) -> bool:
        return group in self.open_transactions_by_group

    def pending_transactional_offset(self, producer_id: int, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        pending = self.pending_transactional_offsets.get(producer_id)
        return None if pending is None else pending.get(group, topic, partition)

    # -- records for requests (state changes only when they are replayed) ---------------------
    def delete_all_offsets(self, group_id: str) -> list[Record]:
        """Tombstones for every offset of the group, committed or pending (DeleteGroups)."""
        records = [offset_commit_tombstone(group_id, t, p) for t, parts in self.committed(group_id).items() for p in parts]
        for pid in self.open_transactions_by_group.get(group_id, ()):
            pending = self.pending_transactional_offsets.get(pid)
            for topic, parts in ({} if pending is None else pending.by_group.get(group_id, {})).items():
                for partition in parts:
                    if not self.has_committed_offset(group_id, topic, partition):  # (one tombstone is enough)
                        records.append(offset_commit_tombstone(group_id, topic, partition))
        return list(dict.fromkeys(records))

    def delete_offset_records(self, group_id: str, topic: str, partitions: Iterable[int]) -> list[Record]:
        """OffsetDelete: a tombstone for each partition with a committed or pending offset."""
        return [
            offset_commit_tombstone(group_id, topic, p)
            for p in partitions
            if self.has_committed_offset(group_id, topic, p) or self.has_pending_transactional_offsets(group_id, topic, p)
        ]

    def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]], before: int | None = None) -> list[Record]:
        """Tombstones for the offsets (committed or pending) of deleted topic partitions, in
        every group (Kafka's ``onPartitionsDeleted``). ``before``: only offsets whose record
        is below that offset of ``__consumer_offsets`` (those written before the deletion was
        learned: a commit to a topic re-created since under the same name stays)."""
        gone = set(partitions)
        records: dict[Record, None] = {}
        for store in (self.offsets, *self.pending_transactional_offsets.values()):
            for group, topic, partition, offset in store.items():
                if (topic, partition) in gone and (before is None or offset.record_offset < before):
                    records[offset_commit_tombstone(group, topic, partition)] = None
        return list(records)
