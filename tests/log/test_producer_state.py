"""Producer state in the log (Kafka's ProducerStateManager): idempotent producers' sequences and
epochs, transactions, the last stable offset and the aborted-transaction index, and the state
rebuilt from the batches after a truncation or a restart. Batches from kafka-python's encoder."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kmeta.log import LogConfig, LogError, LogManager, PartitionLog
from kmeta.log.producer.producer_entry import INT32_MAX, last_sequence
from kmeta.log.producer.producer_state import AbortedTxn, ProducerStateManager
from kmeta.log.record.batch import header_at
from kmeta.log.record.control import end_txn_marker_batch, read_end_txn_marker
from kmeta.protocol.errors import ErrorCode
from tests.log.conftest import Make
from tests.log.helpers import batch as plain

PID = 1000


def idem(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, txn: bool = False, ts: int = 1000) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=txn, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 24,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, timestamp=ts + i, key=None, value=b"v%d" % (seq + i), headers=[])
    return bytes(builder.build())


def error_of(log: PartitionLog, records: bytes) -> ErrorCode:
    with pytest.raises(LogError) as raised:
        log.append_as_leader(records, 0, 5000)
    return raised.value.error


def marker(log: PartitionLog, commit: bool, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    return log.append_end_txn_marker(pid, epoch, coordinator_epoch, commit, 0, 5000).first_offset


def test_sequences_duplicates_and_gaps(make: Make) -> None:
    log = make()
    assert log.append_as_leader(idem(0, 3), 0, 1).first_offset == 0
    assert log.append_as_leader(idem(3, 2), 0, 1).first_offset == 3
    end = log.log_end_offset
    # a retry of either batch: the original's offsets, nothing stored
    again = log.append_as_leader(idem(0, 3), 0, 1)
    assert (again.first_offset, again.last_offset, again.record_count, log.log_end_offset) == (0, 2, 0, end)
    assert again.log_append_time_ms == 1002  # (Kafka answers the batch's timestamp)
    assert log.append_as_leader(idem(3, 2), 0, 1).first_offset == 3
    assert error_of(log, idem(6)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap
    assert error_of(log, idem(4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps, not a retry
    assert log.log_end_offset == end
    assert log.append_as_leader(idem(5), 0, 1).first_offset == 5
    # only the last five batches are remembered: an older retry is out of order
    for seq in range(6, 11):
        log.append_as_leader(idem(seq), 0, 1)
    assert error_of(log, idem(5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(idem(6), 0, 1).first_offset == 6
    # a plain producer's batches are not checked
    assert log.append_as_leader(plain([b"x"]), 0, 1).first_offset == 11
    assert log.append_as_leader(plain([b"x"]), 0, 1).first_offset == 12


def test_epochs_and_unknown_producers(make: Make) -> None:
    log = make()
    assert log.append_as_leader(idem(42, pid=7), 0, 1).first_offset == 0  # unknown: any sequence
    log.append_as_leader(idem(0, 2, epoch=3), 0, 1)
    assert error_of(log, idem(2, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(log, idem(2, epoch=4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch: 0
    log.append_as_leader(idem(0, epoch=4), 0, 1)  # the bump resets the sequence
    assert error_of(log, idem(0, 2, epoch=3)) == ErrorCode.INVALID_PRODUCER_EPOCH  # even a retry
    assert log.append_as_leader(idem(1, epoch=4), 0, 1).first_offset == 4


def test_sequence_wraps_at_int32_max(make: Make) -> None:
    log = make()
    log.append_as_leader(idem(INT32_MAX - 1, 2), 0, 1)
    assert last_sequence(header_at(idem(INT32_MAX - 1, 3))) == 0
    assert log.append_as_leader(idem(0), 0, 1).first_offset == 2
    assert log.append_as_leader(idem(0), 0, 1).first_offset == 2  # a retry after the wrap


def test_transactions_move_the_last_stable_offset(make: Make) -> None:
    log = make()
    log.append_as_leader(plain([b"a"]), 0, 1)
    log.append_as_leader(idem(0, 2, txn=True), 0, 1)  # offsets 1-2, open
    log.append_as_leader(idem(0, 1, pid=2, txn=True), 0, 1)  # offset 3, open
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    assert error_of(log, idem(2)) == ErrorCode.INVALID_TXN_STATE  # not transactional, txn open
    abort_at = marker(log, commit=False)
    assert abort_at == 4
    assert log.last_stable_offset == 1  # the marker is not below the high watermark yet
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3  # pid 2's transaction is open
    assert log.producer_state.aborted == [AbortedTxn(PID, 1, 4, 3)]
    marker(log, commit=True, pid=2)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.high_watermark == 6
    assert log.producer_state.aborted_transactions(0, 6) == [AbortedTxn(PID, 1, 4, 3)]
    assert log.producer_state.aborted_transactions(5, 6) == []  # ended before the fetch offset
    assert log.producer_state.aborted_transactions(0, 1) == []  # starts at the bound
    # the next transaction continues the sequence of the same epoch
    log.append_as_leader(idem(2, txn=True), 0, 1)
    assert log.last_stable_offset == 6


def test_marker_checks(make: Make) -> None:
    log = make()
    log.append_as_leader(idem(0, txn=True, epoch=2), 0, 1)
    with pytest.raises(LogError) as raised:
        log.append_end_txn_marker(PID, 1, 5, True, 0, 1)
    assert raised.value.error == ErrorCode.INVALID_PRODUCER_EPOCH
    marker(log, commit=True, epoch=2, coordinator_epoch=5)
    with pytest.raises(LogError) as raised:
        log.append_end_txn_marker(PID, 2, 4, True, 0, 1)
    assert raised.value.error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # a marker without data here completes nothing, but is stored
    end = log.log_end_offset
    assert marker(log, commit=False, epoch=3, coordinator_epoch=5) == end
    assert log.producer_state.aborted == []
    stored = bytes(log.read(end, 1 << 20, None).records)
    read = DefaultRecordBatch(stored)
    assert read.is_control_batch
    assert read.is_transactional
    assert read.producer_id == PID
    assert read_end_txn_marker(stored, header_at(stored)) == (False, 5)


def test_control_batch_as_kafka_python_reads_it() -> None:
    data = end_txn_marker_batch(9, 2, 7, True, 1234, base_offset=40, leader_epoch=3)
    read = DefaultRecordBatch(data)
    assert read.validate_crc()
    assert (read.base_offset, read.producer_id, read.producer_epoch, read.base_sequence) == (40, 9, 2, -1)
    (record,) = list(read)
    assert record.key == b"\x00\x00\x00\x01"
    assert record.value == b"\x00\x00\x00\x00\x00\x07"


def test_follower_and_truncation_rebuild(make: Make) -> None:
    leader, follower = make(), make()
    leader.append_as_leader(idem(0, 2), 0, 1)
    leader.append_as_leader(idem(0, txn=True, pid=5), 0, 1)
    marker(leader, commit=False, pid=5)
    leader.append_as_leader(idem(2, 2), 0, 1)
    follower.append_as_follower(bytes(leader.read(0, 1 << 20, None).records))
    # the follower, become leader, knows the retries and the abort
    assert follower.append_as_leader(idem(2, 2), 0, 1).first_offset == 4
    assert follower.producer_state.aborted == leader.producer_state.aborted
    assert error_of(follower, idem(5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    follower.truncate_to(3)  # the abort's marker and the last batch go
    assert follower.producer_state.aborted == []
    assert follower.producer_state.ongoing == {5: 2}
    assert follower.append_as_leader(idem(2, 2), 0, 1).first_offset == 3  # stored again
    follower.truncate_fully_and_start_at(10)
    assert not follower.producer_state


def test_restart_rebuilds_the_state(tmp_path: Path) -> None:
    def open_log() -> tuple[LogManager, PartitionLog]:
        manager = LogManager(str(tmp_path), 1 << 20)
        manager.load()
        return manager, manager.get_or_create("t", 0, None, LogConfig(segment_bytes=300))  # type: ignore[arg-type]

    manager, log = open_log()
    for seq in range(0, 8, 2):
        log.append_as_leader(idem(seq, 2), 0, 1)
    log.append_as_leader(idem(0, txn=True, pid=5), 0, 1)
    marker(log, commit=False, pid=5)
    log.append_as_leader(idem(0, txn=True, pid=6), 0, 1)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.local.segments) > 1
    manager.close()
    again, log = open_log()
    assert log.append_as_leader(idem(6, 2), 0, 1).first_offset == 6  # a retry
    assert error_of(log, idem(9)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.producer_state.aborted == [AbortedTxn(5, 8, 9, 10)]
    assert log.last_stable_offset == 10  # pid 6's transaction is still open
    again.close()


def test_expiry_keeps_open_transactions() -> None:
    state = ProducerStateManager()
    state.apply(header_at(idem(0, pid=1, ts=1000))._replace(base_offset=0), None)
    state.apply(header_at(idem(0, pid=2, ts=1000, txn=True))._replace(base_offset=1), None)
    assert state.remove_expired(1000 + 86_400_000 - 1, 86_400_000) == 0
    assert state.remove_expired(1000 + 86_400_000, 86_400_000) == 1
    assert list(state.producers) == [2]


def test_a_coordinators_own_batches_are_not_sequence_checked(make: Make) -> None:
    """Kafka's origin COORDINATOR (TxnOffsetCommit's records in __consumer_offsets): every
    batch of the transaction at sequence 0 is stored; only the epoch and the open transaction
    are checked."""
    log = make()
    for _ in range(3):
        log.append_as_leader(idem(0, txn=True, epoch=1), 0, 1, coordinator=True)
    assert log.log_end_offset == 3
    assert log.producer_state.ongoing == {PID: 0}
    with pytest.raises(LogError) as raised:
        log.append_as_leader(idem(0, txn=True, epoch=0), 0, 1, coordinator=True)
    assert raised.value.error == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(LogError) as raised:
        log.append_as_leader(idem(0, epoch=1), 0, 1, coordinator=True)
    assert raised.value.error == ErrorCode.INVALID_TXN_STATE
    # a client's batch with the same sequence is a retry (of the first kept, as Kafka's findFirst)
    assert log.append_as_leader(idem(0, txn=True, epoch=1), 0, 1).first_offset == 0
    assert log.log_end_offset == 3


def _state(log: PartitionLog) -> tuple[object, ...]:
    ps = log.producer_state
    producers = {
        pid: (e.producer_epoch, e.batches, e.coordinator_epoch, e.current_txn_first_offset, e.last_offset)
        for pid, e in ps.producers.items()
    }
    return producers, dict(ps.ongoing), list(ps.aborted), log.last_stable_offset


def test_truncation_replays_from_a_snapshot_to_the_state_a_full_rebuild_gives(make: Make) -> None:
    """Thousands of producer batches (snapshots every 1000): truncated at offsets between
    and at snapshots, the state is the one a replica that replicated only what is left has."""
    log = make(segment_bytes=64 * 1024)
    seqs = dict.fromkeys((1, 2, 3), 0)
    for i in range(3200):
        pid = 1 + i % 3
        txn = pid == 3
        log.append_as_leader(idem(seqs[pid], 2, pid=pid, txn=txn), 0, 1)
        seqs[pid] += 2
        if txn and i % 9 == 8:
            marker(log, commit=i % 2 == 0, pid=3)
    marker(log, commit=True, pid=3)
    opened = log.log_end_offset  # a transaction opened after the last snapshot, truncated away
    log.append_as_leader(idem(0, 2, pid=9, txn=True), 0, 1)
    log.append_as_leader(idem(seqs[1], 2, pid=1), 0, 1)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.producer_state._snapshots) >= 2
    assert log.producer_state.ongoing == {9: opened}
    for end in (opened, opened - 3, 6001, 4000, 2999, 1500, 10):
        log.truncate_to(end)
        log.update_high_watermark(log.log_end_offset)
        # (the first is replayed from a snapshot near the end, not from the start)
        assert end < 6000 or log.producer_state._snapshots[-1].offset > 5000
        chunks = [bytes(s.store.read(0, s.size)) for s in log.local.segments]
        fresh = make()
        for chunk in chunks:
            fresh.append_as_follower(chunk)
        fresh.update_high_watermark(fresh.log_end_offset)
        assert _state(log) == _state(fresh), end
