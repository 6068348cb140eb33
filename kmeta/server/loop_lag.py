"""LoopLagProbe: how long the broker's event loop was held, measured from inside it.

A task sleeps ``interval_s`` and measures how late it woke up: that lateness is the time some
callback (a handler applying a big UpdateMetadata, an encode of a large answer) held the loop,
during which no request on any connection was read or answered. The probe keeps

* ``lag``: a histogram of every lateness (``kmeta_broker_loop_lag_seconds``);
* ``max_s``: the largest since start;
* ``max_cpu_s``: the most CPU time this thread spent between two wakeups beyond the interval,
  the same stall counted in CPU rather than wall time (on a loaded machine the wall time of a
  held loop stretches with the load; its CPU time does not, so tests bound this one);
* ``stalls``: the last :data:`STALLS_KEPT` lateness values over ``stall_s``, each with the wall
  clock time (``time.time()``) it ended and the CPU time the loop's thread spent meanwhile
  beyond the interval, so a benchmark can tell which of its phases a stall fell in and whether
  it was the loop's own work or the machine's load (``GET /status`` lists them).

Cost: one wakeup per ``interval_s`` (20 ms: 50 timer callbacks a second, a few microseconds
each). The broker runs it when it serves /metrics.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time

from kmeta.net.metrics import PlainHistogram

#: stall records kept for /status (the oldest go first)
STALLS_KEPT = 256
LAG_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLagProbe:
    def __init__(self, interval_s: float = 0.02, stall_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.stall_s = stall_s
        self.lag = PlainHistogram(LAG_BUCKETS_S)
        self.max_s = 0.0
        self.max_cpu_s = 0.0
        #: (wall clock time the stall ended, seconds late, CPU seconds beyond the interval)
        self.stalls: collections.deque[tuple[float, float, float]] = collections.deque(maxlen=STALLS_KEPT)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def observe(self, late_s: float, cpu_s: float = 0.0) -> None:
        self.lag.observe(late_s)
        self.max_s = max(self.max_s, late_s)
        self.max_cpu_s = max(self.max_cpu_s, cpu_s)
        if late_s >= self.stall_s:
            self.stalls.append((time.time(), late_s, cpu_s))

    async def _run(self) -> None:
        interval = self.interval_s
        clock, cpu = time.monotonic, time.thread_time
        while True:
            due, cpu_before = clock() + interval, cpu()
            await asyncio.sleep(interval)
            self.observe(max(0.0, clock() - due), max(0.0, cpu() - cpu_before - interval))

    def status(self) -> dict[str, object]:
        """What /status shows: the worst lateness and the recent stalls (milliseconds)."""
        return {
            "max_ms": round(self.max_s * 1000.0, 1),
            "max_cpu_ms": round(self.max_cpu_s * 1000.0, 1),
            "samples": self.lag.count,
            "stalls": [
                [round(at, 3), round(s * 1000.0, 1), round(c * 1000.0, 1)] for at, s, c in self.stalls
            ],
        }
