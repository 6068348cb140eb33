"""A coordinator runtime for one shard in memory, for the group operations' unit tests: writes
commit at once (or fail with a set error) and replay into the shard; timers are the loop's.
The real runtime (kmeta.server.coordinator) runs under the e2e tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from kmeta.protocol.errors import ErrorCode
from kmeta.server.group.context import GroupConfig, Record
from kmeta.server.group.shard import GroupCoordinatorShard


class MemoryRuntime:
    def __init__(self, config: GroupConfig) -> None:
        self.records: list[Record] = []
        self.fail_with = ErrorCode.NONE
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.fired: set[asyncio.Task[None]] = set()
        self.shard = GroupCoordinatorShard(0, self, config)
        self.shard.on_loaded()  # (an empty log: loaded at once, as the runtime would)

    async def write(self, partition: int, records: Sequence[Record]) -> ErrorCode:
        await asyncio.sleep(0)  # (a write is never synchronous)
        if self.fail_with != ErrorCode.NONE:
            return self.fail_with
        for key, value in records:
            self.shard.replay(len(self.records), -1, -1, key, value)
            self.records.append((key, value))
        return ErrorCode.NONE

    def schedule(self, partition: int, key: str, delay_s: float, fn: Callable[[], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            del self.timers[key]
            task: asyncio.Task[None] = loop.create_task(fn())  # type: ignore[arg-type]
            self.fired.add(task)
            task.add_done_callback(self.fired.discard)

        self.cancel(partition, key)
        self.timers[key] = loop.call_later(delay_s, fire)

    def cancel(self, partition: int, key: str) -> None:
        handle = self.timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def reload(self) -> GroupCoordinatorShard:
        """A new shard loads this log (a coordinator failover)."""
        self.shard.on_unloaded()
        self.shard = GroupCoordinatorShard(0, self, self.shard.ctx.config)
        for offset, (key, value) in enumerate(self.records):
            self.shard.replay(offset, -1, -1, key, value)
        self.shard.on_loaded()
        return self.shard
