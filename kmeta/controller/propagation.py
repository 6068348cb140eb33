"""Per-broker propagation lag and time-to-every-broker, beyond Kafka's controller metrics.

Kafka's queue-size metrics say that requests wait, not which broker lacks which change. The
channel manager tells this tracker about every UpdateMetadata it enqueues, and every answer
(a broker answers in order), so for each broker:

* ``lag_versions``: UpdateMetadata requests enqueued for it and not yet acknowledged;
* ``lag_ms``: how long the oldest of them has waited (0 once it caught up), i.e. how stale
  this broker's metadata may be; it grows while a broker is down but not yet fenced;
* ``applied_update``: the controller update id of the last UpdateMetadata it acknowledged;
* ``rejecting``: api name -> error name of the requests it answered with an error. A
  rejection is not an acknowledgement: a rejected UpdateMetadata stays in the lag (the broker
  lacks that change even if it accepts later incremental ones) until the broker accepts a
  FULL UpdateMetadata (or leaves); a rejected LeaderAndIsr or StopReplica until the broker
  accepts one of the same api again.

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
    #: (update id, enqueue time) of UpdateMetadata requests not yet answered, oldest first
    unacked: collections.deque[tuple[int, float]] = field(default_factory=collections.deque)
    #: update id -> enqueue time of UpdateMetadata requests the broker rejected
    rejected: dict[int, float] = field(default_factory=dict)
    #: api name -> error name, while the broker is rejecting that api (see the module doc)
    rejecting: dict[str, str] = field(default_factory=dict)
    applied_update: int = 0
    last_ack_time: float = 0.0  # monotonic; 0: never

    @property
    def lag_versions(self) -> int:
        return len(self.unacked) + len(self.rejected)

    def lag_ms(self, now: float) -> float:
        oldest = [self.unacked[0][1]] if self.unacked else []
        if self.rejected:
            oldest.append(min(self.rejected.values()))
        return (now - min(oldest)) * 1000.0 if oldest else 0.0


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

    def acked(self, broker_id: int, api_key: int, update_id: int, full: bool = False) -> None:
        """A success answer; ``full``: a FULL UpdateMetadata (replaces all the broker held)."""
        lag = self.brokers.get(broker_id)
        if api_key != ApiKey.UPDATE_METADATA:
            if lag is not None:
                lag.rejecting.pop(ApiKey(api_key).name, None)
            return
        if lag is not None:
            self._pop_answered(lag, update_id)
            if full:
                lag.rejected.clear()
            if not lag.rejected:
                lag.rejecting.pop(ApiKey.UPDATE_METADATA.name, None)
            lag.applied_update = max(lag.applied_update, update_id)
            lag.last_ack_time = time.monotonic()
        self._settle(update_id, broker_id)

    def rejected(self, broker_id: int, api_key: int, update_id: int, error: str) -> bool:
        """An error answer; True when the broker was not rejecting this api with ``error``."""
        lag = self.brokers.setdefault(broker_id, BrokerLag())
        name = ApiKey(api_key).name
        started = lag.rejecting.get(name) != error
        lag.rejecting[name] = error
        if api_key == ApiKey.UPDATE_METADATA:
            at = next((t for u, t in lag.unacked if u == update_id), time.monotonic())
            self._pop_answered(lag, update_id)
            lag.rejected[update_id] = at
            if len(lag.rejected) > self.max_open:  # bounded; the oldest stays (for lag_ms)
                keys = iter(lag.rejected)  # (insertion order: update ids ascend)
                next(keys)
                del lag.rejected[next(keys)]
        return started

    @staticmethod
    def _pop_answered(lag: BrokerLag, update_id: int) -> None:
        # One sender per broker answers in enqueue order; an update never answered (dropped
        # by fault injection) is superseded by a later one that is.
        unacked = lag.unacked
        while unacked and unacked[0][0] <= update_id:
            unacked.popleft()

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
