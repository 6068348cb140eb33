"""The log APIs' one lookup (ListOffsets, OffsetForLeaderEpoch, DeleteRecords): a replica held
here, checked as Kafka's ``Partition.localLogWithEpochOrThrow`` checks it.

A thin layer over :meth:`kmeta.server.replica.replica_manager.ReplicaManager.get_partition_or_error`
(no replica here: NOT_LEADER_OR_FOLLOWER when the metadata knows the partition, else
UNKNOWN_TOPIC_OR_PARTITION; a log that will not open: KAFKA_STORAGE_ERROR) and
:meth:`kmeta.server.replica.partition.Partition.check_local_log` (the current leader epoch first,
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, then the role when a leader is required).
"""

from __future__ import annotations

from kmeta.protocol.errors import ErrorCode
from kmeta.server.replica.partition import Partition
from kmeta.server.replica.replica_manager import ReplicaManager

#: the replica id of a consumer's request (ListOffsets, Fetch, OffsetForLeaderEpoch)
CONSUMER_REPLICA_ID = -1


def local_partition(
    rm: ReplicaManager, topic: str, index: int, current_leader_epoch: int, *, require_leader: bool
) -> Partition | ErrorCode:
    """The replica of ``topic``-``index`` held here, or the error Kafka answers for it."""
    partition, error = rm.get_partition_or_error(topic, index)
    if partition is None:
        return error
    error = partition.check_local_log(current_leader_epoch, require_leader)
    return partition if error == ErrorCode.NONE else error
