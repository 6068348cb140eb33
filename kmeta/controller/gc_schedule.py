"""FullCollectionSchedule: the controller's full (generation 2) collections paced by their cost.

CPython runs a full collection after ``threshold2`` (10) collections of generation 1, once the
objects promoted since the last one reach 25% of those that survived it. That rule counts
objects, and the controller's biggest are few: a 1000-partition topic's ``TopicInfo.partitions``
is one dict whose 1000 entries (``PartitionRegistration`` tuples, always tracked) every full
collection traverses. So the 25% rule never holds a full collection back, they come at a fixed
rate per partition created, and each costs O(partitions held): creating N partitions costs
O(N²) in collections.

Measured with ``kmeta bench scale --partitions 2000000 --phases create`` (controller and 3
brokers on the 2-core box): the long-lived population stayed ~100k objects, 82 full collections
ran during the create, each longer as the partitions grew (~110 ms CPU at 2M), ~5 s of the
controller's 16-17 s CPU; its CPU per tenth of the partitions rose from 1.5 s to 1.9 s. With
``threshold2`` at 200 the create ran 4 of them, the controller took 12.9 s CPU and each tenth
cost the same (1.1-1.5 s).

This schedule times every full collection (CPU time of the collecting thread) and then sets
``threshold2`` so that full collections cost at most about ``REFERENCE_S`` per ``DEFAULT``
collections of generation 1, as a small heap's full collection does at CPython's default: a
full collection costing 20 times the reference waits 20 times as many generation-1 collections. The cost
per object allocated stays constant, whatever the heap holds. Young collections (generations 0
and 1) are untouched, so short-lived cycles are reclaimed as before; only cyclic garbage that
outlived two young collections waits longer, bounded by ``MAX_THRESHOLD2``. When the heap shrinks
(topics deleted), the next full collection is cheaper and the threshold comes down with it.
"""

from __future__ import annotations

import gc
import math
import time
from typing import Any

#: CPython's default threshold2 (gc.get_threshold()[2]): the floor
DEFAULT = 10
#: the CPU cost of a full collection that runs at CPython's default pace: a small heap's
#: (the controller's own ~100k objects, without partitions, take ~5-10 ms)
REFERENCE_S = 0.010
#: at most this many generation-1 collections between two full ones (cyclic garbage that
#: reached generation 2 is reclaimed at least this often: ~7M container allocations at the
#: default thresholds, a few minutes of the busiest controller)
MAX_THRESHOLD2 = 2000


def threshold_for(cost_s: float) -> int:
    """``threshold2`` after a full collection that took ``cost_s`` of CPU."""
    return max(DEFAULT, min(MAX_THRESHOLD2, math.ceil(DEFAULT * cost_s / REFERENCE_S)))


class FullCollectionSchedule:
    """Installed once per process (gc's thresholds are the process's); :meth:`uninstall` puts
    back the thresholds found at :meth:`install`."""

    def __init__(self) -> None:
        self._started: float | None = None
        self._saved: tuple[int, int, int] | None = None
        #: CPU seconds of the last full collection, and how many ran since install
        self.last_cost_s: float | None = None
        self.full_collections = 0

    def install(self) -> None:
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        if self._saved is None:
            return
        gc.callbacks.remove(self._on_collection)
        gc.set_threshold(*self._saved)
        self._saved = None

    @property
    def threshold2(self) -> int:
        return int(gc.get_threshold()[2])

    def status(self) -> dict[str, int | float | bool | None]:
        """For the controller's /status: installed, collections since, the last one's CPU."""
        return {
            "paced": self._saved is not None,
            "threshold2": self.threshold2,
            "count": self.full_collections,
            "last_cpu_ms": None if self.last_cost_s is None else round(self.last_cost_s * 1000, 1),
        }

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.thread_time()
            return
        if self._started is None:  # installed during a collection
            return
        self.last_cost_s = time.thread_time() - self._started
        self._started = None
        self.full_collections += 1
        threshold0, threshold1, _ = gc.get_threshold()
        gc.set_threshold(threshold0, threshold1, threshold_for(self.last_cost_s))


#: the controller process's schedule (installed by the controller daemon)
SCHEDULE = FullCollectionSchedule()
