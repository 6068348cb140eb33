"""DescribeTransactions (api key 65): version 0, client listeners; the state of the
transactional ids this broker coordinates (Kafka's ``handleDescribeTransactionsRequest`` and
``TransactionCoordinator.handleDescribeTransactions``).

Per transactional id: DESCRIBE on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; not this
broker's: NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its partition loads); unknown:
TRANSACTIONAL_ID_NOT_FOUND; else its state name, timeout, start time (-1 when none), producer
id and epoch, and the partitions in the transaction, those of topics the principal may not
DESCRIBE left out.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_transactions as dt
from kmeta.server.state import BrokerContext, BrokerRegistry


def handle(ctx: BrokerContext, request: dt.DescribeTransactionsRequest) -> dt.DescribeTransactionsResponse:
    coordinator = ctx.state.txn_coordinator
    states = []
    for txn_id in dict.fromkeys(request.transactional_ids):
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            states.append(dt.TransactionState(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_id))
            continue
        _, shard, error = coordinator.lookup(txn_id)
        metadata = None if shard is None else shard.transactions.get(txn_id)
        if shard is None or metadata is None:
            states.append(dt.TransactionState(error if shard is None else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, txn_id))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        topics = tuple(
            dt.TopicData(topic, tuple(parts))
            for topic, parts in by_topic.items()
            if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        )
        states.append(
            dt.TransactionState(
                ErrorCode.NONE, txn_id, metadata.state.state_name, metadata.txn_timeout_ms,
                metadata.txn_start_timestamp_ms, metadata.producer_id, metadata.producer_epoch, topics,
            )
        )  # fmt: skip
    return dt.DescribeTransactionsResponse(version=request.version, transaction_states=tuple(states))


def register(registry: BrokerRegistry) -> None:
    registry.register(dt.API, handle, on_control=False)
