"""What a group shard's parts share: its partition, the runtime it writes and times through,
the group settings, and the group map (classic and, through kip848's hook, consumer groups)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: (key, value) as written to __consumer_offsets; value None is a tombstone
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker's group.* settings (Kafka's names and defaults)."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    #: group.classic.new.member.join.timeout.ms (a new member that never rejoins goes then)
    new_member_join_timeout_ms: int = 300_000


class GroupRuntime(Protocol):
    """The part of the coordinator runtime (kmeta.server.coordinator.runtime) a group shard
    uses: committed writes to its partition and per-shard timers."""

    async def write(self, partition: int, records: Sequence[Record]) -> ErrorCode: ...

    def schedule(self, partition: int, key: str, delay_s: float, fn: Callable[[], Awaitable[None]]) -> None: ...

    def cancel(self, partition: int, key: str) -> None: ...


class Group(Protocol):
    """What ListGroups, DescribeGroups, DeleteGroups and the offsets code read of any group,
    classic or consumer (KIP-848)."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str: ...  # "classic" or "consumer"

    @property
    def state_name(self) -> str: ...

    @property
    def protocol_type(self) -> str | None: ...

    @property
    def generation_id(self) -> int: ...

    def has_member(self, member_id: str) -> bool: ...


@dataclass(slots=True)
class ShardContext:
    partition: int
    runtime: GroupRuntime
    config: GroupConfig
    #: group id -> group, both kinds (one id names one group)
    groups: dict[str, Any]
    #: tasks this shard started (writes a timer or a leave triggered); cancelled on unload
    tasks: set[asyncio.Task[None]]

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    def schedule(self, key: str, delay_s: float, fn: Callable[[], Awaitable[None]]) -> None:
        self.runtime.cancel(self.partition, key)
        self.runtime.schedule(self.partition, key, delay_s, fn)

    def cancel(self, key: str) -> None:
        self.runtime.cancel(self.partition, key)


def now_ms() -> int:
    return int(time.time() * 1000)


def write_error(error: ErrorCode) -> ErrorCode:
    """A failed group metadata write as the member sees it (Kafka's
    ``appendGroupMetadataErrorToResponseError``)."""
    if error in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error == ErrorCode.MESSAGE_TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
