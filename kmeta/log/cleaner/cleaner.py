"""The log cleaner's algorithm (Kafka's ``Cleaner``, ``OffsetMap`` and
``CleanedTransactionMetadata``), on batches as bytes: pure, no I/O, so the same code runs on a
memory log and a file log and is tested without either.

One cleaning of a log, given its batches from the log start on:

* :func:`scan_producers` reads the headers (and the control records) from the log start to
  the log end: which transactions aborted (Kafka keeps a transaction index; here the markers
  themselves say it) and each producer's last batch.
* :func:`build_offset_map` maps each key to its latest offset over the dirty section, from
  the first dirty offset to the first offset that may not be cleaned yet (the active
  segment, the last stable offset, min.compaction.lag.ms): data of aborted transactions and
  control batches add nothing; the map holds at most ``max_keys`` keys, and the section ends
  at the last whole batch that fit (the rest waits for the next cleaning).
* :class:`GroupCleaner` rewrites the batches of the segments below the map's end: a record
  stays when it is the latest of its key (or past the map), a tombstone (a null value) until
  its batch's delete horizon passed, a record without a key never; aborted transactional data
  goes; a COMMIT marker goes once no batch of its transaction is left, an ABORT marker once
  no batch of its transaction was seen, each a delete.retention.ms after the cleaning that
  first found it so (KIP-534: the horizon is written into the batch); the batch holding an
  active producer's last sequence stays, empty if need be. A batch kept whole is copied byte
  for byte; one that lost records or takes a horizon is built again
  (:func:`~kmeta.log.record.record_set.build_batch`), same base and last offset, so offsets keep
  their meaning and gaps appear between batches.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from kmeta.log.record.batch import header_at, last_offset
from kmeta.log.record.record_set import Record, build_batch, delete_horizon, records_of
from kmeta.protocol.records.record_batch import BatchHeader

#: ControlRecordType: the key of a control record is version int16, type int16
ABORT, COMMIT = 0, 1
#: producer.id.expiration.ms: a producer silent this long is no longer active (its last
#: batch need not be kept)
PRODUCER_ID_EXPIRATION_MS = 86_400_000
#: the most keys one cleaning maps (Kafka sizes its map by log.cleaner.dedupe.buffer.size)
MAX_KEYS = 1_000_000

Batch = tuple[memoryview | bytes, BatchHeader]  # a stored batch's whole bytes and header


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


class LastBatch(NamedTuple):
    """A producer's last entry in the log: its last data batch's last offset (None when its
    last entries are markers only), its epoch and the last entry's max timestamp."""

    last_data_offset: int | None
    producer_epoch: int
    last_timestamp: int


def control_type(batch: memoryview | bytes, h: BatchHeader) -> int | None:
    """ABORT / COMMIT of a control batch; None for an empty one (a cleaning emptied it)."""
    records = records_of(batch, h)
    if not records or records[0].key is None or len(records[0].key) < 4:
        return None
    return int(struct.unpack_from(">h", records[0].key, 2)[0])


@dataclass
class ProducerScan:
    aborted: list[AbortedTxn] = field(default_factory=list)
    last: dict[int, LastBatch] = field(default_factory=dict)

    def active(self, now_ms: int) -> dict[int, LastBatch]:
        return {
            pid: entry for pid, entry in self.last.items()
            if now_ms - entry.last_timestamp < PRODUCER_ID_EXPIRATION_MS
        }  # fmt: skip


def scan_producers(batches: Iterable[Batch]) -> ProducerScan:
    """Aborted transactions (first data offset to marker) and each producer's last entry."""
    scan = ProducerScan()
    open_first: dict[int, int] = {}
    for data, h in batches:
        pid = h.producer_id
        if pid < 0:
            continue
        prior = scan.last.get(pid)
        if h.is_control:
            kind = control_type(data, h)
            first = open_first.pop(pid, None)
            if kind == ABORT and first is not None:
                scan.aborted.append(AbortedTxn(pid, first, h.base_offset))
            data_offset = prior.last_data_offset if prior is not None else None
            scan.last[pid] = LastBatch(data_offset, h.producer_epoch, h.max_timestamp)
            continue
        if h.is_transactional:
            open_first.setdefault(pid, h.base_offset)
        scan.last[pid] = LastBatch(last_offset(h), h.producer_epoch, h.max_timestamp)
    scan.aborted.sort(key=lambda t: t.first_offset)
    return scan


class TxnTracker:
    """Which transactional batches are aborted and which markers may go, as the cleaner walks
    the log in order (Kafka's ``CleanedTransactionMetadata``)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._queue = deque(aborted)
        self._ongoing_aborted: dict[int, bool] = {}  # pid -> a batch of it was seen
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._queue and self._queue[0].first_offset <= offset:
            txn = self._queue.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, False)

    def on_batch(self, h: BatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction (it may go)."""
        self._consume_up_to(last_offset(h))
        if not h.is_transactional:
            return False
        if h.producer_id in self._ongoing_aborted:
            self._ongoing_aborted[h.producer_id] = True
            return True
        self._ongoing_committed.add(h.producer_id)
        return False

    def on_control(self, kind: int | None, h: BatchHeader) -> bool:
        """True when the marker may go (no batch of its transaction is left)."""
        self._consume_up_to(last_offset(h))
        pid = h.producer_id
        if kind is None:
            return True
        if kind == ABORT:
            return not self._ongoing_aborted.pop(pid, False)
        if kind == COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


def _is_aborted(h: BatchHeader, aborted_by_pid: dict[int, list[AbortedTxn]]) -> bool:
    if not h.is_transactional:
        return False
    return any(t.first_offset <= h.base_offset < t.last_offset for t in aborted_by_pid.get(h.producer_id, ()))


class OffsetMap(NamedTuple):
    latest: dict[bytes, int]  # key -> its latest offset in the dirty section
    end_offset: int  # one past the last batch mapped: the cleaning covers offsets below it


def build_offset_map(
    batches: Iterable[Batch], start_offset: int, aborted: list[AbortedTxn], max_keys: int = MAX_KEYS
) -> OffsetMap:
    """Kafka's ``buildOffsetMap`` over the dirty section's batches (``start_offset`` the first
    dirty offset); stops before a batch whose keys would not fit."""
    by_pid: dict[int, list[AbortedTxn]] = {}
    for txn in aborted:
        by_pid.setdefault(txn.producer_id, []).append(txn)
    latest: dict[bytes, int] = {}
    end = start_offset
    for data, h in batches:
        if h.is_control or _is_aborted(h, by_pid):
            end = last_offset(h) + 1
            continue
        records = records_of(data, h)
        new_keys = sum(1 for r in records if r.key is not None and r.key not in latest)
        if latest and len(latest) + new_keys > max_keys:
            break
        for r in records:
            if r.key is not None and r.offset >= start_offset:
                latest[r.key] = r.offset
        end = last_offset(h) + 1
    return OffsetMap(latest, end)


class Cleaned(NamedTuple):
    data: bytes  # the batches kept, back to back
    batches: list[tuple[int, BatchHeader]]  # their positions in ``data`` and headers
    earliest_horizon: int | None  # the earliest delete horizon of a batch kept (None: none)


@dataclass
class GroupCleaner:
    """Rewrites batches in log order (Kafka's ``cleanInto`` with its ``RecordFilter``); one per
    cleaning, across every segment group, so the transaction state carries over."""

    offset_map: OffsetMap
    txns: TxnTracker
    active_producers: dict[int, LastBatch]
    now_ms: int
    delete_retention_ms: int

    def clean(self, batches: Iterable[Batch]) -> Cleaned:
        out = bytearray()
        kept: list[tuple[int, BatchHeader]] = []
        earliest: int | None = None
        for data, h in batches:
            rewritten = self._batch(data, h)
            if rewritten is None:
                continue
            new_h = header_at(rewritten) if rewritten is not data else h
            kept.append((len(out), new_h))
            out += rewritten
            horizon = delete_horizon(new_h)
            if horizon is not None and (earliest is None or horizon < earliest):
                earliest = horizon
        return Cleaned(bytes(out), kept, earliest)

    def _is_last_of_producer(self, h: BatchHeader) -> bool:
        last = self.active_producers.get(h.producer_id)
        if h.producer_id < 0 or last is None:
            return False
        if last.last_data_offset is not None:
            return last_offset(h) == last.last_data_offset
        return h.is_control and h.producer_epoch == last.producer_epoch

    def _batch(self, data: memoryview | bytes, h: BatchHeader) -> memoryview | bytes | None:
        now = self.now_ms
        horizon = delete_horizon(h)
        if h.is_control:
            can_discard = self.txns.on_control(control_type(data, h), h)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = discard_records = self.txns.on_batch(h)
        keep_empty = self._is_last_of_producer(h)
        if discard_records and not keep_empty:
            return None
        records = records_of(data, h)
        if discard_records:
            retained: list[Record] = []
        elif h.is_control:
            retained = records
        else:
            retained = [r for r in records if self._retain(r, horizon)]
        if not retained:
            return build_batch(h, [], None) if keep_empty else None
        tombstones = any(not r.has_value for r in retained)
        needs_horizon = (tombstones or (can_discard and h.is_control)) and horizon is None
        if len(retained) == len(records) and not needs_horizon:
            return data
        return build_batch(h, retained, now + self.delete_retention_ms if needs_horizon else None)

    def _retain(self, r: Record, horizon: int | None) -> bool:
        if r.offset >= self.offset_map.end_offset:
            return True
        if r.key is None:
            return False
        if r.offset < self.offset_map.latest.get(r.key, -1):
            return False
        return r.has_value or horizon is None or self.now_ms < horizon


def batches_in(data: memoryview | bytes, headers: Iterable[tuple[int, BatchHeader]]) -> Iterator[Batch]:
    """``(bytes, header)`` of each batch of a segment's bytes, from its (position, header)s."""
    view = memoryview(data)
    for pos, h in headers:
        yield view[pos : pos + h.batch_length + 12], h
