"""One partition of an internal topic this broker leads, as the coordinator runtime holds it
(Kafka's ``CoordinatorRuntime.CoordinatorContext``): the shard, its state, the offset up to
which the log was replayed into it, the lock that serialises its writes, and its timers.

Replay follows the log, never the writer: :meth:`ShardContext.replay_committed` reads the
partition's log from where the last replay stopped up to the high watermark and hands every
record (and every COMMIT/ABORT marker) to the shard in offset order. So the shard's state is
always the replay of the committed prefix of its log, whoever appended what (the runtime's
writes, WriteTxnMarkers' control batches), and a load is the same loop started at the log
start.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from kmeta.log.errors import LogError
from kmeta.server.coordinator.records import (
    ControlMarker,
    CorruptCoordinatorRecord,
    read_entries,
)
from kmeta.server.replica.partition import Partition

log = logging.getLogger("kmeta.server.coordinator")

#: bytes read from the log per step of a load (Kafka's offsets.load.buffer.size default)
LOAD_BUFFER_BYTES = 5 * 1024 * 1024


class CoordinatorShard(Protocol):
    """The state one broker keeps for one partition of an internal topic it leads."""

    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        """A committed record (loaded, or written by this shard): producer_id -1 for
        non-transactional records."""

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A COMMIT/ABORT control batch for ``producer_id`` is committed in this partition."""

    def on_loaded(self) -> None:
        """The whole log is replayed; timers may start."""

    def on_unloaded(self) -> None:
        """Leadership lost: cancel timers, wake waiters."""


S = TypeVar("S", bound=CoordinatorShard)


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class ShardContext(Generic[S]):
    """A led partition's shard and what the runtime keeps beside it."""

    __slots__ = (
        "_tasks",
        "_timers",
        "hw_moved",
        "leader_epoch",
        "load_end",
        "lock",
        "partition",
        "replayed",
        "shard",
        "state",
        "topic",
    )

    def __init__(self, topic: str, partition: int, leader_epoch: int, log_start: int, load_end: int) -> None:
        self.topic = topic
        self.partition = partition
        #: the leader epoch of the partition (the coordinator epoch of Kafka's transactions)
        self.leader_epoch = leader_epoch
        self.shard: S | None = None  # (set right after: the factory may ask for this context)
        self.state = ShardState.LOADING
        #: the next offset to replay
        self.replayed = log_start
        #: the log end when this broker became leader: loaded once the replay passed it
        self.load_end = load_end
        #: writes go one at a time, in submission order (asyncio.Lock is FIFO)
        self.lock = asyncio.Lock()
        #: set when the partition's high watermark moved (the load waits on it)
        self.hw_moved = asyncio.Event()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> bool:
        return self.state is ShardState.ACTIVE

    def replay_committed(self, partition: Partition, max_bytes: int | None = None) -> bool:
        """Replay the log from ``replayed`` up to the high watermark (at most about
        ``max_bytes`` of it when given); True if committed records are left to replay."""
        shard = self.shard
        if shard is None or self.state is ShardState.CLOSED:
            return False
        plog = partition.log
        while True:
            hw = plog.high_watermark
            if self.replayed < plog.log_start_offset:  # (retention took what we had not read)
                log.warning("%s-%d: log start %d passed the replay at %d", self.topic,
                            self.partition, plog.log_start_offset, self.replayed)  # fmt: skip
                self.replayed = plog.log_start_offset
            if self.replayed >= hw:
                return False
            try:
                data = plog.read(self.replayed, max_bytes or LOAD_BUFFER_BYTES, hw).records
                entries, next_offset = read_entries(data, self.replayed, hw)
            except (LogError, CorruptCoordinatorRecord) as exc:
                log.error("%s-%d: cannot replay from offset %d: %s", self.topic, self.partition,
                          self.replayed, exc)  # fmt: skip
                return False
            if next_offset == self.replayed:
                return False  # (nothing whole below the high watermark)
            for entry in entries:
                try:
                    if isinstance(entry, ControlMarker):
                        shard.replay_end_transaction(entry.producer_id, entry.producer_epoch, entry.committed)
                    else:
                        shard.replay(entry.offset, entry.producer_id, entry.producer_epoch, entry.key, entry.value)
                except Exception:  # (a shard's bug: this record is lost to it, said loudly)
                    log.exception("%s-%d: replaying offset %d failed", self.topic, self.partition, entry.offset)
            self.replayed = next_offset
            if max_bytes is not None:
                return self.replayed < plog.high_watermark

    # -- timers ------------------------------------------------------------------------------
    def schedule(self, key: str, delay_s: float, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` in ``delay_s``, replacing a timer of the same key (Kafka's
        ``CoordinatorTimer.schedule``)."""
        self.cancel(key)
        if self.state is ShardState.CLOSED:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(delay_s, 0.0), self._fire, key, fn)

    def cancel(self, key: str) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: str, fn: Callable[[], Awaitable[None]]) -> None:
        self._timers.pop(key, None)
        if self.state is ShardState.CLOSED:
            return
        task = asyncio.get_running_loop().create_task(self._run(key, fn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: str, fn: Callable[[], Awaitable[None]]) -> None:
        try:
            await fn()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s-%d: timer %r failed", self.topic, self.partition, key)

    def timer_keys(self) -> list[str]:
        return list(self._timers)

    def close(self) -> None:
        """Leadership lost: timers cancelled (running ones too), then the shard told."""
        was_open = self.state is not ShardState.CLOSED
        self.state = ShardState.CLOSED
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()
        self.hw_moved.set()  # (a load waiting for the high watermark stops)
        if was_open and self.shard is not None:
            try:
                self.shard.on_unloaded()
            except Exception:
                log.exception("%s-%d: on_unloaded failed", self.topic, self.partition)
