"""CoordinatorRuntime: the state machines of one internal topic, one shard per partition this
broker leads, kept as Kafka's ``org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime``
keeps them, smaller.

* Leadership (:meth:`partitions_changed`, called after every LeaderAndIsr and StopReplica of
  the topic): a partition this broker now leads gets a shard from the registered factory and
  is loaded; one it no longer leads is unloaded (``on_unloaded``, its timers cancelled). A new
  leader epoch of a partition still led here keeps the shard (Kafka's ``scheduleLoadOperation``
  on an active context only bumps the epoch).
* Loading reads the log from its start and replays each committed record and marker into the
  shard (:class:`~kmeta.server.coordinator.shard_context.ShardContext`), then ``on_loaded``;
  meanwhile :meth:`shard_or_error` is COORDINATOR_LOAD_IN_PROGRESS. Kafka loads up to the log
  end the new leader has: what is in the leader's log stays there and becomes committed under
  its epoch (a follower truncates to the leader, never the other way). Kafka then holds back
  every answer that depends on records above the high watermark; this runtime applies only
  committed records, so the load is done when the replay passed the log end as it stood at the
  election, which it does once the followers in the ISR have fetched that far (or left the
  ISR). Nothing the previous leader had not made durable on this replica is lost, and nothing
  uncommitted is ever seen.
* :meth:`write` appends one batch as the leader with acks=all and waits for the high watermark
  to pass it (the :class:`~kmeta.server.coordinator.partition_writer.CoordinatorPartitionWriter`'s
  part, which maps the errors as Kafka does), replays the committed tail (its own records among
  them) and answers NONE. Writes to one partition run one at a time, in the order they were
  submitted. :meth:`write_op` (Kafka's ``scheduleWriteOperation``) runs a function of the shard
  in that order, once every earlier write is replayed, and writes the records it returns: a
  check-then-write without a race.
* After a write, and whenever the partition's high watermark moves, the committed tail is
  replayed: COMMIT/ABORT markers that WriteTxnMarkers appended reach
  ``replay_end_transaction`` in log order without a hook of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from kmeta.metadata.cache import MetadataCache
from kmeta.metadata.model import Node
from kmeta.protocol.errors import ErrorCode
from kmeta.server.coordinator.internal_topics import InternalTopic, TopicCreator
from kmeta.server.coordinator.partition_writer import CoordinatorPartitionWriter
from kmeta.server.coordinator.records import Record
from kmeta.server.coordinator.shard_context import (
    LOAD_BUFFER_BYTES,
    CoordinatorShard,
    S,
    ShardContext,
    ShardState,
)
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.replica_manager import ReplicaManager
from kmeta.server.replica.replica_states import LEADER

__all__ = ["CoordinatorRuntime", "CoordinatorShard", "Record", "ShardContext", "ShardFactory"]

log = logging.getLogger("kmeta.server.coordinator")

T = TypeVar("T")

#: makes the shard of a partition just led (its context: topic, partition, leader epoch)
ShardFactory = Callable[["ShardContext[S]"], S]

#: a write's wait for replication when the caller gives none (offsets.commit.timeout.ms)
DEFAULT_WRITE_TIMEOUT_S = 5.0


def java_string_hash(key: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... over UTF-16 code units, as int32."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions`` (``Utils.abs`` maps MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class CoordinatorRuntime(Generic[S]):
    """The shards of one internal topic on this broker (see the module docstring)."""

    def __init__(
        self, topic: InternalTopic, replica_manager: ReplicaManager, cache: MetadataCache,
        creator: TopicCreator,
    ) -> None:  # fmt: skip
        self.topic = topic
        self.name = topic.name
        self.replica_manager = replica_manager
        self.cache = cache
        #: appends the shards' batches and waits for their commit
        self.writer = CoordinatorPartitionWriter(topic.name, replica_manager, cache)
        self._creator = creator
        self._factory: ShardFactory[S] | None = None
        self._contexts: dict[int, ShardContext[S]] = {}
        self._loads: set[asyncio.Task[None]] = set()

    # -- the seam --------------------------------------------------------------------------
    def register_shards(self, factory: ShardFactory[S]) -> None:
        """The factory making each led partition's shard; partitions led already load now."""
        self._factory = factory
        self.partitions_changed()

    # -- coordinators' keys ----------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """The topic's partition count once it exists, else the configured one (Kafka's
        coordinator startup reads ``metadataCache.numPartitions`` or the config)."""
        parts = self.cache.snapshot.partition_states.get(self.name)
        return len(parts) if parts else self.topic.num_partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    async def find_coordinator(self, key: str, listener: str) -> tuple[ErrorCode, Node | None]:
        """The leader of ``key``'s partition on ``listener``; COORDINATOR_NOT_AVAILABLE while
        the topic is being created (its creation started by the first ask) or the partition
        has no live leader with that listener."""
        snap = self.cache.snapshot
        parts = snap.partition_states.get(self.name)
        if not parts:
            self._creator.ensure(self.topic)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        state = parts.get(partition_for(key, len(parts)))
        if state is None or state.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        node = snap.alive_nodes.get(state.leader, {}).get(listener)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, node

    # -- shards ----------------------------------------------------------------------------
    def shard_or_error(self, partition: int) -> tuple[S | None, ErrorCode]:
        """The loaded shard; NOT_COORDINATOR when this broker does not lead the partition,
        COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        ctx = self._contexts.get(partition)
        if ctx is None:
            return None, ErrorCode.NOT_COORDINATOR
        if ctx.state is ShardState.LOADING:
            return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ctx.shard, ErrorCode.NONE

    def leader_epoch(self, partition: int) -> int | None:
        """The partition's leader epoch while a shard is held here (Kafka's coordinator epoch)."""
        ctx = self._contexts.get(partition)
        return None if ctx is None else ctx.leader_epoch

    def led_partitions(self) -> list[int]:
        """The partitions with an active shard here."""
        return sorted(i for i, ctx in self._contexts.items() if ctx.active)

    def partitions_changed(self) -> None:
        """Follow this broker's roles for the topic (after a LeaderAndIsr or StopReplica)."""
        replicas = self.replica_manager.replicas
        for index in sorted(set(replicas.indexes(self.name)) | set(self._contexts)):
            state = replicas.get((self.name, index))
            ctx = self._contexts.get(index)
            if state is None or state.role != LEADER:
                if ctx is not None:
                    self._unload(index, "no longer the leader")
            elif ctx is not None:
                ctx.leader_epoch = max(ctx.leader_epoch, state.leader_epoch)
                self.high_watermark_moved(index)  # (a smaller ISR may have moved it)
            elif self._factory is not None:
                self._load(index, state.leader_epoch)

    def _load(self, index: int, leader_epoch: int) -> None:
        partition, error = self.replica_manager.leader_partition_or_error(self.name, index)
        if partition is None or self._factory is None:
            log.warning("%s-%d: cannot load: %s", self.name, index, error.name)
            return
        plog = partition.log
        ctx: ShardContext[S] = ShardContext(self.name, index, leader_epoch, plog.log_start_offset, plog.log_end_offset)
        try:
            ctx.shard = self._factory(ctx)
        except Exception:  # (a shard's bug: this partition has no coordinator here, said loudly)
            log.exception("%s-%d: the shard factory failed", self.name, index)
            return
        self._contexts[index] = ctx
        log.info("%s-%d: loading at epoch %d, offsets %d to %d", self.name, index, leader_epoch,
                 ctx.replayed, ctx.load_end)  # fmt: skip
        task = asyncio.get_running_loop().create_task(self._run_load(ctx))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _run_load(self, ctx: ShardContext[S]) -> None:
        while ctx.state is ShardState.LOADING:
            partition = self._led(ctx)
            if partition is None:
                return
            ctx.hw_moved.clear()
            more = ctx.replay_committed(partition, LOAD_BUFFER_BYTES)
            if ctx.replayed >= ctx.load_end:
                break
            if not more:
                await ctx.hw_moved.wait()
            else:
                await asyncio.sleep(0)  # (a long log: let the broker serve between steps)
        if ctx.state is not ShardState.LOADING or ctx.shard is None:
            return
        ctx.state = ShardState.ACTIVE
        log.info("%s-%d: loaded up to offset %d", self.name, ctx.partition, ctx.replayed)
        try:
            ctx.shard.on_loaded()
        except Exception:
            log.exception("%s-%d: on_loaded failed", self.name, ctx.partition)

    def _unload(self, index: int, why: str) -> None:
        ctx = self._contexts.pop(index, None)
        if ctx is not None:
            log.info("%s-%d: unloading (%s)", self.name, index, why)
            ctx.close()

    def _led(self, ctx: ShardContext[S]) -> Partition | None:
        """The partition while ``ctx`` is still its current context and this broker leads it."""
        if self._contexts.get(ctx.partition) is not ctx:
            return None
        partition, _ = self.replica_manager.leader_partition_or_error(self.name, ctx.partition)
        return partition

    def high_watermark_moved(self, index: int) -> None:
        """The partition's high watermark moved: the load goes on, or the committed tail (a
        marker WriteTxnMarkers appended, say) is replayed."""
        ctx = self._contexts.get(index)
        if ctx is None:
            return
        ctx.hw_moved.set()
        if ctx.active:
            asyncio.get_running_loop().call_soon(self._replay_active, ctx)

    def _replay_active(self, ctx: ShardContext[S]) -> bool:
        """Replay the committed tail while ``ctx`` is active and led here (False: it is not)."""
        partition = self._led(ctx) if ctx.active else None
        if partition is not None:
            ctx.replay_committed(partition)
        return partition is not None

    # -- writes ----------------------------------------------------------------------------
    async def write(
        self, partition: int, records: Sequence[Record], *, producer_id: int = -1,
        producer_epoch: int = -1, transactional: bool = False,
        timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
    ) -> ErrorCode:  # fmt: skip
        """Append ``records`` as one batch, wait until committed, replay, answer NONE (see
        the module docstring for the errors). No records: NONE, once loaded."""
        error, _ = await self.write_op(
            partition, lambda _shard: (records, None), producer_id=producer_id,
            producer_epoch=producer_epoch, transactional=transactional, timeout_s=timeout_s,
        )  # fmt: skip
        return error

    async def write_op(
        self, partition: int, op: Callable[[S], tuple[Sequence[Record], T]], *,
        producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False,
        timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
    ) -> tuple[ErrorCode, T | None]:  # fmt: skip
        """Kafka's ``scheduleWriteOperation``: ``op`` runs with the shard once every write
        submitted to the partition before it is committed and replayed (so it validates
        against their effects), and returns the records to write and its result; they are
        written as :meth:`write` writes. (The write's error, ``op``'s result); the result is
        None when ``op`` did not run (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        ctx = self._contexts.get(partition)
        if ctx is None:
            return ErrorCode.NOT_COORDINATOR, None
        if ctx.state is ShardState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        # (the timeout counts from submission, as Kafka's write timeout: a write queued behind
        # one that waits for a stalled follower does not wait its own timeout on top)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            await asyncio.wait_for(ctx.lock.acquire(), timeout_s)
        except TimeoutError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None  # (REQUEST_TIMED_OUT, mapped)
        try:
            led = self._led(ctx) if ctx.active else None
            if led is None or ctx.shard is None:
                return ErrorCode.NOT_COORDINATOR, None
            records, result = op(ctx.shard)  # (no await from the check to the append)
            if not records:
                return ErrorCode.NONE, result
            error = await self.writer.append(
                led, records, producer_id, producer_epoch, transactional, deadline - loop.time()
            )
            if error == ErrorCode.NONE and not self._replay_active(ctx):
                error = ErrorCode.NOT_COORDINATOR  # (leadership went while it replicated)
            return error, result
        finally:
            ctx.lock.release()

    # -- timers ----------------------------------------------------------------------------
    def schedule(self, partition: int, key: str, delay_s: float, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` in ``delay_s`` on the partition's shard (replacing a timer of the same
        key); nothing when the partition is not held here. Cancelled when the shard unloads."""
        ctx = self._contexts.get(partition)
        if ctx is not None:
            ctx.schedule(key, delay_s, fn)

    def cancel(self, partition: int, key: str) -> None:
        ctx = self._contexts.get(partition)
        if ctx is not None:
            ctx.cancel(key)

    def close(self) -> None:
        """Broker shutdown: every shard unloaded."""
        for index in list(self._contexts):
            self._unload(index, "shutdown")
        for task in list(self._loads):
            task.cancel()
