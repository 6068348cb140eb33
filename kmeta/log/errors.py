"""What the partition log raises: each exception carries the Kafka error code the request
handler answers with (Kafka's ``ApiException`` subclasses of the same meaning)."""

from __future__ import annotations

from kmeta.protocol.errors import ErrorCode


class LogError(Exception):
    """Base: the append or read was refused and the log is as it was."""

    error: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    error = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(LogError):
    error = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(LogError):
    error = ErrorCode.INVALID_RECORD


class RecordTooLargeError(LogError):
    error = ErrorCode.MESSAGE_TOO_LARGE


class InvalidTimestampError(LogError):
    error = ErrorCode.INVALID_TIMESTAMP


class LogStorageError(LogError):
    """A read or write of a segment file failed (ENOSPC, EIO): Kafka's KafkaStorageException."""

    error = ErrorCode.KAFKA_STORAGE_ERROR


class OutOfOrderSequenceError(LogError):
    error = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    error = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    error = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    error = ErrorCode.TRANSACTION_COORDINATOR_FENCED


#: ErrorCode -> exception, for check_produce_records' verdicts
BY_CODE: dict[ErrorCode, type[LogError]] = {
    cls.error: cls
    for cls in (
        OffsetOutOfRangeError,
        CorruptRecordError,
        InvalidRecordError,
        RecordTooLargeError,
        InvalidTimestampError,
        LogStorageError,
    )
}

