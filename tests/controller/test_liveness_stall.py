"""A controller that holds its own event loop (one long event: a 300k-partition resync) does
not fence the brokers it could not hear meanwhile; a silent broker is still fenced; a broker
that reconnects claims its session on the new connection at once (no event to wait behind)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kmeta.controller.controller import KafkaController
from kmeta.server.lifecycle.controller_link import ControllerLink
from tests.controller.helpers import RecordingBroker, link_of, start_cluster, wait_until

SESSION_MS = 500


def _hold_loop(seconds: float) -> None:
    time.sleep(seconds)  # (a long synchronous event: no heartbeat is read meanwhile)


async def _two_long_events(ctl: KafkaController, seconds: float) -> None:
    """A long event that queues another (a registration and its follow-up): the expiries the
    liveness loop queues after the first wait behind the second."""
    second: list[asyncio.Future[None]] = []

    def first() -> None:
        second.append(ctl.enqueue("Stall", lambda: _hold_loop(seconds)))
        _hold_loop(seconds)

    await ctl.enqueue("Stall", first)
    await second[0]


async def test_a_stalled_controller_fences_no_live_broker(tmp_path: Path) -> None:
    cluster = await start_cluster(tmp_path, brokers=3, session_timeout_ms=SESSION_MS)
    ctl = cluster.controller.controller
    silent: RecordingBroker | None = None
    try:
        epochs = {b: ctl.state.brokers[b].epoch for b in (1, 2, 3)}
        for _ in range(3):  # three stalls of 3 sessions each, with heartbeats in between
            await _two_long_events(ctl, 3 * SESSION_MS / 1000)
            await asyncio.sleep(0.3)
        await asyncio.sleep(2 * SESSION_MS / 1000)
        assert {b: ctl.state.brokers[b].epoch for b in (1, 2, 3)} == epochs
        assert all(ctl.state.is_alive(b) for b in (1, 2, 3))

        # a broker that never heartbeats is still fenced, stalls or not
        silent = RecordingBroker(4)
        await silent.start()
        await silent.register(cluster.controller.port)
        await ctl.enqueue("Stall", lambda: _hold_loop(2 * SESSION_MS / 1000))
        await wait_until(lambda: not ctl.state.is_alive(4), 5.0)
        assert all(ctl.state.is_alive(b) for b in (1, 2, 3))
        assert {b: ctl.state.brokers[b].epoch for b in (1, 2, 3)} == epochs
    finally:
        if silent is not None:
            await silent.stop()
        await cluster.stop()


async def test_a_reconnected_broker_rebinds_its_session_without_an_event(tmp_path: Path) -> None:
    cluster = await start_cluster(tmp_path, brokers=1, session_timeout_ms=SESSION_MS)
    ctl = cluster.controller.controller
    events: list[str] = []
    ctl.events.on_processed = lambda event, queue_s, process_s: events.append(event.name)
    try:
        epoch = ctl.state.brokers[1].epoch
        link = link_of(cluster.brokers[1])
        assert isinstance(link, ControllerLink)
        old = link._conn
        assert old is not None
        old.close()  # (as a heartbeat that timed out on the broker's side)
        await wait_until(lambda: link._conn is not None and link._conn is not old, 5.0)
        await asyncio.sleep(4 * SESSION_MS / 1000)  # heartbeats on the new connection
        assert ctl.state.is_alive(1)
        assert ctl.state.brokers[1].epoch == epoch
        assert link.broker_epoch == epoch
        assert "BrokerRegistration" not in events
        assert ctl.brokers.sessions.heartbeat(1, epoch, object()) is False  # still one owner
    finally:
        await cluster.stop()
