"""One producer's state in one partition log (Kafka's ``ProducerStateEntry``): its epoch,
its last five batches' sequence and offset ranges, the coordinator epoch of its last marker and
the first offset of its open transaction; with the sequence arithmetic the checks and the
snapshot files share (``last_sequence``, the Int32.MAX wrap).

Apart from :mod:`kmeta.log.producer.producer_state`, the manager that checks batches against these
entries and keeps the transaction index, because the snapshot files
(:mod:`kmeta.log.producer.producer_snapshot`) read and write entries without the manager. Pure data.
"""

from __future__ import annotations

from typing import NamedTuple

from kmeta.protocol.records.record_batch import BatchHeader

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = (1 << 31) - 1
#: Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (a producer's max.in.flight is at most 5)
BATCHES_RETAINED = 5


def last_sequence(h: BatchHeader) -> int:
    """``DefaultRecordBatch.lastSequence``: the base sequence plus the offset delta, wrapping
    past Int32.MAX to 0."""
    if h.base_sequence < 0:
        return NO_SEQUENCE
    seq = h.base_sequence + h.last_offset_delta
    return seq if seq <= INT32_MAX else seq - INT32_MAX - 1


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp


class ProducerStateEntry:
    """One producer's state. Its last batches are kept flat, five ints each (first sequence,
    last sequence, first offset, last offset, timestamp), so recording a batch allocates no
    object the garbage collector tracks (with a tuple per batch, idempotent produce made
    0.91x plain's MB per broker CPU second; flat, 1.02x: one run each of
    benchmarks/idempotent_produce.py, benchmarks/results/idempotent-produce.json)."""

    __slots__ = (
        "_meta",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._meta: list[int] = []
        self.coordinator_epoch = -1
        self.last_timestamp = -1
        self.current_txn_first_offset = -1  # -1: no open transaction
        #: the last offset of anything of this producer's in the log (data or marker)
        self.last_offset = -1

    @property
    def batches(self) -> list[BatchMetadata]:
        """The kept batches, oldest first."""
        m = self._meta
        return [BatchMetadata(*m[i : i + 5]) for i in range(0, len(m), 5)]

    @property
    def last_seq(self) -> int:
        return self._meta[-4] if self._meta else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        m = self._meta
        for i in range(0, len(m), 5):
            if m[i] == first_seq and m[i + 1] == last_seq:
                return BatchMetadata(*m[i : i + 5])
        return None

    def copy(self) -> ProducerStateEntry:
        other = ProducerStateEntry(self.producer_id)
        other.producer_epoch, other._meta = self.producer_epoch, self._meta[:]
        other.coordinator_epoch, other.last_timestamp = self.coordinator_epoch, self.last_timestamp
        other.current_txn_first_offset, other.last_offset = (
            self.current_txn_first_offset,
            self.last_offset,
        )
        return other

    def set_epoch(self, epoch: int) -> None:
        """A new epoch starts its sequences afresh (``maybeUpdateProducerEpoch``)."""
        if epoch != self.producer_epoch:
            self._meta.clear()
            self.producer_epoch = epoch

    def add_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        if epoch != self.producer_epoch:
            self.set_epoch(epoch)
        m = self._meta
        if len(m) == 5 * BATCHES_RETAINED:  # (the oldest's slots reused: nothing allocated)
            del m[:5]
        add = m.append
        add(first_seq)
        add(last_seq)
        add(first_offset)
        add(last_offset)
        add(timestamp)
        self.last_timestamp = timestamp
        self.last_offset = last_offset
