"""DelayedOperationPurgatory: operations that wait for a condition, completed by the event that
satisfies it, with a timer as the fallback (Kafka's ``DelayedOperation`` and
``DelayedOperationPurgatory``) — never a sleep loop.

An operation is watched under keys (a partition: ``(topic, index)``). Whoever changes what a
key's operations wait on (an append moving the high watermark, a leader change, a replica
stopped) calls :meth:`DelayedOperationPurgatory.check_and_complete` with that key: each
operation watching it runs ``try_complete``, which calls ``force_complete`` when its condition
holds. The timer calls ``force_complete`` at the deadline. ``force_complete`` runs
``on_complete`` exactly once, whichever comes first, and the operation leaves every key it was
watched under (so a completed operation is not kept alive by a quiet key).

Everything runs on the event loop thread, so there are no locks (Kafka's need them: its
request handler threads complete operations concurrently).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable


class DelayedOperation(ABC):
    """One waiting operation; subclasses say when it can complete and what completing does."""

    __slots__ = ("_completed", "_keys", "_purgatory", "_timer", "delay_s")

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._completed = False
        self._timer: asyncio.TimerHandle | None = None
        self._purgatory: DelayedOperationPurgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        return self._completed

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; call :meth:`force_complete` (and return its result) when it
        holds, else return False."""

    @abstractmethod
    def on_complete(self) -> None:
        """What completing does (answer the request); called exactly once."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True when this call completed it."""
        if self._completed:
            return False
        self._completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True


class DelayedOperationPurgatory:
    """Operations watched by key; ``name`` says which (fetch, produce) in status and logs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._closed = False

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; else watch it under ``keys`` and start its timer.
        True when it completed at once. A closed purgatory completes every operation at once
        (the broker is shutting down: nothing waits)."""
        if self._closed or op.try_complete():
            op.force_complete()
            return True
        op._keys = tuple(keys)
        op._purgatory = self
        for key in op._keys:
            self._watchers.setdefault(key, {})[op] = None
        op._timer = asyncio.get_running_loop().call_later(op.delay_s, op.force_complete)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try every operation watching ``key``; the number completed."""
        watching = self._watchers.get(key)
        if not watching:
            return 0
        completed = 0
        for op in list(watching):
            if not op.is_completed and op.try_complete():
                completed += 1
        return completed

    def watched(self) -> int:
        """Operations waiting (each counted once)."""
        return len({op for ops in self._watchers.values() for op in ops})

    def close(self) -> None:
        """Complete everything waiting, and from now on everything at once."""
        self._closed = True
        for op in {op for ops in self._watchers.values() for op in ops}:
            op.force_complete()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op._keys:
            watching = self._watchers.get(key)
            if watching is not None:
                watching.pop(op, None)
                if not watching:
                    del self._watchers[key]
        op._keys = ()
