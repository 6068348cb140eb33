"""Broker-side transaction verification (KIP-890 part 1, Kafka's ``AddPartitionsToTxnManager``):
before a partition's leader appends a transaction's first batch, it asks the transaction's
coordinator whether the producer added that partition to its ongoing transaction, so a
late or stray batch cannot open a transaction the coordinator will never end (a hanging
transaction that would hold the last stable offset back).

The coordinator is asked in memory when it is this broker, else with AddPartitionsToTxn
v4+ ``verify_only`` over the :class:`~kmeta.server.txn.channel.BrokerChannel`. As Kafka maps
the answers for Produce: the coordinator not found, moving or loading, or a transaction
completing (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
CONCURRENT_TRANSACTIONS, a lost connection) are NOT_ENOUGH_REPLICAS, which the producer
retries; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; the others (INVALID_TXN_STATE: not in the
transaction; INVALID_PRODUCER_ID_MAPPING) as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import add_partitions_to_txn as ap
from kmeta.server.to_controller.controller_connection import NET_ERRORS
from kmeta.server.txn.completion import TRANSACTION_STATE_TOPIC
from kmeta.server.txn.coordinator import TransactionCoordinator
from kmeta.server.txn.metadata import TopicPartition

log = logging.getLogger("kmeta.server.txn.verification")

_RETRIABLE = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
})  # fmt: skip


def _for_produce(error: ErrorCode) -> ErrorCode:
    if error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


async def verify_transaction(
    coordinator: TransactionCoordinator, broker_id: int, transactional_id: str, producer_id: int,
    producer_epoch: int, partitions: Sequence[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
    """Per partition: NONE when it is in the producer's ongoing transaction, else the error
    Produce answers."""
    errors = await _ask(coordinator, broker_id, transactional_id, producer_id, producer_epoch, partitions)
    return {tp: _for_produce(errors.get(tp, ErrorCode.INVALID_TXN_STATE)) for tp in partitions}


async def _ask(
    coordinator: TransactionCoordinator, broker_id: int, transactional_id: str, producer_id: int,
    producer_epoch: int, partitions: Sequence[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
    runtime = coordinator.runtime
    index = runtime.partition_for(transactional_id)
    shard, error = runtime.shard_or_error(index)
    if shard is not None or error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        found = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return found if isinstance(found, dict) else dict.fromkeys(partitions, found)
    state = coordinator.channel.cache.snapshot.partition(TRANSACTION_STATE_TOPIC, index)
    if state is None or state.leader < 0 or state.leader == broker_id:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    txn = ap.AddPartitionsToTxnTransaction(
        transactional_id, producer_id, producer_epoch, True,
        tuple(ap.AddPartitionsToTxnTopic(t, tuple(ps)) for t, ps in topics.items()),
    )  # fmt: skip
    try:
        answer = await coordinator.channel.send(
            state.leader, ApiKey.ADD_PARTITIONS_TO_TXN,
            lambda v: ap.AddPartitionsToTxnRequest(version=max(v, 4), transactions=(txn,)),
        )  # fmt: skip
    except NET_ERRORS as exc:
        log.debug("verifying %s with broker %d: %r", transactional_id, state.leader, exc)
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if answer.error_code != ErrorCode.NONE:
        return dict.fromkeys(partitions, _code(answer.error_code))
    return {
        (t.name, p.partition_index): _code(p.partition_error_code)
        for result in answer.results_by_transaction
        for t in result.topic_results
        for p in t.results_by_partition
    }


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
