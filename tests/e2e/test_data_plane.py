"""The data plane with real processes and real clients: a `kmeta broker` given its partitions
as the controller gives them (UpdateMetadata then LeaderAndIsr on its control listener);
confluent-kafka produces with acks 0, 1 and all, confluent-kafka and kafka-python consume every
record in order; a broker with --log-dir stopped (SIGTERM) or killed (-9) and started again
serves the same records byte for byte."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmeta.net.connection import KafkaConnection
from tests.helpers import accepts, free_ports, wait
from tests.server.data_plane import Part, as_stored, batch, fetch, only, produce, push

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

TOPIC = "stream"
PARTS: dict[str, list[Part]] = {TOPIC: [(i, 1, (1,), (1,), 2) for i in range(3)]}


class BrokerProcess:
    def __init__(self, log_dir: Path | None) -> None:
        self.client, self.control = free_ports(2)
        argv = [
            sys.executable, "-m", "kmeta", "broker", "--broker-id", "1",
            "--listeners", f"PLAINTEXT://127.0.0.1:{self.client},CONTROL://127.0.0.1:{self.control}",
            "--cluster-id", "kmeta-test", "--log-level", "WARNING",
            *(("--log-dir", str(log_dir)) if log_dir is not None else ()),
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        wait(lambda: accepts(self.control) and accepts(self.client), 30, "the broker listening")
        asyncio.run(push(self.client, self.control, PARTS))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.client}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        assert self.proc.wait(30) in (0, -signal.SIGKILL, -signal.SIGTERM)


def _produce(bootstrap: str, acks: str, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False})
    delivered: list[object] = []
    for i in range(count):
        producer.produce(TOPIC, value=f"{tag}-{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, _m: delivered.append(err))  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0
    assert delivered == [None] * count


def _consume_confluent(bootstrap: str, count: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                got[message.partition()].append(message.value())
                assert message.offset() == len(got[message.partition()]) - 1
    finally:
        consumer.close()
    return got


def _consume_kafka_python(bootstrap: str, count: int) -> dict[int, list[bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    partitions = [KpTopicPartition(TOPIC, p) for p in range(3)]
    consumer.assign(partitions)
    for tp in partitions:  # (explicit offsets: no ListOffsets needed)
        consumer.seek(tp, 0)
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            for tp, messages in consumer.poll(1000).items():
                for m in messages:
                    got[tp.partition].append(m.value)
                    assert m.offset == len(got[tp.partition]) - 1
    finally:
        consumer.close()
    return got


def _expected(runs: list[tuple[str, int]]) -> dict[int, list[bytes]]:
    want: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for tag, count in runs:
        for i in range(count):
            want[i % 3].append(f"{tag}-{i}".encode())
    return want


def test_real_clients_produce_with_each_acks_and_consume_everything_in_order() -> None:
    broker = BrokerProcess(None)
    try:
        runs = [("acks0", 600), ("acks1", 600), ("acksall", 600)]
        for (tag, count), acks in zip(runs, ("0", "1", "all"), strict=True):
            _produce(broker.bootstrap, acks, count, tag)
        want = _expected(runs)
        assert _consume_confluent(broker.bootstrap, 1800) == want
        assert _consume_kafka_python(broker.bootstrap, 1800) == want
    finally:
        broker.stop()


async def _all_records(port: int) -> bytes:
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        answer = await conn.request(fetch([(TOPIC, p, 0) for p in range(3)], max_bytes=64 << 20), 10)
        return b"".join(bytes(p.records) for t in answer.responses for p in t.partitions)
    finally:
        conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_restarted_broker_keeps_its_log(tmp_path: Path, sig: int) -> None:
    broker = BrokerProcess(tmp_path / "logs")
    try:
        _produce(broker.bootstrap, "1", 300, "before")
        before = asyncio.run(_all_records(broker.client))
        assert len(before) > 300 * 10
    finally:
        broker.stop(sig)
    again = BrokerProcess(tmp_path / "logs")
    try:
        assert asyncio.run(_all_records(again.client)) == before  # byte for byte
        _produce(again.bootstrap, "1", 30, "after")  # offsets go on from the log end
        assert _consume_confluent(again.bootstrap, 330) == _expected([("before", 300), ("after", 30)])
    finally:
        again.stop()


async def _produce_one(port: int, data: bytes) -> tuple[int, int]:
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        answer = only(await conn.request(produce(TOPIC, 0, data, acks=1), 10))
        return answer.error_code, answer.base_offset
    finally:
        conn.close()


def test_a_failed_write_is_kafka_storage_error_and_stores_nothing(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "logs")
    try:
        first, lost, after = batch(2), batch(1, value=b"L" * 4000), batch(3)
        assert asyncio.run(_produce_one(broker.client, first)) == (0, 0)
        (segment,) = (tmp_path / "logs" / f"{TOPIC}-0").glob("*.log")
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        # the broker may not grow a file by more than 50 bytes: the write fails part way (EFBIG;
        # Python ignores SIGXFSZ), as on a full disk
        resource.prlimit(broker.proc.pid, resource.RLIMIT_FSIZE, (segment.stat().st_size + 50, hard))
        try:
            assert asyncio.run(_produce_one(broker.client, lost)) == (56, -1)  # KAFKA_STORAGE_ERROR
        finally:
            resource.prlimit(broker.proc.pid, resource.RLIMIT_FSIZE, (soft, hard))
        assert asyncio.run(_produce_one(broker.client, after)) == (0, 2)  # (nothing of it counted)
        stored = asyncio.run(_all_records(broker.client))
        assert stored == as_stored(first, 0, 2) + as_stored(after, 2, 2)  # nothing half stored
    finally:
        broker.stop()
