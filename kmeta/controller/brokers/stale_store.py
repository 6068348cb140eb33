"""A stale store never wipes a cluster: the controller pushes nothing until the brokers it
finds running have said their store is not older than what they hold.

A controller started on a store that lost writes (its WAL deleted after a kill -9, a
controller.db restored alone from a copy, the dir emptied and the same cluster id given)
would otherwise push its older state as the whole truth: every broker drops every topic the
store does not hold. Each broker's registration says what it holds: the highest controller
epoch it has seen (kmeta's tagged ``KmetaControllerEpoch``) and a digest per topic it hosts
(``KmetaTopicDigests``). The store is older than that broker when

* the broker has seen this controller's epoch or a later one before this controller sent it
  anything: the store lost at least its own last start (each start raises the epoch first,
  durably); or
* the broker hosts a topic the store does not know: a topic is written to the store before
  any broker hears of it, and leaves the store only once each of its replicas acknowledged
  its deletion.

Then the controller refuses to push: it answers the registration STALE_CONTROLLER_EPOCH
(the broker keeps what it holds and retries), and exits non-zero with one line naming the
store and the broker with what each holds. ``--accept-older-store`` pushes anyway (an operator
who restored the copy on purpose), saying so in its log. A broker refuses a controller epoch
below the one it has seen, so a refused start raises the store's epoch to the brokers' (the
next start's is above it); a start with the flag whose epoch is below a broker's does the
same and exits, to push on its next start.

So that nothing goes out before the verdict, the sender to each broker stored as live starts
only once that broker registered here and was checked, was not heard from within the startup
grace (:data:`~kmeta.controller.brokers.startup_resync.REGISTRATION_GRACE_S`: a broker that
does not heartbeat is not running and cannot object), or its session ended. A broker not
stored gets a sender with its registration, after the check. Brokers whose sender started
are checked too (the epoch rule then only for an epoch above this controller's: they may
have this one from it). The guard serves the embedded store; a quorum's state lives
in ZooKeeper, whose writes no file removal loses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kmeta.controller.brokers.startup_resync import REGISTRATION_GRACE_S
from kmeta.controller.host import ControllerHost

log = logging.getLogger(__name__)

#: topics named in the refusal line (the count says how many there are)
_NAMED_TOPICS = 3


class GuardedChannel(Protocol):
    """What the guard needs of :class:`~kmeta.controller.channel.channel_manager.ControllerChannelManager`."""

    def startup(self, closed: set[int] | None = None) -> None: ...

    def open_broker(self, broker_id: int) -> None: ...


class StaleStoreGuard:
    def __init__(
        self,
        host: ControllerHost,
        where: str,
        channel: GuardedChannel,
        refuse: Callable[[str], None],
        *,
        enabled: bool,
        accept_older: bool,
    ) -> None:
        self.host = host
        self.where = where  # the store, as the refusal names it
        self._channel = channel
        self._refuse = refuse
        self.enabled = enabled
        self.accept_older = accept_older
        self._epoch = 0
        #: stored live brokers (id -> epoch) whose sender waits for their verdict
        self._pending: dict[int, int] = {}
        self._heard: set[int] = set()
        #: brokers whose sender may have started in this run (they may hold our epoch)
        self._sent: set[int] = set()
        self._timers: list[asyncio.TimerHandle] = []
        #: the refusal, once made (every later registration gets it too)
        self.refusal: str | None = None
        #: the highest controller epoch a broker reported at or above ours: the store's is
        #: raised to it at stop, so the next start's is above what the brokers hold (else they
        #: would refuse an accepted older store's requests as STALE_CONTROLLER_EPOCH)
        self.epoch_seen = 0
        self._warned = False

    def started(self, epoch: int) -> None:
        """The store is loaded with this controller's ``epoch``: start the channel, the
        stored live brokers' senders closed until each one's verdict."""
        self._epoch = epoch
        if self.enabled:
            state = self.host.state
            self._pending = {b.broker_id: b.epoch for b in state.brokers.values() if b.alive}
        self._channel.startup(set(self._pending))
        if self._pending:
            session_s = self.host.config.session_timeout_s
            loop = asyncio.get_running_loop()
            self._timers = [
                loop.call_later(min(REGISTRATION_GRACE_S, session_s / 2), self._graced),
                loop.call_later(session_s, self._session_over),
            ]

    def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def heard(self, broker_id: int, broker_epoch: int) -> None:
        """A heartbeat of a stored live broker's epoch: it is running and will register."""
        if self._pending.get(broker_id) == broker_epoch:
            self._heard.add(broker_id)

    def _graced(self) -> None:
        for broker_id in [b for b in self._pending if b not in self._heard]:
            self._open(broker_id)  # (silent: not running, it cannot object)

    def _session_over(self) -> None:
        if self._pending and self.refusal is None:
            log.info(
                "brokers %s did not register within their session: their senders start",
                ", ".join(map(str, sorted(self._pending))),
            )
            for broker_id in list(self._pending):
                self._open(broker_id)

    def _open(self, broker_id: int) -> None:
        self._sent.add(broker_id)
        if self._pending.pop(broker_id, None) is not None and self.refusal is None:
            self._channel.open_broker(broker_id)

    def check(self, broker_id: int, broker_epoch: int, topics: Iterable[str] | None) -> str | None:
        """A registration (after its cluster id was checked): the refusal line when this
        store is older than what the broker holds (and not accepted), else None."""
        if not self.enabled or self.refusal is not None:
            return self.refusal
        lacking = sorted(t for t in topics or () if t not in self.host.state.topics)
        # (a broker whose sender started, even one since removed, may have our epoch)
        sent = broker_id in self._sent
        newer_epoch = broker_epoch > self._epoch or (broker_epoch == self._epoch and not sent)
        if not lacking and not newer_epoch:
            self._open(broker_id)
            return None
        line = self._line(broker_id, broker_epoch, lacking)
        if broker_epoch >= self._epoch:  # (the store's epoch is raised to it on the way out)
            self.epoch_seen = max(self.epoch_seen, broker_epoch)
        if self.accept_older and broker_epoch <= self._epoch:
            if not self._warned:
                self._warned = True
                log.warning("%s; pushing it anyway (--accept-older-store)", line)
            self._open(broker_id)
            return None
        if self.accept_older:  # (the broker would refuse our epoch as stale)
            self.refusal = (
                f"{line}; its controller epoch is now raised to {broker_epoch}: start it again "
                f"(with --accept-older-store) to push it"
            )
        else:
            self.refusal = f"{line}; refusing to push it (--accept-older-store to push it anyway)"
        self.stop()
        self._refuse(self.refusal)  # (the process exits with it: its one line)
        return self.refusal

    def _line(self, broker_id: int, broker_epoch: int, lacking: list[str]) -> str:
        topics = len(self.host.state.topics)
        held = f"controller epoch {broker_epoch}"
        if lacking:
            named = ", ".join(lacking[:_NAMED_TOPICS]) + (", ..." if len(lacking) > _NAMED_TOPICS else "")
            held += f" and {len(lacking)} topics the store lacks ({named})"
        return (
            f"the store {self.where} (controller epoch {self._epoch}, {topics} topics) is older "
            f"than what broker {broker_id} holds ({held})"
        )
