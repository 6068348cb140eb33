"""Where a follower cuts its log after the leader said where an epoch ends (Kafka's
``AbstractFetcherThread.getOffsetTruncationState``), from OffsetForLeaderEpoch or a Fetch's
diverging epoch. Pure: the log is read, never changed here.
"""

from __future__ import annotations

from kmeta.log.partition_log import PartitionLog

UNDEFINED = -1


def truncation_offset(log: PartitionLog, leader_epoch: int, leader_end_offset: int, fetch_offset: int) -> tuple[int, bool]:
    """``(offset to truncate to, truncation completed)`` given the leader's answer for our
    latest epoch: its largest epoch at or below it and where that epoch ends there.

    * The leader knows no such epoch (end offset -1): to our high watermark, what the
      leader acknowledged, as Kafka's follower does when the leader cannot say.
    * The leader named no epoch: to its end offset (never above our log end).
    * We hold no entry at or below the leader's epoch: to the leader's end offset.
    * We hold an older epoch than the one the leader named: to our end of that epoch, not
      completed (ask again with our epoch now latest).
    * Same epoch: to the smaller of the two ends of it (and of our log end)."""
    end = log.log_end_offset
    if leader_end_offset == UNDEFINED:
        return min(log.high_watermark, end, fetch_offset), True
    if leader_epoch == UNDEFINED:
        return min(leader_end_offset, end), True
    ours = log.end_offset_for_epoch(leader_epoch)
    if ours.end_offset == UNDEFINED:
        return min(leader_end_offset, end), True
    if ours.leader_epoch != leader_epoch:
        return min(ours.end_offset, end), False
    return min(ours.end_offset, leader_end_offset, end), True
