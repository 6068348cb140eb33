"""GroupCoordinatorShard: what one broker keeps for one ``__consumer_offsets`` partition it
leads (Kafka's ``GroupCoordinatorShard``), as the coordinator runtime's shard.

It holds the partition's GroupMetadataManager (classic groups, and consumer groups through
kip848's hook) and the offsets' OffsetMetadataManager, and routes each replayed record by its
key version (Kafka's ``CoordinatorRecordType``): 0 and 1 offset commits to the offsets
manager, 2 group metadata to the group manager, 3 and up (KIP-848's consumer-group records)
to the consumer-group replayer kip848 installs. A record type nobody here knows is skipped,
as a newer broker's record would be by Kafka's loader only if ignorable: it is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.context import GroupConfig, GroupRuntime, Record, ShardContext
from kmeta.server.group.manager import GroupMetadataManager
from kmeta.server.group.records import GROUP_METADATA_KEY_VERSION, key_version

log = logging.getLogger(__name__)

#: OffsetCommitKey versions 0 and 1
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)


class OffsetsReplayer(Protocol):
    """The offsets' OffsetMetadataManager as this shard drives it (kmeta.server.group.offsets.offsets)."""

    def replay(self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None) -> None: ...

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, committed: bool) -> None: ...

    def delete_all_offsets(self, group_id: str) -> list[Record]: ...

    def has_offsets(self, group_id: str) -> bool: ...

    def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]], before: int | None = None) -> list[Record]: ...

    def on_loaded(self) -> None: ...  # (the offsets' retention check starts)


class ConsumerRecordReplayer(Protocol):
    """kip848's consumer-group records (key versions 3 and up)."""

    def replay(self, offset: int, key_version: int, key: bytes, value: bytes | None) -> None: ...


class GroupCoordinatorShard:
    def __init__(
        self,
        partition: int,
        runtime: GroupRuntime,
        config: GroupConfig,
        offsets: Callable[[GroupMetadataManager], OffsetsReplayer] | None = None,
    ) -> None:
        self.partition = partition
        self.ctx = ShardContext(partition, runtime, config, {}, set())
        self.groups = GroupMetadataManager(self.ctx)
        #: the offsets' manager; it may read the groups (generation checks), hence the factory
        self.offsets: OffsetsReplayer | None = None if offsets is None else offsets(self.groups)
        #: set by kip848's code when it serves consumer groups on this shard
        self.consumer_records: ConsumerRecordReplayer | None = None

    def replay(self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None) -> None:
        version = key_version(key)
        if version in OFFSET_COMMIT_KEY_VERSIONS:
            if self.offsets is not None:
                self.offsets.replay(offset, producer_id, producer_epoch, key, value)
        elif version == GROUP_METADATA_KEY_VERSION:
            self.groups.replay(key, value)
        elif self.consumer_records is not None:
            self.consumer_records.replay(offset, version, key, value)
        else:
            log.warning("__consumer_offsets-%d: skipped a record of unknown type %d at offset %d", self.partition, version, offset)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        if self.offsets is not None:
            self.offsets.replay_end_transaction(producer_id, producer_epoch, committed)

    def on_loaded(self) -> None:
        self.groups.on_loaded()
        on_loaded = getattr(self.consumer_records, "on_loaded", None)
        if on_loaded is not None:  # (KIP-848 members get their sessions)
            on_loaded()
        if self.offsets is not None:
            self.offsets.on_loaded()

    def on_unloaded(self) -> None:
        self.groups.on_unloaded()

    def delete_group(self, group_id: str) -> tuple[list[Record], ErrorCode]:
        """DeleteGroups' check and tombstones (run as one write operation): the group's
        offsets, then its metadata (Kafka's order); none with the error that refuses it."""
        error = self.groups.begin_delete(group_id)
        if error != ErrorCode.NONE:
            return [], error
        records = [] if self.offsets is None else list(self.offsets.delete_all_offsets(group_id))
        return records + self.groups.delete_records(group_id), ErrorCode.NONE

    def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]], before: int | None = None) -> list[Record]:
        """Topics were deleted: tombstones for their offsets in every group of this shard
        (Kafka's ``GroupCoordinatorShard.onPartitionsDeleted``), run as one write operation."""
        return [] if self.offsets is None else self.offsets.on_partitions_deleted(partitions, before)
