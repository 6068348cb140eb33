"""How a coordinator's records reach its log (Kafka's ``CoordinatorPartitionWriter``).

:class:`CoordinatorPartitionWriter` appends one batch to a partition this broker leads, with
acks=all and the topic's ``min.insync.replicas``, and waits until the high watermark passes
it. It is apart from :class:`~kmeta.server.coordinator.runtime.CoordinatorRuntime`, which
decides when a write may go (one at a time per partition, shard loaded and still led) and
replays it, because this part only talks to the replica manager: it knows nothing of shards.
Its errors are the runtime's answers, mapped as Kafka's
``GroupCoordinatorService.handleOperationException`` and
``TransactionStateManager.appendTransactionToLog`` map an append's errors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from kmeta.log.append_info import LogAppendInfo
from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.errors import ErrorCode
from kmeta.server.coordinator.records import Record, encode_batch
from kmeta.server.replica.delayed_produce import ProducePending
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.replica_manager import ReplicaManager

log = logging.getLogger("kmeta.server.coordinator")

#: the errors of an append, as a coordinator answers them (Kafka's mapping, see the docstring)
WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class CoordinatorPartitionWriter:
    """Appends the batches of one internal topic's coordinators and waits for their commit."""

    def __init__(self, topic: str, replica_manager: ReplicaManager, cache: MetadataCache) -> None:
        self.topic = topic
        self.replica_manager = replica_manager
        self.cache = cache

    async def append(
        self, led: Partition, records: Sequence[Record], producer_id: int, producer_epoch: int,
        transactional: bool, timeout_s: float,
    ) -> ErrorCode:  # fmt: skip
        """Append ``records`` as one batch to ``led`` and wait up to ``timeout_s`` until it is
        committed: NONE, or the coordinator's answer for what went wrong."""
        rm, key = self.replica_manager, led.key
        min_isr = self._min_insync_replicas()
        batch = encode_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
        )
        outcome = rm.append_records(led, batch, -1, min_isr)
        if not isinstance(outcome, LogAppendInfo):
            log.debug("%s-%d: append failed: %s %s", *key, outcome[0], outcome[1])
            return WRITE_ERRORS.get(outcome[0], outcome[0])
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def replicated(errors: dict[tuple[str, int], ErrorCode]) -> None:
            if not done.done():
                done.set_result(errors.get(key, ErrorCode.REQUEST_TIMED_OUT))

        pending = {key: ProducePending(outcome.last_offset + 1, min_isr)}
        rm.await_replication(pending, max(int(timeout_s * 1000), 0), replicated)
        error = await done
        return WRITE_ERRORS.get(error, error)

    def _min_insync_replicas(self) -> int:
        configs = self.cache.snapshot.topic_configs.get(self.topic, {})
        try:
            return int(configs.get("min.insync.replicas", 1))
        except ValueError:
            return 1
