"""Per-broker propagation lag and time-to-every-broker, beyond Kafka's controller metrics.

Kafka's queue-size metrics say that requests wait, not which broker lacks which change. The
channel manager tells this tracker about every UpdateMetadata it enqueues, and every answer
(a broker answers in order), so for each broker:

* ``lag_versions``: UpdateMetadata requests enqueued for it and not yet acknowledged;
* ``lag_ms``: how long the oldest of them has waited (0 once it caught up), i.e. how stale
  this broker's metadata may be; it grows while a broker is down but not yet fenced;
* ``applied_update``: the controller update id of the last UpdateMetadata it acknowledged.

And per controller update id: the time from its enqueue until every broker it was sent to
acknowledged it, or left the cluster (``propagation`` histogram). At most ``max_open``
updates are tracked at once (oldest dropped), so a dead broker cannot make this grow forever.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

from kmeta.net.metrics import PlainHistogram
from kmeta.protocol.api_keys import ApiKey

#: seconds, for the time until every live broker held a change
PROPAGATION_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass(slots=True)
class BrokerLag:
    #: (update id, enqueue time) of UpdateMetadata requests not yet acknowledged, oldest first
    unacked: collections.deque[tuple[int, float]] = field(default_factory=collections.deque)
    applied_update: int = 0
    last_ack_time: float = 0.0  # monotonic; 0: never

    @property
    def lag_versions(self) -> int:
        return len(self.unacked)

    def lag_ms(self, now: float) -> float:
        return (now - self.unacked[0][1]) * 1000.0 if self.unacked else 0.0


class PropagationTracker:
    def __init__(self, max_open: int = 10_000) -> None:
        self.brokers: dict[int, BrokerLag] = {}
        self.latest_update = 0
        self.propagation = PlainHistogram(PROPAGATION_BUCKETS_S)
        self.max_open = max_open
        #: update id -> (enqueue time, brokers that have not acknowledged it yet)
        self._open: dict[int, tuple[float, set[int]]] = {}

    def enqueued(self, broker_id: int, api_key: int, update_id: int, at: float) -> None:
        if api_key != ApiKey.UPDATE_METADATA:
            return
        self.brokers.setdefault(broker_id, BrokerLag()).unacked.append((update_id, at))
        self.latest_update = max(self.latest_update, update_id)
        entry = self._open.get(update_id)
        if entry is None:
            if len(self._open) >= self.max_open:
                del self._open[next(iter(self._open))]
            self._open[update_id] = (at, {broker_id})
        else:
            entry[1].add(broker_id)

    def acked(self, broker_id: int, api_key: int, update_id: int) -> None:
        if api_key != ApiKey.UPDATE_METADATA:
            return
        lag = self.brokers.get(broker_id)
        if lag is not None:
            # One sender per broker answers in enqueue order; an update never answered (dropped
            # by fault injection) is superseded by a later one that is.
            unacked = lag.unacked
            while unacked and unacked[0][0] <= update_id:
                unacked.popleft()
            lag.applied_update = max(lag.applied_update, update_id)
            lag.last_ack_time = time.monotonic()
        self._settle(update_id, broker_id)

    def broker_removed(self, broker_id: int) -> None:
        """A fenced or stopped broker: it no longer holds back any change."""
        self.brokers.pop(broker_id, None)
        for update_id in list(self._open):
            self._settle(update_id, broker_id)

    def _settle(self, update_id: int, broker_id: int) -> None:
        entry = self._open.get(update_id)
        if entry is None:
            return
        start, waiting = entry
        waiting.discard(broker_id)
        if not waiting:
            del self._open[update_id]
            self.propagation.observe(time.monotonic() - start)
