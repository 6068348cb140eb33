"""Batches with keys, transactional batches and control markers for the cleaner's tests: data
batches from kafka-python's encoder (independent of kmeta), markers packed here by hand."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

from kmeta.log import PartitionLog
from kmeta.protocol.records.record_batch import crc32c
from tests.log.helpers import parse

KV = tuple[bytes | None, bytes | None]


def keyed(
    records: Sequence[KV], *, ts: int = 1000, compression: int = 0, producer_id: int = -1,
    epoch: int = -1, sequence: int = -1, transactional: bool = False,
) -> bytes:  # fmt: skip
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 24,
    )  # fmt: skip
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def marker(producer_id: int, epoch: int, commit: bool, ts: int = 1000) -> bytes:
    """A COMMIT/ABORT control batch as a transaction coordinator's WriteTxnMarkers writes it."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    body = b"\x00" + b"\x00" + b"\x00" + bytes([len(key) * 2]) + key + bytes([len(value) * 2]) + value + b"\x00"
    record = bytes([len(body) * 2]) + body
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, ts, ts, producer_id, epoch, -1, 1) + record
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, length, -1, 2, crc32c(after_crc)) + after_crc


def put(log: PartitionLog, data: bytes, now_ms: int = 10_000) -> int:
    """Append one batch at the log end as a replica would (offsets set, epoch 0); its base."""
    base = log.log_end_offset
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base)
    struct.pack_into(">i", out, 12, 0)
    log.append_as_follower(bytes(out))
    log.update_high_watermark(log.log_end_offset)
    return base


def contents(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start, as kafka-python reads them."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = bytes(log.read(offset, 1 << 30, None).records)
        if not chunk:
            break
        batches = parse(chunk)
        for b in batches:
            if not b.is_control_batch:
                out.extend((r.offset, r.key, r.value) for r in b)
        offset = batches[-1].next_offset
    return out
