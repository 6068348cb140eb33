"""The Produce path does each byte-sized piece of work once: a batch's CRC-32C is computed once
(the handler's check; the log's validator trusts it and runs every other check again), and the
records reach the log as a view of the request's frame, not a copy of it. Through a real
ServerConnection fed in memory."""

from __future__ import annotations

from typing import Any

import pytest

from kmeta.log.config import LogConfig
from kmeta.log.errors import CorruptRecordError
from kmeta.log.partition_log import PartitionLog
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.records import record_batch
from kmeta.protocol.records.record_batch import check_produce_records
from tests.server.data_plane import as_stored, batch, holding, only, produce, recrc
from tests.server.helpers import ConnectionPair

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")


def _stored(state: Any) -> bytes:
    log = state.replica_manager.log_manager.get("orders", 0)
    return b"" if log is None else bytes(log.read(log.log_start_offset, 1 << 30, None, True).records)


@pytest.fixture
def crcs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the buffers record_batch computes a CRC-32C of, in order."""
    seen: list[int] = []
    real = record_batch.crc32c

    def counting(data: Any, crc: int = 0) -> int:
        seen.append(len(data))
        return real(data, crc)

    monkeypatch.setattr(record_batch, "crc32c", counting)
    return seen


@pytest.mark.parametrize("version", [2, 3, 9, 11])
async def test_a_batch_is_crc_checked_once_and_stored_as_sent(version: int, crcs: list[int]) -> None:
    state = holding()
    pair = ConnectionPair(state)
    records = batch(50, value=b"v" * 1000)
    answer = only(pair.request(produce("orders", 0, records, version=version, acks=1)))
    assert (answer.error_code, answer.base_offset) == (0, 0)
    assert crcs == [len(records) - 21]  # (attributes to the end, once)
    assert _stored(state) == as_stored(records, 0, 4)


async def test_a_corrupt_batch_is_still_refused_and_nothing_is_stored(crcs: list[int]) -> None:
    state = holding()
    pair = ConnectionPair(state)
    flipped = bytearray(batch(5))
    flipped[-1] ^= 0x55
    answer = only(pair.request(produce("orders", 0, bytes(flipped), acks=1)))
    assert answer.error_code == E.CORRUPT_MESSAGE
    assert len(crcs) == 1
    assert _stored(state) == b""


def test_crc_checked_skips_the_crc_alone() -> None:
    good = batch(3)
    flipped = bytearray(good)
    flipped[-1] ^= 0x55
    assert check_produce_records(11, bytes(flipped)).error == E.CORRUPT_MESSAGE
    assert check_produce_records(11, bytes(flipped), crc_checked=True).error == E.NONE  # (the caller vouched)
    miscounted = recrc(good[:57] + (2).to_bytes(4, "big") + good[61:])
    assert check_produce_records(11, miscounted, crc_checked=True).error == E.INVALID_RECORD
    legacy = bytearray((0).to_bytes(8, "big") + (14).to_bytes(4, "big") + b"\x00\x00\x00\x00\x00\x00" + b"\xff" * 8)
    assert check_produce_records(11, bytes(legacy), crc_checked=True).error == E.CORRUPT_MESSAGE  # (v0/v1 CRCs: always)


async def test_the_log_still_checks_the_crc_of_an_append_nobody_checked(tmp_path: Any) -> None:
    log = PartitionLog("orders", 0, None, LogConfig(), log_dir=str(tmp_path))
    flipped = bytearray(batch(3))
    flipped[-1] ^= 0x55
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(flipped), 0, 0)
    assert log.log_end_offset == 0
    log.close()


async def test_the_log_gets_a_view_of_the_request_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    state = holding()
    pair = ConnectionPair(state)
    handed: list[Any] = []
    rm = state.replica_manager
    real = rm.append_records

    def spying(partition: Any, records: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(records)
        return real(partition, records, *args, **kwargs)

    monkeypatch.setattr(rm, "append_records", spying)
    records = batch(20, value=b"x" * 1000)
    assert only(pair.request(produce("orders", 0, records, acks=1))).error_code == 0
    [view] = handed
    assert isinstance(view, memoryview)
    assert view.readonly
    assert type(view.obj) is bytes
    assert len(view.obj) > len(records)  # (the whole request frame, not a copy of the batch)
    assert _stored(state) == as_stored(records, 0, 4)
