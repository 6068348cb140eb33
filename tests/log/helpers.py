"""Record batches as a real producer encodes them: kafka-python's ``DefaultRecordBatchBuilder``
(an encoder independent of kmeta), and kafka-python's ``DefaultRecordBatch`` to read back."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kmeta.log import PartitionLog

GZIP, SNAPPY, LZ4 = 1, 2, 3


def batch(
    values: Sequence[bytes] = (b"v",),
    timestamps: Sequence[int] | None = None,
    compression: int = 0,
    producer_id: int = -1,
) -> bytes:
    """One v2 batch (base offset 0, as a producer sends it), record i with ``values[i]`` and
    ``timestamps[i]`` (default 1000 + i)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    for i, value in enumerate(values):
        ts = 1000 + i if timestamps is None else timestamps[i]
        builder.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


def sized(size: int, fill: bytes = b"x") -> bytes:
    """A one-record batch of exactly ``size`` bytes (size >= 70), its value ``fill`` repeated."""
    overhead = len(batch([b""]))
    for guess in range(size - overhead, size - overhead - 8, -1):  # (the length varints grow)
        data = batch([fill * guess])
        if len(data) == size:
            return data
    raise AssertionError(f"cannot build a batch of {size} bytes")


def parse(records: bytes | memoryview) -> list[DefaultRecordBatch]:
    """kafka-python's reading of stored bytes: the batches, each CRC-validated."""
    data = bytes(records)
    out = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        one = DefaultRecordBatch(data[pos : pos + 12 + length])
        assert one.validate_crc(), f"CRC of the batch at {pos} broken"
        out.append(one)
        pos += 12 + length
    return out


def append_n(
    log: PartitionLog, n: int, epoch: int = 0, records_per_batch: int = 1, now_ms: int = 10_000
) -> None:
    for i in range(n):
        values = [b"r%d-%d" % (i, j) for j in range(records_per_batch)]
        log.append_as_leader(batch(values), epoch, now_ms)


def everything(log: PartitionLog) -> bytes:
    """All the log holds from its start, read segment by segment."""
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = bytes(log.read(offset, 1 << 30, None).records)
        assert chunk, f"nothing read at {offset}"
        out += chunk
        offset = parse(chunk)[-1].next_offset
    return out
