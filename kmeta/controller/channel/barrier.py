"""Barriers: what an admin answer waits for (acknowledgements from brokers; for a deletion,
its StopReplicas too)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, MutableSet

from kmeta.controller.channel.channel_manager import ControlResponse, answer_error
from kmeta.protocol.errors import ErrorCode

#: how often an answer whose barrier is done looks whether it may leave
_HOLD_POLL_S = 0.05


class BarrierRegistry(weakref.WeakSet["Barrier"]):
    """The controller's barriers in progress, and whether an answer may leave now (a quorum's
    controller: while it holds its lease, kmeta.controller.quorum.election)."""

    def __init__(self) -> None:
        super().__init__()
        self.may_answer: Callable[[], bool] = lambda: True


class Barrier:
    """Resolves once every broker in ``pending`` acked (or left the cluster) and, for a topic
    deletion's answer (``stop_replicas``), every StopReplica of ``stops`` ((topic, broker)
    pairs) is done and committed.

    Only a success answer is an ack: a broker that answers with an error stays pending (the
    channel does not resend, so the wait ends by the request's timeout, or by the broker
    leaving), and ``rejected`` says which broker refused it with what. A broker that leaves
    releases both its ack and its StopReplicas (its replicas then wait for its return, not
    the answer)."""

    def __init__(self, registry: MutableSet[Barrier], *, stop_replicas: bool = False) -> None:
        self.pending: set[int] = set()
        #: broker id -> the error name it answered with
        self.rejected: dict[int, str] = {}
        #: a deletion's answer also waits for its StopReplicas (the barrier on)
        self.waits_for_stops = stop_replicas
        #: the (topic, broker) StopReplicas still to be done and committed
        self.stops: set[tuple[str, int]] = set()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._registry = registry
        registry.add(self)

    def arm(self, pending: Iterable[int]) -> Barrier:
        """Set the brokers to wait for (after the requests were enqueued)."""
        self.pending = set(pending)
        self._check()
        return self

    def expect_stops(self, stops: Iterable[tuple[str, int]]) -> None:
        """The StopReplicas a deletion's answer waits for (none unless ``stop_replicas``)."""
        if self.waits_for_stops:
            self.stops = set(stops)

    def ack(self, response: ControlResponse, broker_id: int) -> None:
        """The channel's callback for an answer of ``broker_id``."""
        error = answer_error(response)
        if error != ErrorCode.NONE:
            self.rejected[broker_id] = error.name
            return
        self.pending.discard(broker_id)
        self._check()

    def stop_done(self, topic: str, broker_id: int) -> None:
        self.stops.discard((topic, broker_id))
        self._check()

    def topic_done(self, topic: str) -> None:
        self.stops = {s for s in self.stops if s[0] != topic}
        self._check()

    def why_not(self) -> str:
        """What held the barrier (for a REQUEST_TIMED_OUT message)."""
        refused = {b: e for b, e in self.rejected.items() if b in self.pending}
        if refused:
            return "rejected by " + ", ".join(
                f"broker {b} ({e})" for b, e in sorted(refused.items())
            )
        return "no answer from broker(s) " + ", ".join(map(str, sorted(self.pending)))

    def broker_gone(self, broker_id: int) -> None:
        self.pending.discard(broker_id)
        self.stops = {s for s in self.stops if s[1] != broker_id}
        self._check()

    def _check(self) -> None:
        if not self.pending and not self.stops and not self.done.done():
            self.done.set_result(None)
            self._registry.discard(self)

    async def wait(self, timeout_s: float) -> bool:
        """Whether the barrier is done within ``timeout_s``, and the answer may then leave: a
        controller that may have been deposed meanwhile (its lease ran out) holds it until it
        renews the lease or resigns, which closes the connection unanswered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self.done)
        except TimeoutError:
            self._registry.discard(self)
            return False
        registry = self._registry
        while True:
            if not isinstance(registry, BarrierRegistry) or registry.may_answer():
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_HOLD_POLL_S)
