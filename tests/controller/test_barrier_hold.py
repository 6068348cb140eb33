"""A barrier done while the controller may not answer (a quorum's controller whose lease ran
out: kmeta.controller.quorum.election) holds its answer until it may again, or its timeout."""

from __future__ import annotations

import asyncio
import time

from kmeta.controller.channel.barrier import Barrier, BarrierRegistry


async def test_a_done_barrier_waits_for_the_lease_then_answers() -> None:
    registry = BarrierRegistry()
    lease = {"held": False}
    registry.may_answer = lambda: lease["held"]
    barrier = Barrier(registry).arm(())  # (no broker to wait for: done at once)
    assert barrier.done.done()
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, lease.update, {"held": True})
    started = time.monotonic()
    assert await barrier.wait(5.0)
    assert time.monotonic() - started >= 0.3


async def test_a_done_barrier_without_the_lease_times_out() -> None:
    registry = BarrierRegistry()
    registry.may_answer = lambda: False
    barrier = Barrier(registry).arm(())
    started = time.monotonic()
    assert not await barrier.wait(0.3)
    assert 0.3 <= time.monotonic() - started < 2.0


async def test_a_plain_registry_answers_once_done() -> None:
    barrier = Barrier(set()).arm(())
    assert await barrier.wait(0.1)
