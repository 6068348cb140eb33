"""The records of ``__transaction_state``, in Kafka's own format (``TransactionLogKey.json``
and ``TransactionLogValue.json`` of apache/kafka's transaction-coordinator resources), so a
Kafka tool reading the topic understands them.

Both are "data" messages declared with the schema DSL, each written behind an int16 version
(Kafka's ``TransactionLog.keyToBytes`` / ``valueToBytes``):

* key, version 0: ``TransactionalId`` (string).
* value, version 0: ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus (int8,
  the state's id), TransactionPartitions (nullable; null in Empty),
  TransactionLastUpdateTimestampMs, TransactionStartTimestampMs. Kafka 3.9 writes version 0
  while the finalized ``transaction.version`` feature is 0 (its default; kmeta finalizes no
  such feature, so it writes version 0 always), else version 1, which in 3.9 is the same fields
  flexible, with no tagged field. Kafka 4.0 declares tagged PreviousProducerId (0),
  NextProducerId (1) and ClientTransactionVersion (2) in version 1 (and writes version 1 for
  transaction version 2 clients only); both versions and those tags are read here.
* Neither version carries the epoch before the last InitProducerId bump (KIP-360's
  ``lastProducerEpoch``), and Kafka 3.9's reader sets it and the previous producer id to -1: a
  retried bump is answered from memory by the coordinator that made it, and a new coordinator
  fences it (PRODUCER_FENCED), as Kafka's does.

A value is None for a tombstone (an expired transactional id). Bytes that do not decode raise
:class:`~kmeta.protocol.errors.CorruptMessageError`; a key of a version Kafka does not define is
:class:`UnknownRecord` (the shard skips it, as Kafka's loader skips unknown record types).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kmeta.protocol.codec.schema import F, Message
from kmeta.protocol.errors import CorruptMessageError
from kmeta.server.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionState,
    TxnTransit,
)

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0


class TransactionLogKey(NamedTuple):
    version: int = 0
    transactional_id: str = ''


class PartitionsSchema(NamedTuple):
    topic: str = ''
    partition_ids: Sequence[int] = ()


class TransactionLogValue(NamedTuple):
    version: int = 1
    producer_id: int = 0
    previous_producer_id: int = -1
    next_producer_id: int = -1
    producer_epoch: int = 0
    transaction_timeout_ms: int = 0
    transaction_status: int = 0
    transaction_partitions: Sequence[PartitionsSchema] | None = ()
    transaction_last_update_timestamp_ms: int = 0
    transaction_start_timestamp_ms: int = 0
    client_transaction_version: int = 0


KEY: Message[TransactionLogKey] = Message(
    'TransactionLogKey',
    api_key=None,
    valid='0',
    flexible='none',
    fields=(F('transactional_id', 'string', '0'),),
    records=(TransactionLogKey,),
)

VALUE: Message[TransactionLogValue] = Message(
    'TransactionLogValue',
    api_key=None,
    valid='0-1',
    flexible='1+',
    fields=(
        F('producer_id', 'int64', '0+'),
        F('previous_producer_id', 'int64', '1+', tag=0, tagged='1+', default=-1),
        F('next_producer_id', 'int64', '1+', tag=1, tagged='1+', default=-1),
        F('producer_epoch', 'int16', '0+'),
        F('transaction_timeout_ms', 'int32', '0+'),
        F('transaction_status', 'int8', '0+'),
        F('transaction_partitions', '[]PartitionsSchema', '0+',
            F('topic', 'string', '0+'),
            F('partition_ids', '[]int32', '0+'),
            nullable='0+'),
        F('transaction_last_update_timestamp_ms', 'int64', '0+'),
        F('transaction_start_timestamp_ms', 'int64', '0+'),
        F('client_transaction_version', 'int16', '1+', tag=2, tagged='1+', default=0),
    ),
    records=(TransactionLogValue, PartitionsSchema),
)


class UnknownRecord(Exception):
    """A record of a key version this coordinator does not know."""


def _version_of(data: bytes) -> int:
    if len(data) < 2:
        raise CorruptMessageError("a __transaction_state record shorter than its version")
    version: int = _VERSION.unpack_from(data)[0]
    return version


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + KEY.encode(TransactionLogKey(KEY_VERSION, transactional_id))


def decode_key(data: bytes) -> str:
    version = _version_of(data)
    if version != KEY_VERSION:
        raise UnknownRecord(f"__transaction_state key version {version}")
    return KEY.decode(data, version, 2).transactional_id


def encode_value(t: TxnTransit, version: int = VALUE_VERSION) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.topic_partitions):
        by_topic.setdefault(topic, []).append(partition)
    partitions = (
        None
        if t.state == TransactionState.EMPTY
        else tuple(PartitionsSchema(topic, tuple(ids)) for topic, ids in by_topic.items())
    )
    value = TransactionLogValue(
        version=version,
        producer_id=t.producer_id,
        previous_producer_id=t.previous_producer_id,
        producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms,
        transaction_status=int(t.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms=t.txn_start_timestamp_ms,
    )
    return _VERSION.pack(version) + VALUE.encode(value)


def decode_value(data: bytes) -> TxnTransit:
    version = _version_of(data)
    if version not in VALUE.valid:
        raise CorruptMessageError(f"__transaction_state value version {version}")
    v = VALUE.decode(data, version, 2)
    try:
        state = TransactionState(v.transaction_status)
    except ValueError:
        raise CorruptMessageError(f"transaction status {v.transaction_status}") from None
    parts = frozenset((p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids)
    return TxnTransit(
        producer_id=v.producer_id,
        previous_producer_id=v.previous_producer_id if version >= 1 else NO_PRODUCER_ID,
        producer_epoch=v.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=v.transaction_timeout_ms,
        state=state,
        topic_partitions=parts,
        txn_start_timestamp_ms=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp_ms=v.transaction_last_update_timestamp_ms,
    )
