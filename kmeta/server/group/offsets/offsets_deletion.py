"""Committed offsets of deleted topics (Kafka's ``GroupCoordinatorService.onPartitionsDeleted``
→ ``GroupCoordinatorShard.onPartitionsDeleted`` → ``OffsetMetadataManager.onPartitionsDeleted``).

Every broker learns of a deletion from the controller's UpdateMetadata (leader -2, or a FULL
update without the topic): :meth:`~kmeta.server.coordinator.coordinators.Coordinators
.partitions_deleted`. For each ``__consumer_offsets`` partition it leads, it writes tombstones
for every offset of the deleted partitions in every group of that shard, as one write
operation of the runtime, so they reach the log (and a later leader's load) like any other
tombstone.

Differences from Kafka, and why:

* The write is started, not waited for: Kafka blocks the request thread on it; here the
  UpdateMetadata is answered at once (the controller does not wait on group state).
* Only offsets whose record lies below the partition's log end at the time the deletion was
  learned go: a topic re-created under the same name right away may be committed to before
  the operation runs, and that commit belongs to the new topic.
* A shard still loading gets the operation once loaded (Kafka's write fails with
  COORDINATOR_LOAD_IN_PROGRESS and is only logged, leaving those offsets for ever); a write
  that times out on its replicas is tried again. Both within :data:`RETRY_FOR_S`.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence

from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.server.coordinator.coordinators import Coordinators
from kmeta.server.coordinator.runtime import CoordinatorRuntime
from kmeta.server.group.offsets.offset_records import Record
from kmeta.server.group.shard import GroupCoordinatorShard
from kmeta.server.replica.replica_states import LEADER

log = logging.getLogger(__name__)

#: how long a shard's operation is tried again while the shard loads or its write times out
RETRY_FOR_S = 300.0
#: the pause between two tries
RETRY_BACKOFF_S = 0.5
#: errors worth another try (the shard loads; the write's replicas were not there in time)
RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE})

_TIMER_KEYS = itertools.count()


class DeletedOffsetsCleaner:
    """Listens to the deletions of one broker and writes the tombstones on its group shards."""

    def __init__(self, runtime: CoordinatorRuntime[GroupCoordinatorShard]) -> None:
        self.runtime = runtime

    def partitions_deleted(self, partitions: Sequence[TopicPartitionKey]) -> None:
        gone = frozenset((str(t), int(p)) for t, p in partitions)
        runtime = self.runtime
        rm = runtime.replica_manager
        for index in rm.replicas.indexes(runtime.name):
            held = rm.replicas.get((runtime.name, index))
            partition, _ = rm.leader_partition_or_error(runtime.name, index)
            if held is None or held.role != LEADER or partition is None:
                continue
            # (every offset recorded so far; the ones appended from now on are newer than the deletion)
            before = partition.log.log_end_offset
            key = f"partitions-deleted-{next(_TIMER_KEYS)}"
            deadline = time.monotonic() + RETRY_FOR_S
            self._schedule(index, key, 0.0, gone, before, deadline)

    def _schedule(self, index: int, key: str, delay_s: float, gone: frozenset[TopicPartitionKey], before: int,
                  deadline: float) -> None:  # fmt: skip
        async def run() -> None:
            await self._run(index, key, gone, before, deadline)

        # (a shard timer: cancelled with the shard when this broker stops leading the partition)
        self.runtime.schedule(index, key, delay_s, run)

    async def _run(self, index: int, key: str, gone: frozenset[TopicPartitionKey], before: int, deadline: float) -> None:
        def op(shard: GroupCoordinatorShard) -> tuple[list[Record], int]:
            records = shard.on_partitions_deleted(gone, before)
            return records, len(records)

        error, count = await self.runtime.write_op(index, op)
        if error is ErrorCode.NONE:
            if count:
                log.info("%s-%d: removed %d offsets of deleted partitions", self.runtime.name, index, count)
        elif error in RETRIABLE and time.monotonic() < deadline:
            self._schedule(index, key, RETRY_BACKOFF_S, gone, before, deadline)
        else:
            log.warning("%s-%d: the offsets of %d deleted partitions were not removed: %s",
                        self.runtime.name, index, len(gone), error.name)  # fmt: skip


def install(coordinators: Coordinators) -> DeletedOffsetsCleaner:
    runtime: CoordinatorRuntime[GroupCoordinatorShard] = coordinators.groups
    cleaner = DeletedOffsetsCleaner(runtime)
    coordinators.on_partitions_deleted(cleaner.partitions_deleted)
    return cleaner
