"""Compacted topics under real brokers and a real client (confluent-kafka): records produced
with repeated keys and tombstones into small segments are compacted by the brokers' cleaner
(leader and follower each clean their own log), a consumer from the beginning reads the latest
value of every key at the offset it was produced at, tombstones until delete.retention.ms;
retention never cuts a compact-only topic; a record without a key is refused."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


def _produce(cluster: Cluster, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> list[int]:
    # (one record a batch: batches are what segments roll between and the cleaner rewrites)
    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 0, "batch.num.messages": 1})
    offsets: list[int] = []
    errors: list[object] = []

    def report(err: object, message: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(message.offset())  # type: ignore[attr-defined]

    for key, value in records:
        producer.produce(topic, value, key, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    if errors:
        raise AssertionError(errors)
    return offsets


def _read_all(cluster: Cluster, topic: str) -> list[Record]:
    """Every record from the beginning to the end the partition has now."""
    consumer = Consumer({**cluster.client_config(), "group.id": "unused", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[Record] = []
        deadline = time.monotonic() + 30
        while (not got or got[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.key(), m.value()))
        return got
    finally:
        consumer.close()


def test_a_compacted_topic_keeps_the_latest_value_per_key() -> None:
    with Cluster(2, log_cleaner_backoff_ms=200) as cluster:
        cluster.create_topic("changelog", 1, 2, configs={
            "cleanup.policy": "compact", "segment.bytes": "2048", "delete.retention.ms": "10000",
            "min.cleanable.dirty.ratio": "0.01",
        })  # fmt: skip
        writes: list[tuple[bytes | None, bytes | None]] = []
        for r in range(30):
            for k in range(8):
                if k == 7 and r >= 10:
                    continue  # k7: deleted at round 10, never written again
                value = None if (k == 7 and r == 9) else b"value-%d-%d" % (k, r) + b"." * 60
                writes.append((b"key-%d" % k, value))
        offsets = _produce(cluster, "changelog", writes)
        assert offsets == list(range(len(writes)))
        produced_at = dict(zip(offsets, writes, strict=True))
        latest = {key: (o, value) for o, (key, value) in sorted(produced_at.items())}

        deadline = time.monotonic() + 60
        while True:  # until the cleaner compacted what is below the active segment
            got = _read_all(cluster, "changelog")
            if len(got) < 60:
                break
            assert time.monotonic() < deadline, f"not compacted: {len(got)} records"
            time.sleep(0.5)
        for offset, key, value in got:  # each record where and as it was produced
            assert produced_at[offset] == (key, value)
        seen_last = {key: (offset, value) for offset, key, value in got}
        assert latest[b"key-7"][1] is None  # the tombstone is k7's latest: it stays a while
        assert seen_last == latest

        deadline = time.monotonic() + 60
        while any(key == b"key-7" for _, key, _ in _read_all(cluster, "changelog")):
            assert time.monotonic() < deadline, "the tombstone outlived delete.retention.ms"
            time.sleep(0.5)
        final = _read_all(cluster, "changelog")
        assert {key: (o, v) for o, key, v in final} == {k: v for k, v in latest.items() if k != b"key-7"}

        with pytest.raises(AssertionError) as refused:
            _produce(cluster, "changelog", [(None, b"no key")])
        assert [e.code() for e in refused.value.args[0]] == [KafkaError.INVALID_RECORD]  # type: ignore[attr-defined]


def test_retention_never_cuts_a_compact_only_topic() -> None:
    with Cluster(1, log_retention_check_interval_ms=200, log_cleaner_backoff_ms=200) as cluster:
        tiny = {"segment.bytes": "1024", "retention.ms": "1", "retention.bytes": "1"}
        cluster.create_topic("kept", 1, 1, configs={**tiny, "cleanup.policy": "compact"})
        cluster.create_topic("dropped", 1, 1, configs={**tiny, "cleanup.policy": "delete"})
        writes: list[tuple[bytes | None, bytes | None]] = [(b"k%d" % i, b"v" * 100) for i in range(60)]
        for topic in ("kept", "dropped"):
            _produce(cluster, topic, writes)
        consumer = Consumer({**cluster.client_config(), "group.id": "unused"})
        try:
            deadline = time.monotonic() + 30
            while consumer.get_watermark_offsets(TopicPartition("dropped", 0), 10)[0] == 0:
                assert time.monotonic() < deadline, "retention never ran"
                time.sleep(0.2)
            assert consumer.get_watermark_offsets(TopicPartition("kept", 0), 10) == (0, 60)
        finally:
            consumer.close()
        assert [o for o, _, _ in _read_all(cluster, "kept")] == list(range(60))


def test_committed_offsets_survive_compaction_of_consumer_offsets() -> None:
    """The reason compacted topics must never lose data: a group's committed offsets live in
    __consumer_offsets; compacted (segments rolled small), then loaded again by a restarted
    broker's coordinator, the last commit of each partition is what the group reads back."""
    with Cluster(1, log_cleaner_backoff_ms=200, offsets_topic_num_partitions=1) as cluster:
        cluster.create_topic("orders", 2, 1)
        config = {**cluster.client_config(), "group.id": "g", "enable.auto.commit": False}
        consumer = Consumer(config)
        try:
            deadline = time.monotonic() + 30
            while True:  # (until __consumer_offsets exists and its coordinator loaded)
                try:
                    consumer.commit(offsets=[TopicPartition("orders", 0, 1)], asynchronous=False)
                    break
                except Exception:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            admin = AdminClient(cluster.client_config())
            small = {"segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
            resource = ConfigResource(
                ConfigResource.Type.TOPIC, "__consumer_offsets",
                incremental_configs=[ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                                     for k, v in small.items()],
            )  # fmt: skip
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(30)
            for i in range(2, 150):
                consumer.commit(offsets=[TopicPartition("orders", i % 2, i)], asynchronous=False)
        finally:
            consumer.close()
        deadline = time.monotonic() + 60
        while len(records := _read_all(cluster, "__consumer_offsets")) > 30:
            assert time.monotonic() < deadline, f"__consumer_offsets not compacted: {len(records)}"
            time.sleep(0.5)
        cluster.restart_broker(1)
        consumer = Consumer(config)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    got = consumer.committed([TopicPartition("orders", p) for p in (0, 1)], timeout=5)
                    break
                except Exception:  # (the coordinator loading after the restart)
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            assert [(tp.partition, tp.offset) for tp in got] == [(0, 148), (1, 149)]
        finally:
            consumer.close()
