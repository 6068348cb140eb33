"""ListOffsets on one log (Kafka's ``UnifiedLog.fetchOffsetByTimestamp``): the special targets
answered from the offsets and the leader-epoch cache, a timestamp by a search of the
segments' time index and then the records of one batch (:mod:`kmeta.log.record.records`)."""

from __future__ import annotations

from kmeta.log.epoch_cache import LeaderEpochFileCache
from kmeta.log.local_log import LocalLog
from kmeta.log.record.batch import NO_EPOCH, NO_TIMESTAMP

#: ListOffsets' special targets (ListOffsetsRequest)
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP = -4, -5


def fetch_offset_by_timestamp(
    timestamp: int, local: LocalLog, epochs: LeaderEpochFileCache, log_start_offset: int
) -> tuple[int, int, int] | None:
    """``(offset, timestamp, leader epoch)``, -1 where unknown, for a target: -2 earliest and
    -4 earliest local (the same without tiered storage) the log start, with the first epoch
    if it starts there; -1 latest the log end with the latest epoch; -5 latest tiered
    (-1: nothing is tiered); -3 the first record holding the largest timestamp (KIP-734);
    >= 0 the first record at or after it. None when there is no such record."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        first = epochs.earliest_entry()
        known = first is not None and first.start_offset <= log_start_offset
        return log_start_offset, NO_TIMESTAMP, first.epoch if first and known else NO_EPOCH
    if timestamp == LATEST_TIMESTAMP:
        latest = epochs.latest_epoch
        return local.log_end_offset, NO_TIMESTAMP, NO_EPOCH if latest is None else latest
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return -1, NO_TIMESTAMP, NO_EPOCH
    if timestamp == MAX_TIMESTAMP:
        top = max(local.segments, key=lambda s: s.max_timestamp)
        if top.size == 0:
            return None
        return top.find_offset_by_timestamp(top.max_timestamp, log_start_offset)
    if timestamp < 0:
        return None
    for segment in local.segments:
        if segment.max_timestamp >= timestamp:
            found = segment.find_offset_by_timestamp(timestamp, log_start_offset)
            if found is not None:
                return found
    return None
