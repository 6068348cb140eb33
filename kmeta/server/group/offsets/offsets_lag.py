"""Consumer lag of the groups this broker coordinates, for its Prometheus metrics.

Per committed offset of a group whose ``__consumer_offsets`` partition this broker leads:
``lag = log end - committed`` (never below 0), where the log end is the partition's high
watermark — what a read_uncommitted consumer can reach, the offset ListOffsets LATEST answers
and kafka-consumer-groups.sh's LOG-END-OFFSET — read from this broker's own replica.

Why the local replica and not a ListOffsets to each leader: a scrape then costs a dictionary
walk and no request, so it can neither stall nor fail on another broker; and it is exact where
this broker leads the partition, and behind by at most one fetch round where it follows (a
follower's high watermark trails the leader's), so lag is never overstated. A partition this
broker holds no replica of has no series: it is counted in
``kmeta_broker_group_lag_unknown_partitions`` (with replication factor = brokers, as
``__consumer_offsets`` defaults to, every broker holds every partition of small clusters).
A partition the metadata no longer has (its topic deleted: the coordinator is writing the
tombstones of its offsets) has neither: its lag means nothing any more.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmeta.server.group.offsets.offsets_api import groups_runtime_of
from kmeta.server.group.offsets.offsets_groups import offsets_of
from kmeta.server.state import BrokerState


@dataclass(frozen=True, slots=True)
class GroupLag:
    group: str
    topic: str
    partition: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(0, self.log_end - self.committed)


def group_lags(state: BrokerState) -> tuple[list[GroupLag], int]:
    """Every committed offset of the groups coordinated here with its log end, and how many
    had no local replica to read the log end from."""
    runtime = groups_runtime_of(state)
    rm = state.replica_manager
    snap = state.cache.snapshot
    lags: list[GroupLag] = []
    unknown = 0
    for index in runtime.led_partitions():
        shard, _ = runtime.shard_or_error(index)
        if shard is None:
            continue
        for group, topic, partition, offset in offsets_of(shard).offsets.items():
            if snap.partition(topic, partition) is None:
                continue  # (deleted: see the module docstring)
            replica, _ = rm.get_partition_or_error(topic, partition)
            if replica is None:
                unknown += 1
                continue
            lags.append(GroupLag(group, topic, partition, offset.committed_offset, replica.log.high_watermark))
    return lags, unknown

