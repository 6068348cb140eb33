"""PropagationTracker: per-broker lag and the time until every broker held a change."""

from __future__ import annotations

import time

from kmeta.controller.propagation import PropagationTracker
from kmeta.protocol.api_keys import ApiKey

UM = ApiKey.UPDATE_METADATA


def test_lag_counts_unacked_updates_and_their_age() -> None:
    t = PropagationTracker()
    start = time.monotonic() - 0.5
    for update in (1, 2):
        for broker in (1, 2):
            t.enqueued(broker, UM, update, start)
    t.enqueued(1, ApiKey.LEADER_AND_ISR, 2, start)  # only UpdateMetadata counts
    t.acked(1, UM, 1)
    t.acked(1, UM, 2)
    assert (t.brokers[1].lag_versions, t.brokers[1].lag_ms(time.monotonic())) == (0, 0.0)
    assert t.brokers[1].applied_update == 2
    assert t.brokers[2].lag_versions == 2
    assert t.brokers[2].lag_ms(time.monotonic()) >= 500
    assert t.propagation.count == 0  # broker 2 holds both updates back
    t.acked(2, UM, 1)
    assert (t.propagation.count, t.brokers[2].lag_versions) == (1, 1)
    t.broker_removed(2)  # fenced: it no longer holds anything back
    assert t.propagation.count == 2
    assert 2 not in t.brokers
    assert t.latest_update == 2


def test_a_dropped_update_is_superseded_by_a_later_ack() -> None:
    t = PropagationTracker()
    now = time.monotonic()
    for update in (1, 2, 3):
        t.enqueued(1, UM, update, now)
    t.acked(1, UM, 3)  # 1 and 2 were never answered (dropped)
    assert t.brokers[1].lag_versions == 0


def test_open_updates_are_bounded() -> None:
    t = PropagationTracker(max_open=3)
    for update in range(1, 11):
        t.enqueued(1, UM, update, time.monotonic())
    assert len(t._open) == 3
