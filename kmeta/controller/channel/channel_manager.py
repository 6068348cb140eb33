"""ControllerChannelManager: one request queue and one sender task per broker.

As Kafka's ``ControllerChannelManager``:

* ``send_request(broker_id, request, callback)`` only enqueues a :class:`QueueItem`
  (api key, request, callback, enqueue time); an unknown broker is logged and dropped.
* One sender task per broker (Kafka's RequestSendThread, :mod:`request_send_thread`) takes
  the next item, waits until the broker is reachable, sends it and awaits the response. On
  any failure it closes the connection, backs off ``retry_backoff_s`` and retries the same
  item, until it is sent or the broker is removed. Requests to one broker therefore go out
  strictly in order.
* The response must be LeaderAndIsr, StopReplica or UpdateMetadata; then the callback runs.
* Only a success answer is an acknowledgement (:func:`answer_error`). An error answer is a
  rejection: counted per broker, api and error (``kmeta_controller_channel_rejections``),
  logged at ERROR when a broker starts refusing an api with an error, kept by the propagation
  tracker (the broker does not count as caught up, and /status shows it as rejecting), and
  never releases a barrier. As Kafka's controller, the request is not sent again: the same
  request would get the same answer. What brings the broker back is a full UpdateMetadata it
  accepts: its next registration (a restart), a controller restart, or the end of a drop
  fault. STALE_CONTROLLER_EPOCH means something raised the broker's controller epoch above
  ours (another controller, or a forged request): said loudly, once per broker and epoch.
* Measured: queue size per broker, total queue size, queue time of each request. The
  metrics, the rejection log lines and the state-change log lines are kept by
  :class:`ChannelBookkeeping` (:mod:`channel_bookkeeping`), which the senders report to.

While the controller processes events, the manager is *held* (:meth:`hold`): requests and
broker additions/removals wait, in order, until the events' commit, then :meth:`release`
applies them, or :meth:`discard` drops those of an event that failed. So no broker ever sees
a change that was not durable, and a failed event leaves the queues as they were.

Each request carries a controller-global correlation id, so (broker, controller epoch,
correlation id) names one request in the state-change log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

from kmeta.controller.channel.channel_bookkeeping import ChannelBookkeeping
from kmeta.controller.channel.faults import FaultInjector
from kmeta.controller.channel.request_send_thread import (
    Callback,
    ControlRequest,
    ControlResponse,
    QueueItem,
    RequestSendThread,
    answer_error,
)
from kmeta.controller.metrics import ControllerMetrics
from kmeta.metadata.model import Endpoint
from kmeta.net.connection import KafkaConnection, api_of_instance
from kmeta.net.security.sasl_client import (
    ClientCredential,
    SaslAuthenticationError,
    authenticate,
)
from kmeta.net.state_change_log import StateChangeLog
from kmeta.net.tls import NO_TLS, TlsConfig, uses_sasl, uses_tls

log = logging.getLogger(__name__)

#: (re-exported: the controller imports the channel's vocabulary from here)
__all__ = [
    "Callback",
    "ControlRequest",
    "ControlResponse",
    "ControllerChannelManager",
    "QueueItem",
    "answer_error",
]

#: an operation held until release: ("send", broker, QueueItem) or ("add"/"remove", broker, listeners)
_HeldOp = tuple[str, int, Any]


class ControllerChannelManager:
    def __init__(
        self,
        *,
        listener_name: str | None,
        metrics: ControllerMetrics,
        state_log: StateChangeLog,
        client_id: str = "kmeta-controller",
        retry_backoff_s: float = 0.1,
        request_timeout_s: float = 30.0,
        max_frame_size: int = 256 * 1024 * 1024,
        tls: TlsConfig = NO_TLS,
        faults: FaultInjector | None = None,
        sasl: ClientCredential | None = None,
    ) -> None:
        self.listener_name = listener_name
        self.metrics = metrics
        self.state_log = state_log
        self.client_id = client_id
        self.retry_backoff_s = retry_backoff_s
        self.request_timeout_s = request_timeout_s
        self.max_frame_size = max_frame_size
        self.tls = tls
        #: the cluster credential, presented to brokers whose control listener is SASL
        self.sasl = sasl
        self.faults = faults or FaultInjector()
        #: may a request leave now? (a quorum's controller: while it holds its lease)
        self.may_send: Callable[[], bool] = lambda: True
        self._ssl: ssl.SSLContext | None = None
        self._channels: dict[int, RequestSendThread] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._next_correlation_id = 0
        self._running = False
        #: brokers whose sender waits for open_broker (kmeta.controller.brokers.stale_store)
        self._closed: set[int] = set()
        #: between hold() and release(): operations waiting for the events' commit
        self._held: list[_HeldOp] | None = None
        #: broker id -> member after the held operations (what has_broker answers meanwhile)
        self._held_members: dict[int, bool] = {}
        #: metrics and state-change log lines of what the senders do
        self.book = ChannelBookkeeping(metrics, state_log, self.queue_size)

    # -- lifecycle ------------------------------------------------------------------------------
    def startup(self, closed: set[int] | None = None) -> None:
        """Start the senders, but those of the ``closed`` brokers (until open_broker)."""
        self._running = True
        self._closed = set(closed or ())
        for broker_id, ch in self._channels.items():
            if broker_id not in self._closed:
                ch.start()

    def open_broker(self, broker_id: int) -> None:
        if broker_id in self._closed:
            self._closed.discard(broker_id)
            ch = self._channels.get(broker_id)
            if ch is not None and self._running and ch.task is None:
                ch.start()

    async def shutdown(self) -> None:
        self._running = False
        self._held = None  # (an event group cut short by the shutdown: never committed)
        self._held_members.clear()
        tasks = [t for t in (self.remove_broker(b) for b in list(self._channels)) if t is not None]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- holding --------------------------------------------------------------------------------
    def hold(self) -> None:
        """From now on, sends and broker additions/removals wait until :meth:`release`."""
        self._held = []
        self._held_members.clear()

    def mark(self) -> int:
        """A point in the held operations (taken before an event) for :meth:`discard`."""
        return 0 if self._held is None else len(self._held)

    def discard(self, since: int = 0) -> None:
        """Drop the held operations from ``since`` on (a failed event's, or all)."""
        if self._held is None:
            return
        del self._held[since:]
        self._held_members = {b: op == "add" for op, b, _ in self._held if op != "send"}

    def release(self) -> None:
        """Apply the held operations in order (their events are durable) and stop holding."""
        held, self._held = self._held, None
        self._held_members.clear()
        for op, broker_id, arg in held or ():
            if op == "send":
                self._enqueue(broker_id, arg)
            elif op == "add":
                self.add_broker(broker_id, arg)
            else:
                self.remove_broker(broker_id)

    def add_broker(self, broker_id: int, listeners: tuple[Endpoint, ...]) -> None:
        """Start a queue and sender for a broker (its control listener, else its first)."""
        if self._held is not None:
            self._held.append(("add", broker_id, listeners))
            self._held_members[broker_id] = True
            return
        if broker_id in self._channels:
            return
        endpoint = next((ep for ep in listeners if ep.listener == self.listener_name), None)
        endpoint = endpoint or listeners[0]
        ch = RequestSendThread(self, self.book, broker_id, endpoint)
        self._channels[broker_id] = ch
        if self._running and broker_id not in self._closed:
            ch.start()

    def remove_broker(self, broker_id: int) -> asyncio.Task[None] | None:
        """Stop the broker's sender and drop its queue; returns the cancelled task (or None)."""
        if self._held is not None:
            self._held.append(("remove", broker_id, None))
            self._held_members[broker_id] = False
            return None
        ch = self._channels.pop(broker_id, None)
        if ch is None:
            return None
        self.book.broker_removed(broker_id)
        task = ch.stop()
        if task is not None:  # referenced until it has finished cancelling (else GC'd pending)
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        return task

    async def connect(self, endpoint: Endpoint) -> KafkaConnection:
        """A connection to a broker's ``endpoint`` for its sender: TLS and SASL as the
        broker registered the listener."""
        conn = await KafkaConnection.open(
            endpoint.host,
            endpoint.port,
            client_id=self.client_id,
            timeout_s=self.request_timeout_s,
            max_frame_size=self.max_frame_size,
            ssl=self.ssl_for(endpoint),
        )
        try:
            await self.authenticate(conn, endpoint)
        except BaseException:
            conn.close()
            raise
        return conn

    async def authenticate(self, conn: KafkaConnection, endpoint: Endpoint) -> None:
        """SASL with the cluster credential when the broker registered its listener as
        SASL_PLAINTEXT / SASL_SSL (SaslAuthenticationError, a ConnectionError, if refused)."""
        if not uses_sasl(endpoint.security_protocol):
            return
        if self.sasl is None:
            raise SaslAuthenticationError(
                f"{endpoint.listener} is {endpoint.security_protocol}: no --cluster-credential-file"
            )
        await authenticate(conn, self.sasl, self.request_timeout_s)

    def ssl_for(self, endpoint: Endpoint) -> ssl.SSLContext | None:
        """TLS (our certificate for mTLS) when the broker registered its listener as SSL or
        SASL_SSL."""
        if not uses_tls(endpoint.security_protocol):
            return None
        if self._ssl is None:
            self._ssl = self.tls.client_context()
        return self._ssl

    def has_broker(self, broker_id: int) -> bool:
        held = self._held_members.get(broker_id)
        return broker_id in self._channels if held is None else held

    # -- requests -------------------------------------------------------------------------------
    def send_request(
        self,
        broker_id: int,
        request: ControlRequest,
        callback: Callback | None = None,
        *,
        update_id: int = 0,
        topics: list[str] | None = None,
        partitions: int = 0,
        encoded: bytes | tuple[bytes, ...] | None = None,
    ) -> QueueItem | None:
        """Enqueue ``request`` for ``broker_id`` (held: once released); returns the item
        (None: unknown broker)."""
        if not self.has_broker(broker_id):
            log.warning("not sending %s to unknown broker %d", type(request).__name__, broker_id)
            return None
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        item = QueueItem(
            int(api_of_instance(request).key),
            request,
            callback,
            time.monotonic(),
            self._next_correlation_id,
            update_id,
            topics or [],
            partitions,
            encoded=encoded,
        )
        if self._held is not None:
            self._held.append(("send", broker_id, item))
            return item
        return self._enqueue(broker_id, item)

    def _enqueue(self, broker_id: int, item: QueueItem) -> QueueItem | None:
        ch = self._channels.get(broker_id)
        if ch is None:  # (removed by an operation released before this one)
            return None
        item.enqueue_time = time.monotonic()
        ch.queue.put_nowait(item)
        self.book.queue_changed(broker_id, ch.queue.qsize())
        self.book.enqueued(broker_id, item)
        return item

    def queue_size(self, broker_id: int | None = None) -> int:
        if broker_id is None:
            return sum(ch.queue.qsize() for ch in self._channels.values())
        ch = self._channels.get(broker_id)
        return 0 if ch is None else ch.queue.qsize()
