"""A coordinator loads its state from a compacted internal topic: gaps between batches, a
producer's data batch the cleaner emptied, a marker it emptied (kept only for the producer's
epoch: no transaction end to replay) and a tombstone batch carrying a delete horizon."""

from __future__ import annotations

from kmeta.log import LogConfig, LogManager
from kmeta.log.cleaner.log_cleaner import LogCleaner
from kmeta.server.coordinator.records import ControlMarker, DataRecord, encode_batch, read_entries
from tests.log.cleaner_helpers import marker, put
from tests.log.helpers import everything, parse

NOW = 10_000_000


def test_read_entries_of_a_compacted_coordinator_log() -> None:
    log = LogManager(None, 1 << 28).get_or_create(
        "__consumer_offsets", 0, None,
        LogConfig(cleanup_policy="compact", segment_bytes=150, delete_retention_ms=100),
    )  # fmt: skip
    put(log, encode_batch([(b"g1", b"v1")], timestamp_ms=NOW))
    put(log, encode_batch([(b"g1", b"v2")], producer_id=9, producer_epoch=0, transactional=True, timestamp_ms=NOW))
    put(log, marker(9, 0, commit=True, ts=NOW))
    put(log, encode_batch([(b"g2", b"v1")], timestamp_ms=NOW))
    put(log, encode_batch([(b"g2", None)], timestamp_ms=NOW))
    put(log, encode_batch([(b"g1", b"v3")], timestamp_ms=NOW))
    put(log, marker(11, 3, commit=False, ts=NOW))  # a transaction that wrote nothing here
    put(log, encode_batch([(b"g3", b"v1")], timestamp_ms=NOW))
    log.local.roll()
    cleaner = LogCleaner()
    for now in (NOW, NOW + 1, NOW + 200, NOW + 300):
        cleaner.clean(log, now)
    stored = everything(log)
    assert parse(stored)[-2].is_control_batch  # producer 11's marker, emptied, kept for its epoch
    assert parse(stored)[-2].records_count == 0
    entries, end = read_entries(stored, 0, log.log_end_offset)
    assert end == 8
    assert entries == [
        ControlMarker(2, 9, 0, True),  # (producer 9's emptied batch is its last: its marker stays)
        DataRecord(5, -1, -1, b"g1", b"v3"),
        DataRecord(7, -1, -1, b"g3", b"v1"),
    ]
