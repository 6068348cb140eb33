"""TransactionMarkerSender: the coordinator writes a transaction's COMMIT or ABORT markers to
every partition it touched (Kafka's ``TransactionMarkerChannelManager``), with WriteTxnMarkers
to each partition's leader.

The requests go over the coordinator's :class:`~kmeta.server.txn.channel.BrokerChannel` (the
leaders' control listener; WriteTxnMarkers needs CLUSTER_ACTION), shared by the transactions
completing at once.

Per partition, as ``TransactionMarkerRequestCompletionHandler`` decides:

* NONE: written.
* A partition whose topic is gone from the metadata: dropped (nothing to mark).
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost connection, a leader not known yet: sent
  again after a backoff to whoever leads it then.
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: this coordinator was superseded (a
  newer epoch of the producer, or of the coordinator, wrote there): sending stops and the
  transaction is not completed here (its new coordinator completes it).

Sending also stops when ``still_owner()`` says this broker no longer coordinates the
transaction (its __transaction_state partition moved): the new leader resends on load.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import write_txn_markers as wtm
from kmeta.server.to_controller.controller_connection import NET_ERRORS
from kmeta.server.txn.channel import BrokerChannel

log = logging.getLogger("kmeta.server.txn.markers")

TopicPartition = tuple[str, int]
#: retry.backoff.ms for markers that could not be written yet
RETRY_BACKOFF_S = 0.1
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})  # fmt: skip
_SUPERSEDED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


class TransactionMarkerSender:
    def __init__(self, channel: BrokerChannel) -> None:
        self.channel = channel
        self.cache = channel.cache
        #: markers written (partitions), for status and tests
        self.written = 0

    async def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        partitions: Iterable[TopicPartition], still_owner: Callable[[], bool],
    ) -> bool:  # fmt: skip
        """Write the markers to every partition; True when all are written (or their topics
        gone), False when sending stopped (superseded, or no longer the coordinator)."""
        left = set(partitions)
        while left:
            if not still_owner():
                return False
            snap = self.cache.snapshot
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(left):
                state = snap.partition(*tp)
                if state is None:
                    if snap.partition_count(tp[0]) == 0:
                        left.discard(tp)  # (the topic was deleted: nothing to mark)
                    continue
                if state.leader >= 0:
                    by_leader.setdefault(state.leader, []).append(tp)
            answers = await asyncio.gather(*(
                self._send(broker, producer_id, producer_epoch, commit, coordinator_epoch, tps)
                for broker, tps in by_leader.items()
            ))  # fmt: skip
            for results in answers:
                for tp, error in results.items():
                    if error == ErrorCode.NONE:
                        left.discard(tp)
                        self.written += 1
                    elif error in _SUPERSEDED:
                        log.info("markers of producer %d stopped at %s: %s", producer_id, tp, error.name)
                        return False
                    elif error not in _RETRIABLE:
                        log.warning("marker of producer %d to %s: %s; retrying", producer_id, tp, error.name)
            if left:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    async def _send(
        self, broker: int, producer_id: int, producer_epoch: int, commit: bool,
        coordinator_epoch: int, tps: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        marker = wtm.WritableTxnMarker(
            producer_id, producer_epoch, commit,
            tuple(wtm.WritableTxnMarkerTopic(t, tuple(ps)) for t, ps in topics.items()),
            coordinator_epoch,
        )  # fmt: skip
        try:
            answer = await self.channel.send(
                broker, ApiKey.WRITE_TXN_MARKERS, lambda v: wtm.WriteTxnMarkersRequest(version=v, markers=(marker,))
            )
        except NET_ERRORS as exc:
            log.debug("WriteTxnMarkers to broker %d: %r; retrying", broker, exc)
            return {}
        out: dict[TopicPartition, ErrorCode] = {}
        for result in answer.markers:
            for answered in result.topics:
                for p in answered.partitions:
                    try:
                        out[(answered.name, p.partition_index)] = ErrorCode(p.error_code)
                    except ValueError:
                        out[(answered.name, p.partition_index)] = ErrorCode.UNKNOWN_SERVER_ERROR
        return out
