"""RequestSendThread: the queue and the sender task of one broker, as Kafka's.

``ControllerChannelManager`` owns one per broker and only enqueues :class:`QueueItem`s; the
sender takes the next item, waits until the broker is reachable, sends it and awaits the
answer. On any failure it closes the connection, backs off ``retry_backoff_s`` and retries
the same item, until it is sent or the broker is removed, so requests to one broker go out
strictly in order. Only LeaderAndIsr, StopReplica and UpdateMetadata answers are taken; then
the item's callback runs.

Right before each write the sender asks ``SenderHost.may_send``: a quorum's controller that may
have been deposed (its lease ran out: :mod:`kmeta.controller.quorum.election`) writes nothing
until it renews the lease or resigns, so no request of a deposed controller reaches a broker.

The sender sees its manager through two narrow seams: :class:`SenderHost` (settings, the
fault injector, ``may_send``, and ``connect``, which opens an authenticated connection) and
:class:`SendObserver` (what it reports: queue size, sent, acknowledged, rejected, a failed
send), so metrics and the state-change log stay with the manager.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, cast

from kmeta.controller.channel.faults import FaultInjector
from kmeta.metadata.model import Endpoint
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.header import RequestHeader
from kmeta.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from kmeta.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from kmeta.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

log = logging.getLogger(__name__)

#: how often a held sender looks whether it may send again
_HOLD_POLL_S = 0.05
_CONTROL_RESPONSES = (LeaderAndIsrResponse, StopReplicaResponse, UpdateMetadataResponse)
#: what the channel sends: the control requests, and their answers
ControlRequest: TypeAlias = UpdateMetadataRequest | LeaderAndIsrRequest | StopReplicaRequest
ControlResponse: TypeAlias = UpdateMetadataResponse | LeaderAndIsrResponse | StopReplicaResponse
Callback = Callable[[ControlResponse, int], None]  # (response, broker_id)


def answer_error(response: ControlResponse) -> ErrorCode:
    """NONE if a control answer acknowledges the request, else the error it rejects it with.

    The top-level error, then the per-partition ones (LeaderAndIsr, StopReplica). Not a
    rejection: a LeaderAndIsr partition answered STALE_CONTROLLER_EPOCH, which Kafka's broker
    answers for a leader epoch it already holds (a resend after a controller restart or a
    resync) as well as an older one; Kafka's controller ignores it too. A broker whose
    controller epoch was raised says so at the top level."""
    top = int(response.error_code)
    if top:
        return _error(top)
    if isinstance(response, StopReplicaResponse):
        for e in response.partition_errors or ():
            if e.error_code:
                return _error(e.error_code)
    elif isinstance(response, LeaderAndIsrResponse):
        parts = [*(response.partition_errors or ())]
        for t in response.topics or ():
            parts += t.partition_errors
        for part in parts:
            if part.error_code and part.error_code != ErrorCode.STALE_CONTROLLER_EPOCH:
                return _error(part.error_code)
    return ErrorCode.NONE


def _error(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:  # a code this build does not name
        return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True)
class QueueItem:
    api_key: int
    request: ControlRequest
    callback: Callback | None
    enqueue_time: float  # time.monotonic()
    correlation_id: int = 0
    #: for the state-change log: update id, topic names, partition count
    update_id: int = 0
    topics: list[str] = field(default_factory=list)
    partitions: int = 0
    send_time: float = 0.0
    #: ``request`` already encoded (one big body shared by several brokers; pieces: the
    #: broker's own head, then the part every broker's request shares), or None
    encoded: bytes | tuple[bytes, ...] | None = None


class SenderHost(Protocol):
    """What a sender uses of its channel manager."""

    client_id: str
    request_timeout_s: float
    retry_backoff_s: float
    faults: FaultInjector
    #: whether a request may leave now (checked right before each write)
    may_send: Callable[[], bool]

    async def connect(self, endpoint: Endpoint) -> KafkaConnection:
        """A connection to ``endpoint``, TLS and SASL as the broker registered it."""
        ...


class SendObserver(Protocol):
    """What a sender reports (the channel manager's metrics and state-change log)."""

    def queue_changed(self, broker_id: int, size: int) -> None: ...
    def sent(self, broker_id: int, item: QueueItem, now: float) -> None: ...
    def acked(self, broker_id: int, item: QueueItem, response: ControlResponse) -> None: ...
    def rejected(
        self, broker_id: int, item: QueueItem, response: ControlResponse, error: ErrorCode
    ) -> None: ...
    def send_failed(self, broker_id: int) -> None: ...


class RequestSendThread:
    """The queue and sender task of one broker (Kafka's ``RequestSendThread``)."""

    def __init__(
        self, host: SenderHost, observer: SendObserver, broker_id: int, endpoint: Endpoint
    ) -> None:
        self.host = host
        self.observer = observer
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.queue: asyncio.Queue[QueueItem] = asyncio.Queue()
        self.conn: KafkaConnection | None = None
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-sender-{self.broker_id}"
        )

    def stop(self) -> asyncio.Task[None] | None:
        """Cancel the sender (it stops at its next await) and close the connection."""
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
        self._close()
        return task

    def _close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    async def _run(self) -> None:
        observer = self.observer
        while self.task is not None:
            item = await self.queue.get()
            observer.queue_changed(self.broker_id, self.queue.qsize())
            if not await self.host.faults.admit(self.broker_id, item.enqueue_time):
                continue  # fault injection: dropped (see kmeta.controller.channel.faults)
            response = await self._send_until_answered(item)
            if not isinstance(response, _CONTROL_RESPONSES):
                log.error(
                    "broker %d answered api %s with %r",
                    self.broker_id,
                    item.api_key,
                    type(response),
                )
                continue
            error = answer_error(response)
            if error == ErrorCode.NONE:
                observer.acked(self.broker_id, item, response)
            else:
                observer.rejected(self.broker_id, item, response, error)
            if item.callback is not None:  # (on every answer: ``answer_error`` tells an ack)
                try:
                    item.callback(response, self.broker_id)
                except Exception:
                    log.exception(
                        "callback for api %d to broker %d failed", item.api_key, self.broker_id
                    )

    async def _send_until_answered(self, item: QueueItem) -> ControlResponse:
        host = self.host
        first = True
        while True:
            try:
                if self.conn is None or not self.conn.is_open:
                    self._close()
                    self.conn = await host.connect(self.endpoint)
                if not host.may_send():
                    # a quorum's controller whose lease ran out (it may have been deposed):
                    # nothing is written until it renews it, or resigns (which cancels us)
                    await asyncio.sleep(_HOLD_POLL_S)
                    continue
                header = RequestHeader(
                    item.api_key, item.request.version, item.correlation_id, host.client_id
                )
                # stamped before the write: a broker on this host may apply the request
                # before send() returns, and "sent" must never come after "applied"
                sent_at = time.monotonic()
                # (the union of three requests types the answer as their join, Record: it is
                # the one ``item.request.response_class()`` names, one of ControlResponse)
                future = cast(
                    "asyncio.Future[ControlResponse]",
                    self.conn.send(item.request, header=header, body=item.encoded),
                )
                if first:
                    self.observer.sent(self.broker_id, item, sent_at)
                    first = False
                async with asyncio.timeout(host.request_timeout_s):
                    return await future
            except (OSError, ConnectionError, TimeoutError, ProtocolError) as exc:
                if self.task is None:
                    # stop() cancelled us and closed the connection; the close can win the race
                    # with the cancel and surface instead of it, which must not be retried.
                    raise asyncio.CancelledError from exc
                self.observer.send_failed(self.broker_id)
                log.debug("send to broker %d failed (%r); retrying", self.broker_id, exc)
                self._close()
                await asyncio.sleep(host.retry_backoff_s)
