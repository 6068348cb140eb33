"""One partition's side of a follower's fetching: where it stands (Kafka's
``PartitionFetchState``) and what the leader's answers do to its log (``ReplicaFetcherThread``'s
``processPartitionData`` and its truncations): the records appended as the leader sent them,
the high watermark and the log start following the leader's, the log cut where an epoch ends.

Apart from :mod:`kmeta.server.fetcher.replica_fetcher`, whose loop asks the leader and decides when
(retries, back-off, a partition replaced while a request was out): these functions are
called with a partition already known current, and do not wait. The log lines keep the
fetcher's logger, as they did when they were part of it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kmeta.log.errors import LogError
from kmeta.protocol.messages import fetch as fe
from kmeta.server.fetcher.follower_truncation import truncation_offset

if TYPE_CHECKING:
    from kmeta.server.replica.partition import Partition

#: the fetcher's logger: these lines are the fetcher's, where operators look
log = logging.getLogger("kmeta.server.replica_fetcher")


@dataclass(slots=True)
class PartitionFetchState:
    """Where a partition's fetching stands (Kafka's ``PartitionFetchState``)."""

    fetch_offset: int
    current_leader_epoch: int
    truncating: bool
    topic_id: uuid.UUID | None
    #: monotonic time before which the partition is not fetched (after an error)
    delayed_until: float = 0.0


def process_partition_data(
    partition: Partition, state: PartitionFetchState, leader_id: int, offset: int,
    data: fe.PartitionData,
) -> bool:  # fmt: skip
    """A partition's error-free answer to the Fetch asked at ``offset``: a diverging epoch
    truncates (KIP-595's truncation on fetch); else the records are appended as they are, the
    high watermark becomes min(leader's, our log end) and the log start follows the leader's.
    False when the log refused what the leader sent (said in the log; the caller backs off)."""
    plog = partition.log
    diverging = data.diverging_epoch
    if diverging is not None and diverging.epoch >= 0:
        apply_truncation(partition, state, leader_id, diverging.epoch, diverging.end_offset)
        return True
    records = data.records
    try:
        if records:
            plog.append_as_follower(records)
        plog.update_high_watermark(min(data.high_watermark, plog.log_end_offset))
        start = data.log_start_offset
        if plog.log_start_offset < start <= plog.high_watermark:
            plog.delete_records_before(start)
    except LogError as exc:
        log.error(
            "%s: cannot append what leader %d sent at %d: %s", partition, leader_id, offset, exc
        )
        return False
    state.fetch_offset = plog.log_end_offset
    return True


def truncate_to_leader_end(
    partition: Partition, state: PartitionFetchState, leader_id: int, leader_end: int
) -> None:
    """Out of range, the leader's log ending below ours (an unclean election): ours is cut
    there (``ReplicaFetcherThread.truncate``) and fetched from its end."""
    plog = partition.log
    log.warning("%s: leader %d's log ends at %d, below ours (%d): truncating",
                partition, leader_id, leader_end, plog.log_end_offset)  # fmt: skip
    plog.truncate_to(leader_end)
    state.fetch_offset = plog.log_end_offset


def start_at_leader_start(
    partition: Partition, state: PartitionFetchState, leader_id: int, leader_start: int
) -> None:
    """Out of range, not behind the leader's log end: a log ending below the leader's log
    start starts afresh there (``truncateFullyAndStartAt``); fetched from its end."""
    plog = partition.log
    if leader_start > plog.log_end_offset:
        log.info("%s: starting at leader %d's log start %d", partition, leader_id, leader_start)
        plog.truncate_fully_and_start_at(leader_start)
    state.fetch_offset = plog.log_end_offset


def apply_truncation(
    partition: Partition,
    state: PartitionFetchState,
    leader_id: int,
    leader_epoch: int,
    end_offset: int,
) -> None:
    """Cut the log where the leader's answer says (:func:`truncation_offset`); fetch from
    its end then, or, not completed, ask again with our latest epoch."""
    offset, completed = truncation_offset(
        partition.log, leader_epoch, end_offset, state.fetch_offset
    )
    if offset < partition.log.log_end_offset:
        log.info("truncating %s to %d (leader %d's epoch %d ends at %d)",
                 partition, offset, leader_id, leader_epoch, end_offset)  # fmt: skip
    partition.log.truncate_to(offset)
    if completed:
        start_fetching(partition, state)
    else:
        state.fetch_offset = partition.log.log_end_offset
        state.truncating = True


def start_fetching(partition: Partition, state: PartitionFetchState) -> None:
    state.fetch_offset = partition.log.log_end_offset
    state.truncating = False
