"""``__transaction_state`` records in Kafka's format (TransactionLogKey / TransactionLogValue),
checked against bytes laid out by hand from Kafka's JSON schemas."""

from __future__ import annotations

import struct

import pytest

from kmeta.protocol.errors import CorruptMessageError
from kmeta.server.txn.metadata import TransactionState, TxnTransit
from kmeta.server.txn.records import (
    VALUE,
    UnknownRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_the_key_is_version_0_and_a_string() -> None:
    assert encode_key("my-txn") == b"\x00\x00" + b"\x00\x06my-txn"
    assert decode_key(b"\x00\x00\x00\x02ab") == "ab"
    with pytest.raises(UnknownRecord):
        decode_key(b"\x00\x01\x00\x02ab")  # (a group record's key, say: skipped by the shard)


def test_an_ongoing_value_as_kafka_lays_it_out() -> None:
    t = TxnTransit(42, -1, 3, -1, 60_000, TransactionState.ONGOING, frozenset({("b", 1), ("a", 0), ("a", 2)}), 1000, 2000)
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60_000, 1)
        + struct.pack(">i", 2)  # TransactionPartitions: two topics, sorted
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 2000, 1000)  # last update, then start
    )
    assert encode_value(t) == expected
    assert decode_value(expected) == t


def test_an_empty_value_has_null_partitions() -> None:
    t = TxnTransit(42, -1, 0, -1, 1_000, TransactionState.EMPTY, frozenset(), -1, 5)
    data = encode_value(t)
    assert data[2 + 8 + 2 + 4 + 1:][:4] == b"\xff\xff\xff\xff"
    assert decode_value(data) == t


def test_version_1_is_read_with_its_tagged_fields() -> None:
    t = TxnTransit(7, 6, 0, -1, 1_000, TransactionState.COMPLETE_ABORT, frozenset(), 10, 20)
    data = encode_value(t, version=1)
    assert data[:2] == b"\x00\x01"
    assert decode_value(data) == t  # (the previous producer id is a tagged field of v1)
    assert VALUE.decode(data, 1, 2).previous_producer_id == 6


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00", b"\x00\x09" + bytes(40)])
def test_bytes_that_are_not_a_value_raise_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_value(data)


def test_an_unknown_status_is_corrupt() -> None:
    good = encode_value(TxnTransit(1, -1, 0, -1, 1, TransactionState.EMPTY, frozenset(), -1, 0))
    bad = good[:16] + b"\x09" + good[17:]
    with pytest.raises(CorruptMessageError):
        decode_value(bad)
