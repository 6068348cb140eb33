"""Producer state snapshot files on a file-backed broker (issue 30, point 2): an idempotent
producer's batches all go with retention, the broker is restarted (kill -9, then a clean
stop), and the producer is still known: a retry of its last batch is answered with the
original offsets (nothing stored), a batch out of sequence is refused. And
``--producer-id-expiration-ms`` reaches the broker: past it the producer is forgotten there.

The producer is raw Produce requests carrying a producer id and sequences (as in
tests/e2e/test_idempotent_failover.py), so the test chooses which batch is retried."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import produce as pr
from kmeta.testing import Cluster
from tests.server.data_plane import fetch, only

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

TOPIC = "snap"
PID = 777
#: what a request may meet while the restarted broker takes its leadership back
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE}


def batch(seq: int, n: int, *, pid: int = PID, age_ms: int = 0, size: int = 10) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1, base_sequence=seq if pid >= 0 else -1, batch_size=1 << 20,
    )  # fmt: skip
    ts = int(time.time() * 1000) - age_ms
    for i in range(n):
        builder.append(i, timestamp=ts, key=None, value=b"v" * size, headers=[])
    return bytes(builder.build())


def send(cluster: Cluster, data: bytes, timeout_s: float = 60.0) -> Any:
    """One Produce (acks=all) to broker 1, retried while its leadership is not back."""

    async def once() -> Any:
        conn = await KafkaConnection.open(*cluster.address(1))
        try:
            request = pr.ProduceRequest(
                version=9, acks=-1, timeout_ms=5_000,
                topic_data=(pr.TopicProduceData(TOPIC, (pr.PartitionProduceData(0, data),)),),
            )  # fmt: skip
            return only(await conn.request(request, 30.0))
        finally:
            conn.close()

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            part = asyncio.run(once())
        except OSError:
            part = None
        if part is not None and part.error_code not in RETRIABLE:
            return part
        assert time.monotonic() < deadline, part
        time.sleep(0.2)


def gone(cluster: Cluster, offset: int) -> bool:
    """Whether the log starts past ``offset`` (a Fetch there is OFFSET_OUT_OF_RANGE)."""

    async def once() -> int:
        conn = await KafkaConnection.open(*cluster.address(1))
        try:
            return int(only(await conn.request(fetch([(TOPIC, 0, offset)]), 10.0)).error_code)
        finally:
            conn.close()

    return asyncio.run(once()) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_producer_gone_with_retention_is_known_across_kill_and_clean_restarts() -> None:
    configs = {"segment.bytes": "1024", "retention.ms": "600000"}
    with Cluster(1, broker_args=("--log-retention-check-interval-ms", "200")) as cluster:
        cluster.create_topic(TOPIC, 1, 1, configs=configs)
        hour = 3_600_000  # (older than retention.ms: the producer's segments go)
        assert send(cluster, batch(0, 3, age_ms=hour)).base_offset == 0
        assert send(cluster, batch(3, 2, age_ms=hour)).base_offset == 3  # its last batch: 3-4
        for _ in range(6):  # fresh plain records, rolling segments past the producer's
            send(cluster, batch(0, 1, pid=-1, size=950))
        deadline = time.monotonic() + 30
        while not gone(cluster, 4):  # retention removed every batch of the producer
            assert time.monotonic() < deadline
            time.sleep(0.2)
        end = send(cluster, batch(0, 1, pid=-1)).base_offset + 1
        for kill in (True, False):
            cluster.restart_broker(1, kill=kill)
            retry = send(cluster, batch(3, 2))
            assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 3), kill
            gap = send(cluster, batch(9, 1))
            assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, kill
            assert gone(cluster, 4)
        nxt = send(cluster, batch(5, 1))  # the next in sequence is stored, after the rest
        assert (nxt.error_code, nxt.base_offset) == (ErrorCode.NONE, end)


def test_producer_id_expiration_ms_forgets_an_idle_producer() -> None:
    with Cluster(
        1, producer_id_expiration_ms=1500, broker_args=("--log-retention-check-interval-ms", "200")
    ) as cluster:
        cluster.create_topic(TOPIC, 1, 1)
        assert send(cluster, batch(0, 2)).error_code == ErrorCode.NONE
        assert send(cluster, batch(9, 1)).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        time.sleep(2.5)  # (idle past 1.5 s, and a retention check since)
        assert send(cluster, batch(9, 1)).error_code == ErrorCode.NONE  # an unknown producer's
