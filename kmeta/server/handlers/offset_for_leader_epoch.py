"""OffsetForLeaderEpoch (api key 23): versions 0-4, client and control listeners.

Kafka 3.9 semantics (``KafkaApis.handleOffsetForLeaderEpochRequest``,
``ReplicaManager.lastOffsetForLeaderEpoch``, ``Partition.lastOffsetForLeaderEpoch``):

* Authorization (with an authorizer): CLUSTER_ACTION on the cluster (a follower's truncation
  check) covers every topic; without it each topic needs DESCRIBE (a consumer's truncation
  check, KIP-320), else its partitions answer TOPIC_AUTHORIZATION_FAILED. ``replica_id`` (v3+)
  plays no part in that, as in Kafka.
* A partition this broker holds no replica of: NOT_LEADER_OR_FOLLOWER if the metadata knows
  it, else UNKNOWN_TOPIC_OR_PARTITION. ``current_leader_epoch`` (v2+, -1: none) against the
  replica's: older FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; then a follower answers
  NOT_LEADER_OR_FOLLOWER (only the leader answers, whoever asks).
* Else the leader-epoch cache's answer (``LeaderEpochFileCache.endOffsetFor`` against the log
  end, :meth:`kmeta.log.PartitionLog.end_offset_for_epoch`): the largest epoch at or below
  the requested one and the offset where the next epoch starts (the log end for the latest
  epoch); for an epoch below the first entry, that epoch and the first entry's start offset;
  -1 / -1 when the cache knows nothing to say (it is empty, or the epoch asked is -1).
* Errors carry leader epoch -1 and end offset -1.

Versions: v1 leader epoch in the answer; v2 current leader epoch and throttle time; v3
replica id (-1 a consumer, -2 by default, else a broker); v4 flexible.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import offset_for_leader_epoch as ofle
from kmeta.server.replica.partition_lookup import local_partition
from kmeta.server.state import BrokerContext, BrokerRegistry


def handle(ctx: BrokerContext, request: ofle.OffsetForLeaderEpochRequest) -> ofle.OffsetForLeaderEpochResponse:
    replica = cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    answered = []
    denied = []
    for t in request.topics:
        if replica or allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic):
            answered.append(ofle.OffsetForLeaderTopicResult(t.topic, tuple(_partition(ctx, t.topic, p) for p in t.partitions)))
        else:
            denied.append(
                ofle.OffsetForLeaderTopicResult(
                    t.topic,
                    tuple(
                        ofle.EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition)
                        for p in t.partitions
                    ),
                )
            )
    return ofle.OffsetForLeaderEpochResponse(version=request.version, topics=tuple(answered + denied))


def _partition(ctx: BrokerContext, topic: str, p: ofle.OffsetForLeaderPartition) -> ofle.EpochEndOffset:
    found = local_partition(ctx.state.replica_manager, topic, p.partition, p.current_leader_epoch, require_leader=True)
    if isinstance(found, ErrorCode):
        return ofle.EpochEndOffset(error_code=found, partition=p.partition)
    epoch, end = found.log.end_offset_for_epoch(p.leader_epoch)
    if end == -1:  # (UnifiedLog.endOffsetForEpoch: None, answered as the defaults)
        return ofle.EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition)
    return ofle.EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end)


def register(registry: BrokerRegistry) -> None:
    registry.register(ofle.API, handle)
