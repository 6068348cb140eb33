"""TopicDeletionManager: Kafka's (ZooKeeper-mode) topic deletion, without logs to delete.

A deletion (DeleteTopics, or a restart that finds topics marked for deletion) goes:

1. the topics are marked for deletion in the store (the ``deleting`` flag, Kafka's
   /admin/delete_topics), so a restarted controller resumes them;
2. every live broker gets UpdateMetadata with leader -2 (LeaderDuringDelete) for their
   partitions, so Metadata stops showing them, then every replica StopReplica(delete);
3. each successful StopReplica answer is a ``TopicDeletionStopReplicaResponseReceived``
   event; once every replica of every partition of a topic answered, the topic is removed
   from the state and the store.

While marked, the topic exists for the controller only: CreateTopics of the name answers
TOPIC_ALREADY_EXISTS "marked for deletion", DeleteTopics UNKNOWN_TOPIC_OR_PARTITION, and no
election, ISR change or LeaderAndIsr touches it.

A replica on a dead broker (Kafka: ReplicaDeletionIneligible) keeps the topic marked: its
StopReplica goes out when the broker registers again (or when a fault that dropped requests
to it clears), and the deletion then completes. A StopReplica answered with an error is
treated the same way (retried on the broker's next registration or the next controller start).
The DeleteTopics answer waits for the live brokers only (as Kafka's, which waits for the
metadata caches): with a replica down it returns while the topic is still marked.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.channel_manager import ControlResponse
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.store.cluster_store import STORE_RETRY_S
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.messages.stop_replica import StopReplicaResponse

log = logging.getLogger(__name__)

#: (topic, broker) pairs whose StopReplica completed, and topics removed, by one event
_Done = tuple[list[tuple[str, int]], list[str]]


class TopicDeletionManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        #: topic -> broker -> partitions whose StopReplica(delete) is not acknowledged yet
        self.pending: dict[str, dict[int, set[int]]] = {}
        #: topics whose refused removal is to be retried (one retry scheduled at a time)
        self._retrying: set[str] = set()

    # -- starting and resuming ----------------------------------------------------------------
    def start(self, names: list[str], barrier: Barrier | None) -> list[int]:
        """Mark ``names`` (inside the caller's event), send leader -2 and StopReplica.

        Returns the brokers the UpdateMetadata went to."""
        c = self.host
        unmarked = [n for n in names if n not in c.state.deleting]  # (resume: marked already)
        if unmarked:
            with c.store.transaction():
                for name in unmarked:
                    c.state.deleting.add(name)
                    c.store.put_topic(c.state.topics[name], deleting=True)
        tps: list[TopicPartitionKey] = []
        for name in names:
            by_broker: dict[int, set[int]] = {}
            for p, st in c.state.topics[name].partitions.items():
                tps.append((name, p))
                for r in st.replicas:
                    by_broker.setdefault(r, set()).add(p)
            self.pending[name] = by_broker
        stops = self.stops_for(names)
        if barrier is not None:  # (barrier off: the forwarder's UM ack only, no stops)
            barrier.expect_stops((tp[0], bs[0]) for bs, tp, _ in stops if c.reachable(bs[0]))
        targets = c.send(
            ControllerRequests(
                update_metadata_to=c.state.live_broker_ids(),
                update_metadata_partitions=tps,
                stop_replica=stops,
            ),
            barrier=barrier,
            stop_callback=self.stop_replica_answered,
        )
        # topics without partitions (or replicas) are done at once
        self._finish([n for n in names if not self.pending.get(n)])
        return targets

    def resume(self) -> None:
        """Controller start: topics still marked are deleted again from the beginning."""
        names = sorted(self.host.state.deleting)
        if names:
            log.info("resuming the deletion of %d topic(s)", len(names))
            self.start(names, None)

    def stops_for(
        self, names: Iterable[str] | None = None, broker_id: int | None = None
    ) -> list[tuple[list[int], TopicPartitionKey, bool]]:
        """The StopReplica(delete) still due, for ``names`` (all) and ``broker_id`` (all)."""
        out: list[tuple[list[int], TopicPartitionKey, bool]] = []
        for name in self.pending if names is None else names:
            for b, parts in self.pending.get(name, {}).items():
                if broker_id is None or b == broker_id:
                    out += [([b], (name, p), True) for p in sorted(parts)]
        return out

    def resume_for(self, broker_id: int) -> None:
        """``broker_id`` registered again: the StopReplica(delete) that waited for it go out
        (Kafka: resumeDeletionForTopics)."""
        self.host.send(
            ControllerRequests(stop_replica=self.stops_for(broker_id=broker_id)),
            stop_callback=self.stop_replica_answered,
        )

    # -- answers ------------------------------------------------------------------------------
    def stop_replica_answered(self, response: ControlResponse, broker_id: int) -> None:
        """Channel callback (outside any event): count the answer in an event of its own."""
        assert isinstance(response, StopReplicaResponse)  # (the answer to a StopReplica)
        c = self.host
        fn = functools.partial(self._on_answer, broker_id, response)
        c.enqueue("TopicDeletionStopReplicaResponseReceived", fn).add_done_callback(self._committed)

    def _on_answer(self, broker_id: int, response: StopReplicaResponse) -> _Done:
        if response.error_code != 0:
            log.warning(
                "broker %d refused StopReplica (error %d); retried when it registers again",
                broker_id,
                response.error_code,
            )
            return [], []
        touched: set[str] = set()
        for e in response.partition_errors:
            by_broker = self.pending.get(e.topic_name)
            if by_broker is None:
                continue
            touched.add(e.topic_name)
            parts = by_broker.get(broker_id)
            if parts is None:  # done already (this event runs again after a refused commit)
                continue
            if e.error_code != 0:
                log.warning(
                    "broker %d: StopReplica %s-%d failed with %d",
                    broker_id,
                    e.topic_name,
                    e.partition_index,
                    e.error_code,
                )
                continue
            parts.discard(e.partition_index)
        done: list[tuple[str, int]] = []
        for name in sorted(touched):
            by_broker = self.pending[name]
            if not by_broker.get(broker_id, ()):
                by_broker.pop(broker_id, None)
                done.append((name, broker_id))
        finished = [n for n in sorted(touched) if not self.pending[n]]
        self._finish(finished)
        return done, finished

    def _committed(self, future: asyncio.Future[_Done]) -> None:
        """After the event's commit: release the DeleteTopics answers waiting on it."""
        if future.cancelled() or future.exception() is not None:
            return
        done, finished = future.result()
        for barrier in [b for b in list(self.host.barriers) if b.waits_for_stops]:
            for name, broker_id in done:
                barrier.stop_done(name, broker_id)
            for name in finished:
                barrier.topic_done(name)

    def reloaded(self) -> None:
        """The controller reloaded its state after a refused commit: deletions that were not
        kept are forgotten; a removal that was not kept (every replica had answered) is
        retried after STORE_RETRY_S. The acknowledgements counted stay: they happened."""
        deleting = self.host.state.deleting
        for name in [n for n in self.pending if n not in deleting]:
            del self.pending[name]
        unfinished = sorted(
            n for n in deleting if not self.pending.get(n) and n not in self._retrying
        )
        if unfinished:
            for name in unfinished:
                self.pending[name] = {}
            self._retrying.update(unfinished)
            retry = functools.partial(self._retry_finish, unfinished)
            asyncio.get_running_loop().call_later(STORE_RETRY_S, retry)

    def _retry_finish(self, names: list[str]) -> None:
        c = self.host
        self._retrying.difference_update(names)

        def finish() -> _Done:
            done = [n for n in names if n in c.state.deleting and not self.pending.get(n)]
            self._finish(done)
            return [], done

        c.enqueue("TopicDeletionRetry", finish).add_done_callback(self._committed)

    def _finish(self, names: list[str]) -> None:
        """Every replica answered: the topics go from the state and the store."""
        if not names:
            return
        c = self.host
        with c.store.transaction():
            for name in names:
                c.store.delete_topic(name)
        for name in names:
            c.state.topics.pop(name, None)
            c.state.deleting.discard(name)
            self.pending.pop(name, None)
        log.info("deleted topic(s) %s", ", ".join(names))
