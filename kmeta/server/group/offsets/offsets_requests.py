"""The offset APIs' decisions on one shard, without I/O: which records a commit, a delete or the
retention check writes, and what a fetch answers (Kafka's ``OffsetMetadataManager.commitOffset``,
``commitTransactionalOffset``, ``deleteOffsets``, ``fetchOffsets`` / ``fetchAllOffsets`` and
``cleanupExpiredOffsets``). The handlers validate the group first, write the records through the
coordinator runtime, and answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.offsets.offset_records import (
    Record,
    offset_commit_record,
    offset_commit_tombstone,
)
from kmeta.server.group.offsets.offsets import (
    INVALID_OFFSET,
    OffsetAndMetadata,
    OffsetMetadataManager,
)

#: offset.metadata.max.bytes (Kafka's default); longer metadata is OFFSET_METADATA_TOO_LARGE
DEFAULT_OFFSET_METADATA_MAX_BYTES = 4096
#: OffsetCommitRequest.DEFAULT_RETENTION_TIME / DEFAULT_TIMESTAMP
DEFAULT_RETENTION_TIME = -1
DEFAULT_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class CommitPartition:
    """One partition of an OffsetCommit / TxnOffsetCommit request."""

    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = DEFAULT_TIMESTAMP  # v1 only: the client's commit time


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: int
    offset: int = INVALID_OFFSET
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


def commit_offset_records(
    group_id: str,
    topics: Iterable[tuple[str, Sequence[CommitPartition]]],
    now_ms: int,
    *,
    retention_time_ms: int = DEFAULT_RETENTION_TIME,
    metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES,
) -> tuple[dict[tuple[str, int], ErrorCode], list[Record]]:
    """Each partition's answer and the records that commit the valid ones. v2-v4's explicit
    retention becomes the record's expire timestamp (value v1); otherwise the broker's
    offsets.retention.minutes applies when the retention check runs."""
    expire_ms = None if retention_time_ms == DEFAULT_RETENTION_TIME else now_ms + retention_time_ms
    errors: dict[tuple[str, int], ErrorCode] = {}
    records: list[Record] = []
    for topic, partitions in topics:
        for p in partitions:
            metadata = "" if p.metadata is None else p.metadata
            if len(metadata) > metadata_max_bytes:  # (Kafka compares the string's length)
                errors[(topic, p.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            errors[(topic, p.partition)] = ErrorCode.NONE
            commit_ms = now_ms if p.commit_timestamp_ms == DEFAULT_TIMESTAMP else p.commit_timestamp_ms
            records.append(
                offset_commit_record(group_id, topic, p.partition, p.offset, p.leader_epoch, metadata, commit_ms, expire_ms)
            )
    return errors, records


def fetch_offsets(
    offsets: OffsetMetadataManager,
    group_id: str,
    topics: Sequence[tuple[str, Sequence[int]]] | None,
    require_stable: bool,
    *,
    known_group: bool = True,
) -> list[tuple[str, list[FetchedPartition]]]:
    """OffsetFetch for one group: the partitions asked (``topics``), or every committed offset
    (None). ``require_stable``: a partition with a pending transactional offset answers
    UNSTABLE_OFFSET_COMMIT (the client retries once the transaction ends). A group that fails
    validation (``known_group`` False) answers -1 everywhere, as Kafka's ``failAllPartitions``."""
    committed = offsets.committed(group_id) if known_group else {}

    def answer(topic: str, partition: int, offset: OffsetAndMetadata | None) -> FetchedPartition:
        if require_stable and offsets.has_pending_transactional_offsets(group_id, topic, partition):
            return FetchedPartition(partition, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        if offset is None:
            return FetchedPartition(partition)
        return FetchedPartition(partition, offset.committed_offset, offset.leader_epoch, offset.metadata)

    if topics is None:
        return [
            (topic, [answer(topic, p, o) for p, o in parts.items()]) for topic, parts in committed.items()
        ]
    return [
        (topic, [answer(topic, p, committed.get(topic, {}).get(p)) for p in partitions]) for topic, partitions in topics
    ]


def expired_offset_records(
    offsets: OffsetMetadataManager,
    group_id: str,
    base: Callable[[int], int] | None,
    is_subscribed: Callable[[str], bool],
    now_ms: int,
    retention_ms: int,
) -> tuple[list[Record], bool]:
    """The retention check for one group (``cleanupExpiredOffsets``): tombstones for offsets
    past their retention, and whether none is left (the group may then go too). ``base`` is the
    group's expiration condition (None: nothing of it expires now); offsets of subscribed topics
    and those with a pending transactional offset stay. An explicit expire timestamp (v2-v4
    commits) wins over the broker's retention."""
    committed = offsets.committed(group_id)
    if not committed:
        return [], True
    if base is None:
        return [], False
    records: list[Record] = []
    all_expired = True
    for topic, partitions in committed.items():
        if is_subscribed(topic):
            all_expired = False
            continue
        for partition, offset in partitions.items():
            if offset.expire_timestamp_ms is not None:
                expired = now_ms >= offset.expire_timestamp_ms
            else:
                expired = now_ms - base(offset.commit_timestamp_ms) >= retention_ms
            if expired and not offsets.has_pending_transactional_offsets(group_id, topic, partition):
                records.append(offset_commit_tombstone(group_id, topic, partition))
            else:
                all_expired = False
    return records, all_expired and not offsets.has_open_transactions(group_id)
