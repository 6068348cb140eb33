"""An idempotent producer across leader kill -9s (issue 30, point 2): every record is in the
log exactly once, in order, though batches the dead leader had written are sent again.

The producer is raw Produce requests with a producer id and sequences (the log does not check
the id was allocated; a real client's InitProducerId is another helper's part): up to five
batches in flight, acks=all, and on any failure the first unacknowledged batch and every later
one are sent again, unchanged, to the leader the brokers name then (what librdkafka and the
Java producer do). The new leader knows the producer's last five batches from the batches it
replicated (and a restarted broker from its recovered log), so a retry of a batch it holds is
answered with the original offset instead of being stored twice."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

from benchmarks.durability import await_new_leader, consume_all, leader_of
from kmeta.log.record.batch import header_at
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import produce as pr
from kmeta.testing import Cluster
from tests.server.data_plane import fetch, only

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

TOPIC = "idem"
PRODUCER_ID, EPOCH = 4242, 0
PER_BATCH, WINDOW = 20, 5
#: what a retry may meet while leadership moves (anything else fails the test)
RETRIABLE = {6, 7, 19, 20, 5}  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), LEADER_NOT_AVAILABLE


def build(index: int) -> bytes:
    """Batch ``index``: records index*PER_BATCH.. with those values, sequence to match."""
    first = index * PER_BATCH
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=PRODUCER_ID,
        producer_epoch=EPOCH, base_sequence=first, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(PER_BATCH):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=b"%d" % (first + i), headers=[])
    return bytes(builder.build())


def produce(data: bytes) -> pr.ProduceRequest:
    return pr.ProduceRequest(
        version=9, acks=-1, timeout_ms=5_000,
        topic_data=(pr.TopicProduceData(TOPIC, (pr.PartitionProduceData(0, data),)),),
    )  # fmt: skip


class IdempotentStream:
    """Batches 0, 1, 2, ... in a thread with its own event loop until stopped; each batch
    retried until acknowledged, in order."""

    def __init__(self, cluster: Cluster) -> None:
        self.addresses = {b: cluster.address(b) for b in cluster.broker_ids}
        self.offsets: list[int] = []  # batch index -> its base offset, as acknowledged
        self.sent: set[int] = set()
        self.retries = 0
        self.retried_and_acked = 0
        self.errors: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the stream did not finish"

    async def _leader(self) -> tuple[str, int]:
        while True:
            for address in self.addresses.values():
                try:
                    conn = await KafkaConnection.open(*address, timeout_s=2)
                except OSError:
                    continue
                try:
                    answer = await conn.request(md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name=TOPIC),)), 5)
                    leader = answer.topics[0].partitions[0].leader_id
                    if leader in self.addresses:
                        return self.addresses[leader]
                except Exception:  # (a broker going away: ask the next)
                    pass
                finally:
                    conn.close()
            await asyncio.sleep(0.1)

    async def _run(self) -> None:
        batches: dict[int, bytes] = {}
        conn: KafkaConnection | None = None
        while not (self._stop.is_set() and len(self.offsets) == len(batches)):
            if conn is None:
                try:
                    conn = await KafkaConnection.open(*await self._leader(), timeout_s=2)
                except OSError:
                    await asyncio.sleep(0.1)
                    continue
            first = len(self.offsets)
            last = first + WINDOW if not self._stop.is_set() else len(batches)
            window = [batches.setdefault(i, build(i)) for i in range(first, max(last, first + 1))]
            answers = await asyncio.gather(*(conn.request(produce(b), 10) for b in window), return_exceptions=True)
            ok = True
            for i, answer in enumerate(answers, start=first):
                retry = i in self.sent
                self.sent.add(i)
                error = answer.responses[0].partition_responses[0] if not isinstance(answer, BaseException) else None
                if error is not None and error.error_code == 0 and ok:
                    self.offsets.append(error.base_offset)
                    self.retried_and_acked += retry
                    continue
                if ok and error is not None and error.error_code not in RETRIABLE:
                    self.errors.append((i, error.error_code, error.error_message))
                ok = False  # (what follows a failed batch is sent again, whatever it got)
            if not ok:
                self.retries += 1
                conn.close()
                conn = None
                if len(self.errors) > 10:
                    return
                await asyncio.sleep(0.1)
        if conn is not None:
            conn.close()


async def _send_once(address: tuple[str, int], data: bytes) -> Any:
    conn = await KafkaConnection.open(*address)
    try:
        return (await conn.request(produce(data), 10)).responses[0].partition_responses[0]
    finally:
        conn.close()


def test_an_idempotent_stream_is_stored_exactly_once_across_leader_kills() -> None:
    with Cluster(3, log_level="WARNING") as cluster:
        cluster.create_topic(TOPIC, 1, 3, configs={"min.insync.replicas": "2"})
        stream = IdempotentStream(cluster)
        stream.start()
        killed = []
        try:
            time.sleep(0.5)
            for _ in range(3):
                leader = leader_of(cluster, TOPIC, cluster.live_brokers)
                killed.append(leader)
                cluster.kill_broker(leader)  # (batches in flight: some written, some not)
                await_new_leader(cluster, TOPIC, leader)
                cluster.start_broker(leader)  # recovers its log (and producer state) from disk
                time.sleep(0.5)
        finally:
            stream.stop()
        assert stream.errors == []
        print(f"idempotent failover: {len(stream.offsets)} batches, {stream.retries} retried windows, "
              f"{stream.retried_and_acked} retried batches acknowledged, leaders killed {killed}")  # fmt: skip
        assert stream.retries >= 1  # (the kills did interrupt the stream)
        total = len(stream.offsets) * PER_BATCH
        assert stream.offsets == [i * PER_BATCH for i in range(len(stream.offsets))]
        assert consume_all(cluster, TOPIC) == list(range(total))
        # a retry of the last batch now: the leader answers with the offset it already holds
        leader = leader_of(cluster, TOPIC, cluster.live_brokers)
        again = asyncio.run(_send_once(cluster.address(leader), build(len(stream.offsets) - 1)))
        assert (again.error_code, again.base_offset) == (0, total - PER_BATCH)


class ConfluentStream:
    """confluent-kafka with ``enable.idempotence=true`` (librdkafka: acks=all, up to five
    requests in flight, retries without end) sending numbered records until stopped."""

    def __init__(self, cluster: Cluster) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({
            **cluster.client_config(), "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 120_000, "request.timeout.ms": 5_000, "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 500, "log_level": 0,
        })  # fmt: skip
        self.acknowledged: list[int] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, message: Any) -> None:
        if err is None:
            self.acknowledged.append(int(message.value()))
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(TOPIC, b"%d" % n, partition=0, on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.001)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0


class KafkaPythonStream(ConfluentStream):
    """kafka-python 3's default producer (idempotent: acks=all, five in flight)."""

    def __init__(self, cluster: Cluster) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaProducer

        self.kp = KafkaProducer(
            **cluster.client_config(kafka_python=True), linger_ms=5, request_timeout_ms=5_000,
            delivery_timeout_ms=120_000, retry_backoff_ms=50, metadata_max_age_ms=500,
        )  # fmt: skip
        self.acknowledged = []
        self.failed = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send_all, daemon=True)

    def _send_all(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = n
            future = self.kp.send(TOPIC, b"%d" % n, partition=0)
            future.add_callback(lambda _m, v=value: self.acknowledged.append(v))
            future.add_errback(lambda e: self.failed.append(repr(e)))
            n += 1
            if n % 200 == 0:
                time.sleep(0.01)  # (kafka-python's accumulator is unbounded in records)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.kp.flush(120)
        self.kp.close(timeout=10)


@pytest.mark.parametrize("client", [ConfluentStream, KafkaPythonStream], ids=["confluent-kafka", "kafka-python"])
def test_an_idempotent_client_across_leader_kills(client: type[ConfluentStream]) -> None:
    """The issue's acceptance: a real client's idempotent producer (librdkafka's
    ``enable.idempotence=true``, kafka-python 3's default), the partition leader killed -9
    mid-stream three times; every record read back exactly once, in the order sent."""
    with Cluster(3, log_level="WARNING") as cluster:
        cluster.create_topic(TOPIC, 1, 3, configs={"min.insync.replicas": "2"})
        stream = client(cluster)
        stream.start()
        killed = []
        try:
            time.sleep(1.0)
            for _ in range(3):
                leader = leader_of(cluster, TOPIC, cluster.live_brokers)
                killed.append(leader)
                cluster.kill_broker(leader)
                await_new_leader(cluster, TOPIC, leader)
                cluster.start_broker(leader)
                time.sleep(1.0)
        finally:
            stream.stop()
        assert stream.failed == []
        consumed = consume_all(cluster, TOPIC, timeout_s=60)
        print(f"{client.__name__} idempotent failover: {len(stream.acknowledged)} acknowledged, "
              f"{len(consumed)} read, leaders killed {killed}")  # fmt: skip
        assert consumed == list(range(len(consumed)))  # each once, in order, none skipped
        assert sorted(stream.acknowledged) == consumed
        # the client's last batch sent again as it was: the leader now (maybe one recovered
        # from its own files) knows it, and answers with the offset it holds
        leader = leader_of(cluster, TOPIC, cluster.live_brokers)
        stored, again = asyncio.run(_resend_last_batch(cluster.address(leader), len(consumed)))
        assert (again.error_code, again.base_offset) == (0, stored.base_offset)
        assert stored.producer_id >= 0
        assert stored.base_offset + stored.last_offset_delta == len(consumed) - 1


async def _resend_last_batch(address: tuple[str, int], end: int) -> tuple[Any, Any]:
    """The batch holding offset ``end - 1`` as the log stores it, produced again unchanged
    (base offset 0 and no leader epoch, as a producer sends it: both outside the CRC)."""
    conn = await KafkaConnection.open(*address)
    try:
        part = only(await conn.request(fetch([(TOPIC, 0, end - 1)], version=12), 10))
        data = bytes(part.records)
        h = header_at(data)
        sent = struct.pack(">q", 0) + data[8:12] + struct.pack(">i", -1) + data[16 : h.size_in_bytes]
        again = (await conn.request(produce(sent), 10)).responses[0].partition_responses[0]
        return h, again
    finally:
        conn.close()
