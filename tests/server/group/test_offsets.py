"""OffsetMetadataManager, its records and its decisions, without a broker: state changes only
by replaying records (as the coordinator runtime hands them over once committed)."""

from __future__ import annotations

import pytest

from kmeta.protocol.errors import CorruptMessageError, ErrorCode
from kmeta.server.group.offsets.offset_records import (
    OffsetCommitKey,
    decode_key,
    decode_value,
    offset_commit_record,
    offset_commit_tombstone,
    record_key_version,
)
from kmeta.server.group.offsets.offsets import OffsetMetadataManager
from kmeta.server.group.offsets.offsets_requests import (
    CommitPartition,
    FetchedPartition,
    commit_offset_records,
    expired_offset_records,
    fetch_offsets,
)

#: the bytes Kafka's OffsetCommitKey v1 / OffsetCommitValue v3 serialisers write for
#: group "g", topic "t", partition 3, offset 42, leader epoch 5, metadata "meta", ts 1000
KAFKA_KEY = bytes.fromhex("0001" "0001" "67" "0001" "74" "00000003")
KAFKA_VALUE = bytes.fromhex("0003" "000000000000002a" "00000005" "0004" "6d657461" "00000000000003e8")


def test_records_are_kafkas_bytes_both_ways() -> None:
    key, value = offset_commit_record("g", "t", 3, 42, 5, "meta", 1000)
    assert (key, value) == (KAFKA_KEY, KAFKA_VALUE)
    assert decode_key(KAFKA_KEY) == OffsetCommitKey(1, "g", "t", 3)
    decoded = decode_value(KAFKA_VALUE)
    assert (decoded.version, decoded.offset, decoded.leader_epoch, decoded.metadata, decoded.commit_timestamp) == (
        3, 42, 5, "meta", 1000,
    )  # fmt: skip
    assert offset_commit_tombstone("g", "t", 3) == (KAFKA_KEY, None)
    assert record_key_version(KAFKA_KEY) == 1


def test_an_expire_timestamp_is_written_as_value_v1_and_older_values_read() -> None:
    _, value = offset_commit_record("g", "t", 0, 7, 5, "", 1000, expire_timestamp_ms=5000)
    decoded = decode_value(value)
    assert (decoded.version, decoded.expire_timestamp, decoded.leader_epoch) == (1, 5000, -1)
    v0 = bytes.fromhex("0000" "0000000000000007" "0000" "00000000000003e8")
    assert decode_value(v0)[1:5] == (7, -1, "", 1000)
    v4 = bytes.fromhex("0004" "0000000000000007" "00000002" "01" "00000000000003e8" "00")  # flexible
    assert decode_value(v4)[1:5] == (7, 2, "", 1000)


@pytest.mark.parametrize("data", [b"", b"\x00", bytes.fromhex("0005" "00"), bytes.fromhex("0003" "0000")])
def test_bad_values_are_corrupt_messages(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_value(data)


def test_a_group_metadata_key_is_not_an_offset_key() -> None:
    with pytest.raises(CorruptMessageError):
        decode_key(bytes.fromhex("0002" "0001" "67"))


def _replay(m: OffsetMetadataManager, offset: int, record: tuple[bytes, bytes | None], pid: int = -1) -> None:
    m.replay(offset, pid, 0, record[0], record[1])


def test_replay_commits_overwrites_and_tombstones() -> None:
    m = OffsetMetadataManager()
    _replay(m, 0, offset_commit_record("g", "t", 0, 10, -1, "a", 1))
    _replay(m, 1, offset_commit_record("g", "t", 0, 20, 3, "b", 2))
    got = m.offset("g", "t", 0)
    assert got is not None
    assert (got.committed_offset, got.leader_epoch, got.metadata, got.record_offset) == (20, 3, "b", 1)
    assert m.has_offsets("g")
    assert not m.has_offsets("h")
    _replay(m, 2, offset_commit_tombstone("g", "t", 0))
    assert m.offset("g", "t", 0) is None
    assert not m.has_offsets("g")
    assert m.group_ids() == set()


def test_transactional_offsets_wait_for_the_marker() -> None:
    m = OffsetMetadataManager()
    _replay(m, 5, offset_commit_record("g", "t", 0, 50, -1, "", 1), pid=7)
    assert m.offset("g", "t", 0) is None
    assert m.has_pending_transactional_offsets("g", "t", 0)
    assert m.has_offsets("g")
    stable = fetch_offsets(m, "g", [("t", [0])], require_stable=True)
    assert stable == [("t", [FetchedPartition(0, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)])]
    assert fetch_offsets(m, "g", [("t", [0])], require_stable=False) == [("t", [FetchedPartition(0)])]
    m.replay_end_transaction(7, 0, committed=True)
    got = m.offset("g", "t", 0)
    assert got is not None
    assert got.committed_offset == 50
    assert not m.has_pending_transactional_offsets("g", "t", 0)
    assert not m.has_open_transactions("g")


def test_an_aborted_transaction_drops_its_offsets() -> None:
    m = OffsetMetadataManager()
    _replay(m, 0, offset_commit_record("g", "t", 0, 10, -1, "", 1))
    _replay(m, 1, offset_commit_record("g", "t", 0, 99, -1, "", 1), pid=7)
    m.replay_end_transaction(7, 0, committed=False)
    got = m.offset("g", "t", 0)
    assert got is not None
    assert got.committed_offset == 10
    assert not m.has_open_transactions("g")


def test_a_newer_plain_commit_wins_over_a_transaction_committed_later() -> None:
    m = OffsetMetadataManager()
    _replay(m, 1, offset_commit_record("g", "t", 0, 10, -1, "", 1), pid=7)
    _replay(m, 2, offset_commit_record("g", "t", 0, 20, -1, "", 2))
    m.replay_end_transaction(7, 0, committed=True)
    got = m.offset("g", "t", 0)
    assert got is not None
    assert got.committed_offset == 20


def test_a_tombstone_drops_pending_offsets_and_delete_all_covers_both() -> None:
    m = OffsetMetadataManager()
    _replay(m, 0, offset_commit_record("g", "t", 0, 10, -1, "", 1))
    _replay(m, 1, offset_commit_record("g", "t", 1, 11, -1, "", 1), pid=7)
    _replay(m, 2, offset_commit_record("g", "t", 0, 12, -1, "", 1), pid=7)
    assert sorted(m.delete_all_offsets("g")) == sorted(
        [offset_commit_tombstone("g", "t", 0), offset_commit_tombstone("g", "t", 1)]
    )
    _replay(m, 3, offset_commit_tombstone("g", "t", 1))
    assert not m.has_pending_transactional_offsets("g", "t", 1)
    assert m.delete_offset_records("g", "t", [0, 1, 2]) == [offset_commit_tombstone("g", "t", 0)]
    assert m.on_partitions_deleted([("t", 0)]) == [offset_commit_tombstone("g", "t", 0)]


def test_commit_records_check_metadata_size_and_keep_an_explicit_retention() -> None:
    errors, records = commit_offset_records(
        "g", [("t", [CommitPartition(0, 5, metadata="x" * 5), CommitPartition(1, 6, metadata=None)])],
        now_ms=1000, retention_time_ms=60_000, metadata_max_bytes=4,
    )  # fmt: skip
    assert errors == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE}
    (key, value), = records
    assert value is not None
    decoded = decode_value(value)
    assert decode_key(key).partition == 1
    assert (decoded.offset, decoded.metadata, decoded.expire_timestamp) == (6, "", 61_000)


def test_fetch_all_lists_every_committed_partition() -> None:
    m = OffsetMetadataManager()
    _replay(m, 0, offset_commit_record("g", "a", 0, 1, 4, "m", 1))
    _replay(m, 1, offset_commit_record("g", "b", 2, 3, -1, "", 1))
    assert fetch_offsets(m, "g", None, require_stable=False) == [
        ("a", [FetchedPartition(0, 1, 4, "m")]), ("b", [FetchedPartition(2, 3, -1, "")]),
    ]  # fmt: skip
    assert fetch_offsets(m, "g", [("a", [0])], False, known_group=False) == [("a", [FetchedPartition(0)])]


def test_expiry_counts_from_the_base_and_spares_subscribed_and_pending() -> None:
    m = OffsetMetadataManager()
    _replay(m, 0, offset_commit_record("g", "old", 0, 1, -1, "", 1_000))
    _replay(m, 1, offset_commit_record("g", "new", 0, 1, -1, "", 9_000))
    _replay(m, 2, offset_commit_record("g", "sub", 0, 1, -1, "", 0))
    _replay(m, 3, offset_commit_record("g", "v2", 0, 1, -1, "", 0, expire_timestamp_ms=20_000))

    def by_commit(ms: int) -> int:
        return ms

    records, all_gone = expired_offset_records(m, "g", by_commit, lambda t: t == "sub", now_ms=10_000, retention_ms=5_000)
    assert records == [offset_commit_tombstone("g", "old", 0)]
    assert not all_gone
    records, _ = expired_offset_records(m, "g", lambda _: 0, lambda t: False, now_ms=10_000, retention_ms=5_000)
    assert offset_commit_tombstone("g", "v2", 0) not in records
    assert len(records) == 3
    assert expired_offset_records(m, "g", None, lambda t: False, 10**9, 1) == ([], False)
    _replay(m, 4, offset_commit_record("g", "old", 0, 2, -1, "", 0), pid=9)
    records, all_gone = expired_offset_records(m, "g", by_commit, lambda t: False, now_ms=10**9, retention_ms=1)
    assert offset_commit_tombstone("g", "old", 0) not in records
    assert not all_gone
    assert expired_offset_records(m, "none", by_commit, lambda t: False, 0, 1) == ([], True)
