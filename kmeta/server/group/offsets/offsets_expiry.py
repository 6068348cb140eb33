"""offsets.retention.minutes on one shard (Kafka's ``GroupCoordinatorShard.cleanupGroupMetadata``
with ``OffsetMetadataManager.cleanupExpiredOffsets`` and ``GroupMetadataManager.maybeDeleteGroup``).

Every offsets.retention.check.interval.ms, once the shard is loaded, each group with offsets is
looked at through its expiration condition (:mod:`kmeta.server.group.offsets.offsets_groups`): an empty
classic group's offsets expire ``retention`` after it became empty, a standalone consumer's
(a group nobody joined) ``retention`` after each commit, a stable "consumer" group's offsets of
topics nobody subscribes to any more ``retention`` after their commit; a v2-v4 commit's own
expire timestamp wins. Offsets with a pending transactional commit stay. Tombstones for the
expired ones are written in one batch; a group left with no offsets, empty and not in a
transaction, is deleted with them (its GroupMetadata tombstone).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kmeta.protocol.errors import ErrorCode
from kmeta.server.coordinator.runtime import CoordinatorRuntime
from kmeta.server.group.context import now_ms
from kmeta.server.group.offsets.offset_records import Record
from kmeta.server.group.offsets.offsets_groups import offsets_group, offsets_of
from kmeta.server.group.offsets.offsets_requests import expired_offset_records
from kmeta.server.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)

EXPIRATION_KEY = "offsets-expiration"


@dataclass(frozen=True, slots=True)
class OffsetsConfig:
    """The broker's offsets.* settings (Kafka's defaults)."""

    retention_ms: int = 7 * 24 * 60 * 60 * 1000  # offsets.retention.minutes
    retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    metadata_max_bytes: int = 4096  # offset.metadata.max.bytes


#: the most one retention check writes (its tombstones are one batch, which must fit
#: __consumer_offsets' max.message.bytes, 1 MiB by default): what is left is the next check's,
#: which runs at once. (A check that wrote everything in one batch would fail for good once
#: that batch is too large, and the groups and offsets it should delete would stay forever.)
CHECK_BUDGET_BYTES = 512 * 1024
#: a record's overhead in a batch beyond its key and value (length, attributes, deltas, headers)
_RECORD_OVERHEAD = 24


def expired_records(shard: GroupCoordinatorShard, now_ms: int, retention_ms: int) -> tuple[list[Record], list[str]]:
    """The tombstones of a retention check without a budget, and the groups they delete."""
    records, emptied, _ = expired_records_within(shard, now_ms, retention_ms, budget=None)
    return records, emptied


def expired_records_within(
    shard: GroupCoordinatorShard, now_ms: int, retention_ms: int, budget: int | None = CHECK_BUDGET_BYTES
) -> tuple[list[Record], list[str], bool]:
    """The tombstones of one retention check, the groups they delete, and whether more is left
    for the next check (the budget ran out; a group's tombstones stay in one check, and the
    first group's are taken whatever their size, so every check makes progress)."""
    groups, offsets = shard.groups, offsets_of(shard)
    records: list[Record] = []
    emptied: list[str] = []
    size = 0
    for group_id in sorted(offsets.group_ids() | set(groups.ctx.groups)):
        view = offsets_group(shard, group_id)
        expired, all_expired = expired_offset_records(
            offsets, group_id, view.offset_expiration_base(), view.is_subscribed_to_topic, now_ms, retention_ms
        )
        delete = all_expired and groups.group_or_none(group_id) is not None and groups.deletable(group_id) is ErrorCode.NONE
        group_records = expired + (groups.delete_records(group_id) if delete else [])
        if not group_records:
            continue
        cost = sum(len(key) + len(value or b"") + _RECORD_OVERHEAD for key, value in group_records)
        if budget is not None and records and size + cost > budget:
            return records, emptied, True
        records += group_records
        size += cost
        if delete:
            emptied.append(group_id)
    return records, emptied, False


class OffsetExpiration:
    """The shard's periodic retention check, started once the shard is loaded (the runtime
    cancels its timer when the shard unloads). Its tombstones are one write operation of the
    runtime, computed after every earlier write is replayed: a commit just before is seen."""

    def __init__(self, runtime: CoordinatorRuntime[GroupCoordinatorShard], partition: int, config: OffsetsConfig) -> None:
        self.runtime = runtime
        self.partition = partition
        self.config = config

    def start(self, delay_ms: int | None = None) -> None:
        delay = self.config.retention_check_interval_ms if delay_ms is None else delay_ms
        self.runtime.schedule(self.partition, EXPIRATION_KEY, delay / 1000, self.run)

    async def run(self) -> None:
        more = False

        def op(shard: GroupCoordinatorShard) -> tuple[list[Record], tuple[GroupCoordinatorShard, list[str], int]]:
            nonlocal more
            records, emptied, more = expired_records_within(shard, now_ms(), self.config.retention_ms)
            return records, (shard, emptied, len(records))

        again = False
        try:
            error, result = await self.runtime.write_op(self.partition, op)
            again = more and error is ErrorCode.NONE
            if result is not None and result[2] and error is ErrorCode.NONE:
                shard, emptied, count = result
                for group_id in emptied:
                    shard.groups.deleted(group_id)  # (their tombstones are committed)
                log.info("__consumer_offsets-%d: removed %d expired offsets and %d groups", self.partition,
                         count - len(emptied), len(emptied))  # fmt: skip
            elif result is not None and result[2]:
                log.warning("__consumer_offsets-%d: the expired offsets' tombstones failed: %s", self.partition, error.name)
        finally:
            # (the next check, as Kafka's timer reschedules itself; at once when this one left
            # expired records for it)
            self.start(0 if again else None)
