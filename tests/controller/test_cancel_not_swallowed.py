"""A waiter cancelled in the same loop step as its answer arrives stays cancelled.

Python 3.11's ``asyncio.wait_for`` returns the result instead when both happen at once
(CPython gh-86296), so a loop that awaits requests (a broker's heartbeats, a sender) could
outlive its ``cancel()`` and hang a shutdown. Seen as a 120 s hang of
test_storage_failure's heartbeat loop under load; ``asyncio.timeout`` has no such window.
"""

from __future__ import annotations

import asyncio

import pytest

from kmeta.controller.channel.barrier import Barrier


async def test_a_barrier_wait_cancelled_as_it_resolves_is_cancelled() -> None:
    barrier = Barrier(set())
    waiter = asyncio.ensure_future(barrier.wait(5.0))
    await asyncio.sleep(0)  # the waiter is now parked on the barrier
    barrier.arm([])  # resolves ...
    waiter.cancel()  # ... and the owner cancels, in the same step
    with pytest.raises(asyncio.CancelledError):
        await waiter
