"""ProducerIdManager: the producer ids this broker gives out (InitProducerId, the transaction
coordinator), from blocks the controller hands out (Kafka's ``RPCProducerIdManager``).

* Ids come from the current block, in order; a block is ``[start, start + len)`` as the
  controller's AllocateProducerIds answer says, durable there before it was answered, so no
  id is given twice in the cluster, whatever restarts or fails over.
* Once 90% of the current block is given out the next one is asked for (Kafka's
  ``PidPrefetchThreshold``), over the controller link's forwarding connection (the cluster's
  identity, to the active controller; its NOT_CONTROLLER answer goes on to the next one):
  one request in flight at a time, at most one block held in reserve.
* With no id left and no block in reserve, :meth:`generate` asks for one and waits for the
  request in flight up to :data:`WAIT_FOR_BLOCK_S`, in line: the callers waiting get the new
  block's ids in the order they asked, before any caller that comes after them (a request read
  as the block lands queues behind them). Still none: it raises
  :class:`ProducerIdUnavailable` with COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer then (older
  clients take REQUEST_TIMED_OUT as fatal; this one they retry). Kafka answers at once and
  lets the client retry; waiting for a block already asked for saves the client that round
  (the first InitProducerId after a start, every thousandth after a burst).
* A refused or failed request (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED: not registered
  yet; the controller unreachable) is asked again after :data:`RETRY_BACKOFF_S` (Kafka's
  RetryBackoffMs), at the next id asked for; a controller that does not serve
  AllocateProducerIds, after :data:`UNSUPPORTED_BACKOFF_S`. An answer whose block is not
  after the current one, or not in the int64 range, is refused as Kafka refuses it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode, UnsupportedVersionError
from kmeta.protocol.messages import allocate_producer_ids as api
from kmeta.protocol.registry import highest_common
from kmeta.server.to_controller.controller_connection import NET_ERRORS
from kmeta.server.to_controller.forwarding import ForwardingManager, ForwardTimedOut

log = logging.getLogger(__name__)

#: the share of a block given out when the next one is asked for
PREFETCH_THRESHOLD = 0.90
#: how long generate() waits for a block already asked for before LOAD_IN_PROGRESS
WAIT_FOR_BLOCK_S = 5.0
#: after a refused or failed AllocateProducerIds, none is sent for this long
RETRY_BACKOFF_S = 0.05
#: after a controller that does not serve it
UNSUPPORTED_BACKOFF_S = 5.0
#: how long an AllocateProducerIds may wait for the controller's answer
ALLOCATE_TIMEOUT_S = 10.0
INT64_MAX = 2**63 - 1


class ProducerIdUnavailable(Exception):
    """No producer id can be given now: ``error`` is the answer (Kafka's ``Errors.forException``
    of RPCProducerIdManager's failure: COORDINATOR_LOAD_IN_PROGRESS)."""

    def __init__(self, error: ErrorCode, why: str) -> None:
        super().__init__(why)
        self.error = error


def _unavailable() -> ProducerIdUnavailable:
    return ProducerIdUnavailable(
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "Producer ID block is full. Waiting for next block"
    )


class ProducerIdManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        #: the controller link's forwarding (the broker state sets this; None: no controller)
        self.channel: Callable[[], ForwardingManager | None] = lambda: None
        self._next_id = 0
        self._end = 0  # one past the current block's last id (empty: nothing to give)
        self._prefetch_at = 0
        self._reserve: tuple[int, int] | None = None  # the next block: (start, length)
        self._in_flight: asyncio.Task[None] | None = None
        #: callers waiting for the block in flight, first come first served
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._quiet_until = 0.0
        #: blocks received since this broker started (for tests and /status)
        self.blocks = 0

    def close(self) -> None:
        if self._in_flight is not None:
            self._in_flight.cancel()

    async def generate(self) -> int:
        """A producer id never given out before, or :class:`ProducerIdUnavailable`."""
        if not self._waiters:  # (else the ids at hand are theirs first)
            pid = self._claim()
            if pid is not None:
                return pid
        self._maybe_request()
        if self._in_flight is None:  # none on its way: backing off, or not served
            raise _unavailable()
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter, WAIT_FOR_BLOCK_S)
        except TimeoutError:
            raise _unavailable() from None

    def _serve_waiters(self) -> None:
        """Hands the ids at hand to the waiting callers in order; with none left and no request
        on its way (it failed, or was refused) the rest get Kafka's retriable answer."""
        while self._waiters:
            if self._waiters[0].done():  # (timed out or cancelled)
                self._waiters.popleft()
                continue
            pid = self._claim()
            if pid is None:
                break
            self._waiters.popleft().set_result(pid)
        if self._in_flight is None:
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(_unavailable())

    def _claim(self) -> int | None:
        if self._next_id >= self._end and self._reserve is not None:
            start, length = self._reserve
            self._reserve = None
            self._next_id, self._end = start, start + length
            self._prefetch_at = start + int(length * PREFETCH_THRESHOLD)
        if self._next_id >= self._end:
            return None
        pid = self._next_id
        self._next_id += 1
        if pid >= self._prefetch_at:
            self._maybe_request()
        return pid

    def _maybe_request(self) -> None:
        if self._in_flight is not None or self._reserve is not None:
            return
        if time.monotonic() < self._quiet_until:
            return
        self._in_flight = asyncio.get_running_loop().create_task(self._allocate(), name="allocate-producer-ids")
        self._in_flight.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if self._in_flight is task:
            self._in_flight = None
        self._serve_waiters()  # (a claim there may send the next request)

    async def _allocate(self) -> None:
        channel = self.channel()
        epoch = self.broker_epoch()
        version: int | None = 0
        if channel is not None and channel.admin_versions:  # (else learnt as it connects)
            version = highest_common(channel.admin_versions, ApiKey.ALLOCATE_PRODUCER_IDS, range(1))
        try:
            if channel is None or epoch < 0:
                raise ConnectionError("no controller link, or not registered yet")
            if version is None:
                raise UnsupportedVersionError("the controller does not serve AllocateProducerIds")
            request = api.AllocateProducerIdsRequest(version=version, broker_id=self.broker_id, broker_epoch=epoch)
            response = await channel.forward(request, ALLOCATE_TIMEOUT_S)
        except UnsupportedVersionError as exc:
            log.warning("no producer ids: %s", exc)
            self._quiet_until = time.monotonic() + UNSUPPORTED_BACKOFF_S
            return
        except (ForwardTimedOut, *NET_ERRORS) as exc:
            log.warning("AllocateProducerIds not answered: %r", exc)
            self._quiet_until = time.monotonic() + RETRY_BACKOFF_S
            return
        self._answered(response)

    def _answered(self, response: api.AllocateProducerIdsResponse) -> None:
        start, length = response.producer_id_start, response.producer_id_len
        if response.error_code != ErrorCode.NONE:
            log.warning("AllocateProducerIds refused: error %d", response.error_code)
        elif start < self._end - 1:
            log.error("producer id block %d+%d is not after the current one (ends %d): refused",
                      start, length, self._end - 1)  # fmt: skip
        elif start < 0 or length <= 0 or start > INT64_MAX - length:
            log.error("producer id block %d+%d is not a valid range: refused", start, length)
        else:
            self._reserve = (start, length)
            self.blocks += 1
            log.info("producer ids %d-%d from the controller", start, start + length - 1)
            return
        self._quiet_until = time.monotonic() + RETRY_BACKOFF_S
