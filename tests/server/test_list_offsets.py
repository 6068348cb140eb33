"""ListOffsets v0-v9 against a real broker over loopback: raw requests for each version's
answers, and the real clients' offset look-ups (confluent-kafka, kafka-python)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import list_offsets as lo
from kmeta.server.broker import Broker
from tests.server.helpers import PLAINTEXT
from tests.server.log_broker import EPOCH, TOPIC, batch, log_broker, observe, produce

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: three batches: offsets 0-2, 3-4 (a timestamp out of order: the max is offset 3), 5
TIMESTAMPS = ([1000, 2000, 3000], [9000, 4000], [6000])


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with log_broker() as b:
        conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))
        for ts in TIMESTAMPS:
            resp = await produce(conn, 0, batch([b"v%d" % t for t in ts], ts))
            assert resp.error_code == 0
        conn.close()
        yield b


async def list_offsets(b: Broker, targets: list[tuple[int, int]], *, version: int = 9, replica_id: int = -1,
                       isolation: int = 0, epoch: int = -1, topic: str = TOPIC,
                       max_num_offsets: int = 1, together: bool = False) -> list[lo.ListOffsetsPartitionResponse]:  # fmt: skip
    """(partition, timestamp) pairs -> the partition answers, in order: a request each (a
    partition named twice in one request is refused), or all in one with ``together``."""
    conn = await KafkaConnection.open("127.0.0.1", b.port(PLAINTEXT))

    def request(pairs: list[tuple[int, int]]) -> lo.ListOffsetsRequest:
        return lo.ListOffsetsRequest(
            version=version, replica_id=replica_id, isolation_level=isolation,
            topics=(lo.ListOffsetsTopic(topic, tuple(
                lo.ListOffsetsPartition(p, epoch, ts, max_num_offsets) for p, ts in pairs)),),
        )  # fmt: skip

    try:
        groups = [targets] if together else [[pair] for pair in targets]
        answers = [await conn.request(request(group), 10) for group in groups]
        return [p for resp in answers for t in resp.topics for p in t.partitions]
    finally:
        conn.close()


def answer(p: lo.ListOffsetsPartitionResponse) -> tuple[int, int, int, int]:
    return p.error_code, p.offset, p.timestamp, p.leader_epoch


async def test_earliest_latest_by_timestamp_and_max_timestamp(broker: Broker) -> None:
    got = await list_offsets(broker, [(0, -2), (0, -1), (0, 2500), (0, 0), (0, 6000), (0, 9001), (0, -3), (0, -4)])
    assert [answer(p) for p in got] == [
        (E.NONE, 0, -1, EPOCH),  # earliest: the log start, the epoch that starts there
        (E.NONE, 6, -1, EPOCH),  # latest: the high watermark, the current leader epoch
        (E.NONE, 2, 3000, EPOCH),  # the first record at or after 2500
        (E.NONE, 0, 1000, EPOCH),
        (E.NONE, 3, 9000, EPOCH),  # (the first record, in offset order, stamped >= 6000)
        (E.NONE, -1, -1, -1),  # none that late
        (E.NONE, 3, 9000, EPOCH),  # max timestamp (KIP-734): the record that holds it
        (E.NONE, 0, -1, EPOCH),  # earliest local: no tiered storage, so the log start
    ]


async def test_latest_tiered_is_none_without_remote_storage(broker: Broker) -> None:
    assert [answer(p) for p in await list_offsets(broker, [(0, -5)])] == [(E.NONE, -1, -1, -1)]


@pytest.mark.parametrize(
    ("version", "target"),
    [(6, -3), (7, -4), (8, -5), (9, -6), (9, -100), (3, -3)],
)
async def test_targets_newer_than_the_version_are_unsupported(broker: Broker, version: int, target: int) -> None:
    (p,) = await list_offsets(broker, [(0, target)], version=version)
    assert answer(p) == (E.UNSUPPORTED_VERSION, -1, -1, -1)


async def test_each_version_answers_its_fields(broker: Broker) -> None:
    for version in range(1, 10):
        (p,) = await list_offsets(broker, [(0, 2500)], version=version)
        assert (p.offset, p.timestamp) == (2, 3000)
        assert p.leader_epoch == (EPOCH if version >= 4 else -1)


async def test_v0_old_style_offsets(broker: Broker) -> None:
    far = int(time.time() * 1000) + 3_600_000
    got = await list_offsets(broker, [(0, -1), (0, -2), (0, far), (0, 1)], version=0, max_num_offsets=10)
    assert [(p.error_code, list(p.old_style_offsets)) for p in got] == [
        (E.NONE, [6, 0]),  # the log end (the active segment holds records), then its base
        (E.NONE, [0]),
        (E.NONE, [6, 0]),
        (E.NONE, []),  # (nothing stamped at or before 1 ms after the epoch)
    ]
    (one,) = await list_offsets(broker, [(0, -1)], version=0, max_num_offsets=1)
    assert list(one.old_style_offsets) == [6]
    (neg,) = await list_offsets(broker, [(0, -1)], version=0, max_num_offsets=-1)
    assert neg.error_code == E.UNKNOWN_SERVER_ERROR
    (bad,) = await list_offsets(broker, [(0, -3)], version=0)
    assert bad.error_code == E.UNSUPPORTED_VERSION


async def test_partitions_led_elsewhere_unknown_or_fenced(broker: Broker) -> None:
    got = await list_offsets(broker, [(2, -1), (7, -1)])
    assert [p.error_code for p in got] == [E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION]
    (unknown,) = await list_offsets(broker, [(0, -1)], topic="nope")
    assert unknown.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    (old,) = await list_offsets(broker, [(0, -1)], epoch=EPOCH - 1)
    (new,) = await list_offsets(broker, [(0, -1)], epoch=EPOCH + 1)
    (same,) = await list_offsets(broker, [(0, -1)], epoch=EPOCH)
    assert [old.error_code, new.error_code, same.error_code] == [
        E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.NONE,
    ]  # fmt: skip
    # Kafka's debugging replica id (-2) may read a follower's log
    (debug,) = await list_offsets(broker, [(2, -1)], replica_id=-2)
    assert answer(debug)[:2] == (E.NONE, 0)


async def test_a_partition_named_twice_is_an_invalid_request(broker: Broker) -> None:
    got = await list_offsets(broker, [(0, -1), (0, -2), (1, -1)], together=True)
    assert [(p.partition_index, p.error_code) for p in got] == [(0, E.INVALID_REQUEST), (1, E.NONE)]
    # a topic named twice is answered as one, keyed by partition (Kafka's map)
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    twice = lo.ListOffsetsRequest(version=9, replica_id=-1, topics=(
        lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(0, -1, -1),)),
        lo.ListOffsetsTopic(TOPIC, (lo.ListOffsetsPartition(1, -1, -1),))))  # fmt: skip
    resp = await conn.request(twice, 10)
    conn.close()
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [(TOPIC, [0, 1])]
    v0s = await list_offsets(broker, [(1, -1), (1, -1)], version=0, together=True)
    assert [p.error_code for p in v0s] == [E.NONE, E.NONE]  # (v0 has no duplicate check)


async def test_isolation_levels_and_replica_reads_bound_the_answer(broker: Broker) -> None:
    for isolation in (0, 1):  # read_committed: the last stable offset, the HW until transactions
        (p,) = await list_offsets(broker, [(0, -1)], isolation=isolation)
        assert p.offset == 6
    (p,) = await list_offsets(broker, [(0, -1)], replica_id=1)  # a broker: the log end
    assert p.offset == 6


async def test_confluent_kafka_watermarks_and_offsets_for_times(broker: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    bootstrap = f"127.0.0.1:{broker.port(PLAINTEXT)}"

    def look_up() -> tuple[tuple[int, int], list[int], dict[str, int]]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
        try:
            marks = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
            # (one partition per look-up: a partition named twice in one request is refused)
            times = [consumer.offsets_for_times([TopicPartition(TOPIC, 0, ts)], timeout=10)[0] for ts in (2500, 9001)]
        finally:
            consumer.close()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
                 "max": OffsetSpec.max_timestamp(), "t": OffsetSpec.for_timestamp(2500)}  # fmt: skip
        listed = {
            name: admin.list_offsets({TopicPartition(TOPIC, 0): spec})[TopicPartition(TOPIC, 0)].result(10).offset
            for name, spec in specs.items()
        }
        return marks, [tp.offset for tp in times], listed

    marks, times, listed = await asyncio.to_thread(look_up)
    assert marks == (0, 6)
    assert times == [2, -1]
    assert listed == {"earliest": 0, "latest": 6, "max": 3, "t": 2}


async def test_kafka_python_beginning_end_and_times(broker: Broker) -> None:
    from kafka import KafkaConsumer, TopicPartition

    def look_up() -> tuple[int, int, int | None]:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port(PLAINTEXT)}")
        try:
            tp = TopicPartition(TOPIC, 0)
            begin = consumer.beginning_offsets([tp])[tp]
            end = consumer.end_offsets([tp])[tp]
            found = consumer.offsets_for_times({tp: 2500})[tp]
            return begin, end, None if found is None else found.offset
        finally:
            consumer.close()

    assert await asyncio.to_thread(look_up) == (0, 6, 2)


@pytest.mark.parametrize(("api_version", "list_offsets_version"), [((0, 9), 0), ((0, 10, 1), 1), ((2, 1), 4)])
async def test_older_kafka_python_clients_list_offsets(
    broker: Broker, api_version: tuple[int, ...], list_offsets_version: int
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    versions = observe(broker)

    def look_up() -> tuple[int, int]:
        consumer = KafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{broker.port(PLAINTEXT)}", api_version=api_version, group_id=None
        )
        try:
            tp = TopicPartition(TOPIC, 0)
            return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
        finally:
            consumer.close()

    assert await asyncio.to_thread(look_up) == (0, 6)
    assert versions.seen[2] == {list_offsets_version}
