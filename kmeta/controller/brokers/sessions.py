"""BrokerHeartbeatManager: broker sessions, as KRaft's (heartbeats, expiry, the owner check).

A registered broker has a session: a deadline (``session_timeout_s`` after its registration
or last accepted heartbeat) and the connection that registered it. The liveness loop queues a
``BrokerExpiration`` event for a broker past its deadline; that event fences it (``fence``,
the broker lifecycle's failure path) unless a heartbeat arrived while it waited.

Liveness counts only time the controller could hear the broker (KRaft measures it on the
heartbeats it processes): while one long event holds the event loop, no heartbeat is read, so
a deadline passing then is no fault of the broker. The liveness loop measures its own lateness
(when it woke against when it meant to) and moves every deadline on by it; an expiry that
finds the loop held since the liveness loop last ran fences nobody (the next tick decides).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from kmeta.controller.config import ControllerConfig
from kmeta.controller.model import ControllerContext
from kmeta.controller.store.cluster_store import STORE_RETRY_S

log = logging.getLogger(__name__)


T = TypeVar("T")


class SessionHost(Protocol):
    config: ControllerConfig
    state: ControllerContext

    def enqueue(self, name: str, fn: Callable[[], T]) -> asyncio.Future[T]: ...


class BrokerHeartbeatManager:
    def __init__(self, host: SessionHost, fence: Callable[[int], object]) -> None:
        self.host = host
        self._fence = fence
        self._deadlines: dict[int, float] = {}  # broker id -> session expiry (monotonic)
        #: broker id -> peer address of the connection its session was registered on: only
        #: that connection may heartbeat or shut it down (epochs are no secret: /status shows
        #: them). None until the broker registers after a controller start. Only consulted
        #: for a broker alive with the asked epoch, so a fenced one's entry is harmless (and
        #: survives a rolled-back event, which memory must).
        self._session_peers: dict[int, object] = {}
        self._expiring: set[int] = set()
        #: when the liveness loop last ran (monotonic): the loop was held since, if long ago
        self._last_tick = time.monotonic()
        self._liveness_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._liveness_task = asyncio.get_running_loop().create_task(self._liveness_loop())

    async def stop(self) -> None:
        if self._liveness_task is not None:
            self._liveness_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._liveness_task

    def renew(self, broker_id: int) -> None:
        """A fresh session (controller start, accepted heartbeat)."""
        self._deadlines[broker_id] = time.monotonic() + self.host.config.session_timeout_s

    def registered(self, broker_id: int, peer: object) -> None:
        """A fresh session owned by the connection ``peer`` from now on."""
        self.renew(broker_id)
        self._session_peers[broker_id] = peer

    def end(self, broker_id: int) -> None:
        """The broker was fenced: no session to expire."""
        self._deadlines.pop(broker_id, None)

    def reloaded(self) -> None:
        """The controller reloaded its state after a refused commit."""
        live = set(self.host.state.live_broker_ids())
        for broker_id in list(self._deadlines):
            if broker_id not in live:  # a registration that was not kept
                del self._deadlines[broker_id]
        now = time.monotonic()
        for broker_id in live:  # a fencing that was not kept is retried (unless it heartbeats)
            if self._deadlines.get(broker_id, 0.0) < now:
                self._deadlines[broker_id] = now + STORE_RETRY_S

    def has_valid_session(self, broker_id: int) -> bool:
        """KRaft's BrokerHeartbeatManager.hasValidSession: alive and heard from in time."""
        deadline = self._deadlines.get(broker_id)
        if deadline is None or not self.host.state.is_alive(broker_id):
            return False
        return deadline >= time.monotonic()

    def owns_session(self, broker_id: int, broker_epoch: int, peer: object) -> bool:
        """The broker is registered alive with exactly this epoch (KRaft's checkBrokerEpoch),
        and ``peer`` is the connection that registered it. Not a principal (control
        connections are not authenticated yet), but a forger must hold the broker's own
        connection rather than read its epoch: a killed broker's connection is gone, so
        nothing keeps it alive. A broker whose connection was lost registers again on the
        new one (same incarnation: same epoch, nothing changes)."""
        broker = self.host.state.brokers.get(broker_id)
        if broker is None or not broker.alive or broker.epoch != broker_epoch:
            return False
        return self._session_peers.get(broker_id) == peer

    def rebind(self, broker_id: int, incarnation_id: str, broker_epoch: int, peer: object) -> bool:
        """A reconnected broker claims its session on connection ``peer``, at once (no event,
        so it never waits behind a long one while its deadline runs): only the same
        incarnation, alive with exactly the epoch it names. That epoch was answered to it, so
        it is committed; nothing else changes and nothing is sent. False: the registration
        event decides."""
        broker = self.host.state.brokers.get(broker_id)
        if (
            broker is None
            or not broker.alive
            or broker.incarnation_id != incarnation_id
            or broker.epoch != broker_epoch
        ):
            return False
        self.registered(broker_id, peer)
        return True

    def heartbeat(self, broker_id: int, broker_epoch: int, peer: object) -> bool:
        """Record a heartbeat; False (nothing changes) unless it comes from the session's
        owner (:meth:`owns_session`)."""
        if not self.owns_session(broker_id, broker_epoch, peer):
            return False
        self._deadlines[broker_id] = time.monotonic() + self.host.config.session_timeout_s
        return True

    @property
    def _period(self) -> float:
        return min(0.1, self.host.config.session_timeout_s / 10)

    def _stalled(self, now: float) -> float:
        """How long the event loop was held past the liveness loop's next tick (0: it was
        not; ordinary lateness under one period is scheduling noise, not a stall)."""
        late = now - (self._last_tick + self._period)
        return late if late > self._period else 0.0

    async def _liveness_loop(self) -> None:
        self._last_tick = time.monotonic()
        while True:
            await asyncio.sleep(self._period)
            now = time.monotonic()
            stalled = self._stalled(now)
            self._last_tick = now
            if stalled:
                # no heartbeat could be read meanwhile: that time does not count
                for broker_id in self._deadlines:
                    self._deadlines[broker_id] += stalled
            for broker_id, deadline in list(self._deadlines.items()):
                if deadline < now and broker_id not in self._expiring:
                    self._expiring.add(broker_id)
                    epoch = self.host.state.brokers[broker_id].epoch
                    expire = functools.partial(self._on_expired, broker_id, epoch)
                    self.host.enqueue("BrokerExpiration", expire)

    def _on_expired(self, broker_id: int, epoch: int) -> None:
        self._expiring.discard(broker_id)
        broker = self.host.state.brokers.get(broker_id)
        deadline = self._deadlines.get(broker_id)
        if broker is None or not broker.alive or broker.epoch != epoch:
            return
        now = time.monotonic()
        if deadline is not None and deadline >= now:
            return  # a heartbeat arrived while the event waited
        if self._stalled(now):
            return  # events held the loop since the liveness loop looked: it decides again
        log.warning("broker %d missed its session timeout; fencing it", broker_id)
        self._fence(broker_id)
