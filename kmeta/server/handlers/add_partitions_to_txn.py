"""AddPartitionsToTxn (api key 24): versions 0-5, client and control listeners; answered by the
transaction coordinator (:mod:`kmeta.server.txn.coordinator`).

Behaviour (Kafka's ``KafkaApis.handleAddPartitionsToTxnRequest``):

* v4+ are brokers' requests (KIP-890, batched): CLUSTER_ACTION, else the top-level
  CLUSTER_AUTHORIZATION_FAILED. v0-3 are clients': WRITE on the TransactionalId, else every
  partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
* Per transaction: a topic without WRITE is TOPIC_AUTHORIZATION_FAILED, a partition the
  metadata does not know UNKNOWN_TOPIC_OR_PARTITION, and then the others OPERATION_NOT_ATTEMPTED.
* Else the coordinator adds them (one error for every partition: NONE, NOT_COORDINATOR,
  CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, ...); a v4+
  transaction with ``verify_only`` is only checked: per partition NONE when it is in the
  ongoing transaction, else INVALID_TXN_STATE.

Versions: v1 same as v0; v2 adds PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH);
v3 flexible; v4 batched with verify_only and a top-level error; v5 TRANSACTION_ABORTABLE
(never answered here).
"""

from __future__ import annotations

from collections.abc import Sequence

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import add_partitions_to_txn as ap
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.txn.errors import fenced_for

TopicPartition = tuple[str, int]


async def handle(ctx: BrokerContext, request: ap.AddPartitionsToTxnRequest) -> ap.AddPartitionsToTxnResponse:
    version = request.version
    if version >= 4:
        if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
            return ap.AddPartitionsToTxnResponse(version=version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results = []
        for txn in request.transactions:
            errors = await _transaction(
                ctx, version, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only
            )
            results.append(ap.AddPartitionsToTxnResult(txn.transactional_id, _topic_results(errors)))
        return ap.AddPartitionsToTxnResponse(version=version, results_by_transaction=tuple(results))
    txn_id = request.v3_and_below_transactional_id
    wanted = _partitions(request.v3_and_below_topics)
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        errors = await _transaction(
            ctx, version, txn_id, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
            request.v3_and_below_topics, False,
        )  # fmt: skip
    return ap.AddPartitionsToTxnResponse(version=version, results_by_topic_v3_and_below=_topic_results(errors))


def _partitions(topics: Sequence[ap.AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


async def _transaction(
    ctx: BrokerContext, version: int, txn_id: str, producer_id: int, producer_epoch: int,
    topics: Sequence[ap.AddPartitionsToTxnTopic], verify_only: bool,
) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
    wanted = _partitions(topics)
    snap = ctx.state.cache.snapshot
    refused: dict[TopicPartition, ErrorCode] = {}
    may_write: dict[str, bool] = {}
    for tp in wanted:
        topic = tp[0]
        if topic not in may_write:
            may_write[topic] = allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic)
        if not may_write[topic]:
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif snap.partition(*tp) is None:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    coordinator = ctx.state.txn_coordinator
    if verify_only:
        verified = coordinator.verify_partitions(txn_id, producer_id, producer_epoch, wanted)
        if isinstance(verified, dict):
            return verified
        return dict.fromkeys(wanted, verified)
    error = await coordinator.add_partitions(txn_id, producer_id, producer_epoch, wanted)
    return dict.fromkeys(wanted, fenced_for(error, version, 2))


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> tuple[ap.AddPartitionsToTxnTopicResult, ...]:
    by_topic: dict[str, list[ap.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(ap.AddPartitionsToTxnPartitionResult(partition, error))
    return tuple(ap.AddPartitionsToTxnTopicResult(t, tuple(ps)) for t, ps in by_topic.items())


def register(registry: BrokerRegistry) -> None:
    # (v4+ come from brokers verifying a transaction, over the inter-broker control listener)
    registry.register(ap.API, handle)
