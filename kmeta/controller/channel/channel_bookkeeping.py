"""ChannelBookkeeping: the controller channel's metrics and state-change log lines.

What the manager and its senders (:mod:`request_send_thread`, through its ``SendObserver``
seam) report is counted and written here: the queue sizes, the queue time of each request,
send failures, acknowledgements and rejections for the propagation tracker, the ERROR lines
of a broker that starts refusing (STALE_CONTROLLER_EPOCH once per broker and epoch), and one
state-change log line per enqueue, send and answer. Apart from :mod:`channel_manager` so that
queueing and holding read on their own, and what is measured can be read in one place.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kmeta.controller.channel.request_send_thread import ControlResponse, QueueItem
from kmeta.controller.metrics import ControllerMetrics
from kmeta.net.state_change_log import StateChangeLog, wall_ms
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages.update_metadata import UpdateMetadataRequest

#: the channel manager's logger: its rejection lines are the channel's, where operators look
log = logging.getLogger("kmeta.controller.channel.channel_manager")

#: UpdateMetadata v8 Type FULL (KIP-866): the broker's whole partition set replaced
_UM_FULL = 2


class ChannelBookkeeping:
    """The channel's metrics and state-change log lines: what the manager and its senders
    report (Kafka's ControllerChannelManager gauges QueueSize and RequestRateAndQueueTimeMs,
    its state-change logger's lines, and kmeta's propagation tracker and rejections)."""

    def __init__(
        self,
        metrics: ControllerMetrics,
        state_log: StateChangeLog,
        total_queue_size: Callable[[], int],
    ) -> None:
        self.metrics = metrics
        self.state_log = state_log
        self._total_queue_size = total_queue_size
        #: (broker, broker epoch, controller epoch) whose STALE_CONTROLLER_EPOCH was said
        self._stale_said: set[tuple[int, int, int]] = set()

    def queue_changed(self, broker_id: int, size: int) -> None:
        self.metrics.broker_queue_size.labels(str(broker_id)).set(size)
        self._update_total()

    def _update_total(self) -> None:
        self.metrics.total_queue_size.set(self._total_queue_size())

    def broker_removed(self, broker_id: int) -> None:
        self.metrics.broker_queue_size.labels(str(broker_id)).set(0)
        self._update_total()
        self.metrics.propagation.broker_removed(broker_id)

    def enqueued(self, broker_id: int, item: QueueItem) -> None:
        propagation = self.metrics.propagation
        propagation.enqueued(broker_id, item.api_key, item.update_id, item.enqueue_time)
        self._log("enqueue", broker_id, item)

    def send_failed(self, broker_id: int) -> None:
        self.metrics.send_failures.labels(str(broker_id)).inc()

    def sent(self, broker_id: int, item: QueueItem, now: float) -> None:
        item.send_time = now
        queue_ms = (now - item.enqueue_time) * 1000
        self.metrics.request_queue_time_ms.observe(queue_ms)
        self.metrics.request_rate_and_queue_time_ms.labels(str(broker_id)).observe(queue_ms)
        self._log("send", broker_id, item, send_ms=wall_ms(now))

    def acked(self, broker_id: int, item: QueueItem, response: ControlResponse) -> None:
        request = item.request
        full = isinstance(request, UpdateMetadataRequest) and request.type == _UM_FULL
        self.metrics.propagation.acked(broker_id, item.api_key, item.update_id, full=full)
        self._log_answer(broker_id, item, ErrorCode.NONE)

    def rejected(
        self, broker_id: int, item: QueueItem, response: ControlResponse, error: ErrorCode
    ) -> None:
        api = ApiKey(item.api_key).name
        self.metrics.rejections.labels(str(broker_id), api, error.name).inc()
        started = self.metrics.propagation.rejected(
            broker_id, item.api_key, item.update_id, error.name
        )
        epoch = item.request.controller_epoch
        if error == ErrorCode.STALE_CONTROLLER_EPOCH:
            key = (broker_id, item.request.broker_epoch, epoch)
            if key not in self._stale_said:
                if len(self._stale_said) >= 10_000:  # (bounded; a forger can bump epochs)
                    self._stale_said.clear()
                self._stale_said.add(key)
                log.error(
                    "broker %d refused controller epoch %d as stale: another controller, or a "
                    "forged control request, raised its controller epoch. It refuses every "
                    "change from this controller until it restarts; check for a second "
                    "controller or an unauthorised client on its control listener",
                    broker_id, epoch,
                )  # fmt: skip
        elif started:
            log.error(
                "broker %d rejected %s (update %d, controller epoch %d, broker epoch %d): %s; "
                "it does not count as holding the change",
                broker_id, api, item.update_id, epoch, item.request.broker_epoch, error.name,
            )  # fmt: skip
        else:
            log.debug("broker %d rejected %s again: %s", broker_id, api, error.name)
        self._log_answer(broker_id, item, error)

    def _log_answer(self, broker_id: int, item: QueueItem, error: ErrorCode) -> None:
        self._log(
            "ack",
            broker_id,
            item,
            error_code=int(error),
            send_ms=wall_ms(item.send_time),
            ack_ms=time.time() * 1000.0,
        )
        self.state_log.flush()

    def _log(self, event: str, broker_id: int, item: QueueItem, **extra: object) -> None:
        if not self.state_log.enabled:
            return
        self.state_log.write(
            event,
            api_key=item.api_key,
            target_broker=broker_id,
            update_id=item.update_id,
            correlation_id=item.correlation_id,
            topics=item.topics,
            partitions=item.partitions,
            enqueue_ms=wall_ms(item.enqueue_time),
            **extra,
        )
