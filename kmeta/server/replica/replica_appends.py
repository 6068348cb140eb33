"""The replica manager's appends (Kafka's ``ReplicaManager.appendRecords`` as the leader does
it), a part of :class:`~kmeta.server.replica.replica_manager.ReplicaManager` of their own.

A batch goes onto the leader's log only while this broker leads the partition (else
NOT_LEADER_OR_FOLLOWER) and, for acks=-1, while the ISR is at least min.insync.replicas (else
NOT_ENOUGH_REPLICAS); the log's own refusals (:class:`~kmeta.log.errors.LogError`) become
their error codes. After an append the high watermark may move (a single-replica ISR), which
wakes what waits on it; else followers long-polling at the old log end are woken to read it.

A Produce's appends are made inside :func:`actions` (Kafka's ``ActionQueue``:
``ReplicaManager.appendRecords`` queues the purgatory checks and ``KafkaApis`` runs them after
the request): the followers waiting at the old log ends are woken once every partition of the
request is appended. A follower's fetch names every partition it follows from this leader, so
woken after the first append it would carry that batch alone, and the request's other
partitions would wait for its next fetch: one more follower round trip before their high
watermark, and the acks=-1 answer, move.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, TypeAlias

from kmeta.log.append_info import LogAppendInfo
from kmeta.log.errors import LogError
from kmeta.log.log_manager import LogManager
from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.purgatory import DelayedOperationPurgatory
from kmeta.server.replica.replica_states import LEADER, ReplicaState

#: the internal topics, written by their coordinators only (clients may not produce to them)
COORDINATOR_TOPICS = frozenset(("__consumer_offsets", "__transaction_state"))

#: an append's outcome: the log's answer, or the error (and its message)
AppendResult: TypeAlias = LogAppendInfo | tuple[ErrorCode, str | None]


class Appender(Protocol):
    """The replica manager as its appends use it: the totals they count, the purgatory they
    wake, the memory cap they keep."""

    bytes_in: int
    messages_in: int
    fetch_wakes: dict[TopicPartitionKey, None] | None

    @property
    def cache(self) -> MetadataCache: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def memory_max_bytes(self) -> int: ...
    @property
    def delayed_fetch(self) -> DelayedOperationPurgatory: ...
    def high_watermark_moved(self, partition: Partition) -> None: ...
    def enforce_retention(self) -> int: ...


def append_records(
    rm: Appender, partition: Partition, records: bytes | memoryview, acks: int,
    min_insync_replicas: int, coordinator: bool | None = None, crc_checked: bool = False,
) -> AppendResult:  # fmt: skip
    """``Partition.appendRecordsToLeader``: one checked batch onto the leader's log.
    ``coordinator`` (Kafka's AppendOrigin.COORDINATOR: no sequence checks, no duplicates)
    defaults to whether the topic is an internal one, which only coordinators write.
    ``crc_checked``: the Produce handler checked these bytes' CRC already (the log does not
    recompute it: :func:`~kmeta.protocol.records.record_batch.check_produce_records`)."""
    state = partition.state
    if state is None or state.role != LEADER:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    if acks == -1 and len(state.isr) < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS, None
    partition.refresh_config(rm.cache.snapshot.topic_configs.get(partition.topic))
    try:
        if coordinator is None:
            coordinator = partition.topic in COORDINATOR_TOPICS
        info = partition.log.append_as_leader(
            records, state.leader_epoch, int(time.time() * 1000), coordinator=coordinator,
            crc_checked=crc_checked,
        )  # fmt: skip
    except LogError as exc:
        return exc.error, str(exc) or None
    return _appended(rm, partition, state, info)


def append_txn_marker(
    rm: Appender, partition: Partition, producer_id: int, producer_epoch: int,
    coordinator_epoch: int, commit: bool, min_insync_replicas: int,
) -> AppendResult:  # fmt: skip
    """WriteTxnMarkers' append (Kafka's appendRecords with origin COORDINATOR, acks=-1):
    one control batch onto the leader's log (:meth:`Partition.write_txn_marker`)."""
    state = partition.state
    if state is None or state.role != LEADER:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    if len(state.isr) < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS, None
    info = partition.write_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit)
    if not isinstance(info, LogAppendInfo):
        return info
    return _appended(rm, partition, state, info)


def _appended(rm: Appender, partition: Partition, state: ReplicaState, info: LogAppendInfo) -> AppendResult:
    rm.bytes_in += info.size_in_bytes
    rm.messages_in += info.record_count
    if partition.maybe_increment_leader_hw(state):
        rm.high_watermark_moved(partition)
    else:  # (followers long-polling at the old log end read the batch)
        wake_fetches(rm, partition.key)
    if rm.log_manager.memory_bytes > rm.memory_max_bytes:
        rm.enforce_retention()
    return info


def wake_fetches(rm: Appender, key: TopicPartitionKey) -> None:
    """The fetches waiting on ``key`` are checked now, or inside :func:`actions` at its end."""
    if rm.fetch_wakes is None:
        rm.delayed_fetch.check_and_complete(key)
    else:
        rm.fetch_wakes[key] = None


@contextmanager
def actions(rm: Appender) -> Iterator[None]:
    """The appends made inside wake the fetches waiting on their partitions once, at the end
    (nested: at the end of the outermost)."""
    if rm.fetch_wakes is not None:
        yield
        return
    rm.fetch_wakes = {}
    try:
        yield
    finally:
        keys, rm.fetch_wakes = rm.fetch_wakes, None
        for key in keys:
            rm.delayed_fetch.check_and_complete(key)
