"""What a leader checks and sets on a client's batch before it is stored (Kafka's
``LogValidator`` for magic 2, in place): the Produce checks (CRC, sizes, counts,
max.message.bytes; a v0/v1 message set is checked as such, then up-converted to one v2 batch
by :mod:`kmeta.protocol.records.legacy_records`, the one conversion the Produce handler uses too), CreateTime bounds when message.timestamp.before/after.max.ms are
set, then the base offset and partition leader epoch; LogAppendTime also rewrites
maxTimestamp and the timestamp-type bit, so that path copies the batch and recomputes its CRC."""

from __future__ import annotations

from typing import NamedTuple

from kmeta.log.config import LONG_MAX, LogConfig
from kmeta.log.errors import BY_CODE, InvalidRecordError, InvalidTimestampError
from kmeta.log.record.batch import (
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    Buffer,
    header_at,
    offset_and_epoch_prefix,
    with_log_append_time,
)
from kmeta.log.record.records import timestamp_bounds
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.records.legacy_records import up_convert
from kmeta.protocol.records.record_batch import (
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    check_produce_records,
)


class ValidatedBatch(NamedTuple):
    data: Buffer  # the bytes to store
    prefix: bytes | None  # written over data's first bytes as it is stored
    header: BatchHeader  # as stored
    log_append_time_ms: int  # -1 unless LogAppendTime


def validate_leader_batch(
    records: bytes | memoryview, config: LogConfig, base_offset: int, leader_epoch: int,
    now_ms: int, *, crc_checked: bool = False,
) -> ValidatedBatch:  # fmt: skip
    """``crc_checked``: the caller checked these immutable bytes' CRC already (the Produce
    handler: :func:`~kmeta.protocol.records.record_batch.check_produce_records`'s seam)."""
    _check(records, config, crc_checked)
    if records[16] != MAGIC_V2:  # a v0/v1 message set, checked as such: stored as v2
        converted = up_convert(records, config.max_message_bytes)
        if converted.error != ErrorCode.NONE:
            raise BY_CODE.get(converted.error, InvalidRecordError)(converted.message)
        records = converted.records
        _check(records, config, False)
    h = header_at(records)
    view = memoryview(records)[: h.batch_length + LOG_OVERHEAD]  # (a partial tail is no batch)
    assigned = h._replace(base_offset=base_offset, partition_leader_epoch=leader_epoch)
    if config.log_append_time:
        data = with_log_append_time(view, base_offset, leader_epoch, now_ms)
        stored = assigned._replace(
            attributes=h.attributes | TIMESTAMP_TYPE_MASK, max_timestamp=now_ms
        )
        return ValidatedBatch(data, None, stored, now_ms)
    _check_timestamps(view, h, config, now_ms)
    return ValidatedBatch(view, offset_and_epoch_prefix(h, base_offset, leader_epoch), assigned, -1)


def _check(records: bytes | memoryview, config: LogConfig, crc_checked: bool) -> None:
    checked = check_produce_records(11, records, config.max_message_bytes, crc_checked=crc_checked)
    if checked.error != ErrorCode.NONE:
        raise BY_CODE.get(checked.error, InvalidRecordError)(checked.message)


def _check_timestamps(batch: memoryview, h: BatchHeader, config: LogConfig, now_ms: int) -> None:
    """Kafka's ``validateTimestamp`` for CreateTime records. With both bounds at their default
    (Long.MAX_VALUE, Kafka 3.9's) nothing is checked and no record is decoded."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if before == LONG_MAX and after == LONG_MAX:
        return
    for ts in timestamp_bounds(batch, h):
        if ts != NO_TIMESTAMP and (ts < now_ms - before or ts > now_ms + after):
            raise InvalidTimestampError(
                f"Timestamp {ts} of message is out of range. The timestamp should be within "
                f"[{now_ms - before}, {now_ms + after}]"
            )
