"""DescribeProducers (api key 61): version 0, client and control listeners.

Behaviour (Kafka 3.x ``KafkaApis.handleDescribeProducersRequest`` and
``ReplicaManager.activeProducerState``), per partition in the request's order:

* Without READ on the topic (with an authorizer): TOPIC_AUTHORIZATION_FAILED.
* A partition the MetadataCache does not hold: UNKNOWN_TOPIC_OR_PARTITION.
* A partition this broker holds no replica of: NOT_LEADER_OR_FOLLOWER (the replica manager's
  ``getPartitionOrError``); a replica held here, leader or follower, answers from its log.
* Else the producers the partition's producer state knows (:mod:`kmeta.log.producer.producer_state`):
  id, epoch, last sequence (-1 when its epoch has no batch yet), last timestamp, the
  coordinator epoch of its last marker, and the first offset of its open transaction (-1).
"""

from __future__ import annotations

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_producers as dp
from kmeta.server.replica.replica_manager import ReplicaManager
from kmeta.server.state import BrokerContext, BrokerRegistry


def _partition(rm: ReplicaManager, snap: MetadataSnapshot, topic: str, index: int, readable: bool) -> dp.PartitionResponse:
    if not readable:
        return dp.PartitionResponse(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if snap.partition(topic, index) is None:
        return dp.PartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    partition, error = rm.get_partition_or_error(topic, index)
    if partition is None:
        return dp.PartitionResponse(index, error)
    producers = tuple(
        dp.ProducerState(
            producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
            last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
            current_txn_start_offset=e.current_txn_first_offset,
        )
        for e in partition.log.producer_state.producers.values()
    )  # fmt: skip
    return dp.PartitionResponse(index, ErrorCode.NONE, None, producers)


def handle(ctx: BrokerContext, request: dp.DescribeProducersRequest) -> dp.DescribeProducersResponse:
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    rm: ReplicaManager = ctx.state.replica_manager
    topics = []
    for t in request.topics:
        readable = allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
        parts = tuple(_partition(rm, snap, t.name, i, readable) for i in t.partition_indexes)
        topics.append(dp.TopicResponse(t.name, parts))
    return dp.DescribeProducersResponse(version=request.version, topics=tuple(topics))


def register(registry: BrokerRegistry) -> None:
    registry.register(dp.API, handle)
