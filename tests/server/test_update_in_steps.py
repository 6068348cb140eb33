"""A large UpdateMetadata is applied in steps: the loop keeps serving, readers see whole updates.

Real broker, real sockets: a 100k-partition UpdateMetadata (v8 FULL, 100 topics of 1000
partitions, RF 3) is sent to the CONTROL listener while a client polls Metadata on PLAINTEXT.
Applied in one call it held the loop ~300 ms of CPU (decode ~80 ms + apply ~250 ms on the
2-core box); in steps no wakeup of the broker's loop-lag probe comes later than 100 ms of CPU.
The bound is on CPU time (``LoopLagProbe.max_cpu_s``), which a loaded machine does not stretch.

The broker runs inside the test process, whose heap holds what every earlier test left: a
full collection over it (288 ms of CPU in the whole suite) is not the broker's work, so the
heap from before each test is frozen out of the collector, as a broker process starts.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.broker import Broker
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    encode_frame,
    live_broker,
    loopback_config,
    read_frame,
)

TOPICS, PER_TOPIC = 100, 1000
BROKERS = (1, 2, 3)


def big_update(port: int, controller_epoch: int = 1, version_type: int = 2) -> bytes:
    # every partition state distinct (zk version): the broker decodes each distinct state once,
    # so this is the costliest 100k update to apply, taking many steps on any machine
    def part(p: int) -> Any:
        r = tuple(BROKERS[(p + i) % 3] for i in range(3))
        return um.UpdateMetadataPartitionState(partition_index=p, controller_epoch=controller_epoch,
                                               leader=r[0], leader_epoch=1, isr=r, zk_version=p,
                                               replicas=r)  # fmt: skip

    parts = tuple(part(p) for p in range(PER_TOPIC))
    request = um.UpdateMetadataRequest(
        version=8, controller_id=1, is_kraft_controller=True, type=version_type,
        controller_epoch=controller_epoch,
        topic_states=tuple(um.UpdateMetadataTopicState(f"big-{t:03d}", uuid.UUID(int=t + 1), parts)
                           for t in range(TOPICS)),
        live_brokers=tuple(live_broker(b, {PLAINTEXT: ("127.0.0.1", port)}) for b in BROKERS),
    )  # fmt: skip
    return encode_frame(request, 1)


def small_update(port: int, topic: str, controller_epoch: int = 1) -> bytes:
    request = um.UpdateMetadataRequest(
        version=8, controller_id=1, is_kraft_controller=True, type=1, controller_epoch=controller_epoch,
        topic_states=(um.UpdateMetadataTopicState(topic, uuid.uuid4(), (
            um.UpdateMetadataPartitionState(partition_index=0, controller_epoch=controller_epoch,
                                            leader=1, isr=(1,), replicas=(1,)),)),),
        live_brokers=tuple(live_broker(b, {PLAINTEXT: ("127.0.0.1", port)}) for b in BROKERS),
    )  # fmt: skip
    return encode_frame(request, 2)


def update_answer(frame: bytes) -> int:
    # response header v1 (flexible): correlation id, tag section; then the error code
    return int.from_bytes(frame[5:7], "big", signed=True)


#: a full collection over what earlier tests left in this process is not the step's work
pytestmark = pytest.mark.usefixtures("broker_heap_only")


async def started_in_steps(broker: Broker, timeout_s: float = 30.0) -> None:
    """Wait until the broker applies a control request in steps (its ControlOrder is busy)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not broker.state.control_order.busy:
        assert asyncio.get_running_loop().time() < deadline, "no update was applied in steps"
        await asyncio.sleep(0.001)


async def started() -> Broker:
    broker = Broker(loopback_config(1, metrics_port=0))
    await broker.start()
    return broker


async def test_a_100k_partition_update_never_holds_the_loop_and_readers_see_it_whole() -> None:
    broker = await started()
    assert broker.loop_lag is not None
    port = broker.port(PLAINTEXT)
    frame = big_update(port)
    client = await KafkaConnection.open("127.0.0.1", port)
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    try:
        await asyncio.sleep(0.1)  # the probe's first wakeups
        broker.loop_lag.max_cpu_s = 0.0
        writer.write(frame)
        answered = asyncio.ensure_future(read_frame(reader, 60))
        # the first and the last topic of the update: a half-applied one would show one only
        names = ("big-000", "big-099")
        probe = md.MetadataRequest(
            version=12, topics=tuple(md.MetadataRequestTopic(name=n) for n in names)
        )
        seen: list[tuple[tuple[int, int], ...]] = []
        while not answered.done():
            resp = await client.request(probe, 10)
            seen.append(tuple((t.error_code, len(t.partitions)) for t in resp.topics))
        assert update_answer(answered.result()) == ErrorCode.NONE
        after = await client.request(probe, 10)
        seen.append(tuple((t.error_code, len(t.partitions)) for t in after.topics))
        unknown = ((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),) * 2
        whole = ((ErrorCode.NONE, PER_TOPIC),) * 2
        assert set(seen) == {unknown, whole}, set(seen)  # the update before it, or all of it
        # clients were answered while the update was applied (from the snapshot before it)
        assert seen.count(unknown) >= 3, seen
        assert seen[-1] == whole
        snap = broker.cache.snapshot
        assert snap.version == 1  # one update, one snapshot
        assert sum(len(p) for p in snap.partition_states.values()) == TOPICS * PER_TOPIC
        assert broker.state.holds_full_metadata
        held_ms = broker.loop_lag.max_cpu_s * 1000
        assert held_ms < 100, f"the loop was held {held_ms:.0f} ms of CPU"
    finally:
        writer.close()
        client.close()
        await broker.stop()


async def test_control_requests_behind_a_large_update_wait_for_it_in_order() -> None:
    """A small UpdateMetadata sent while a large one is applied is applied after it: versions
    1 then 2, answers in that order, and both updates' topics are there."""
    broker = await started()
    port = broker.port(PLAINTEXT)
    big, small = big_update(port), small_update(port, "late")
    r1, w1 = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    r2, w2 = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    try:
        order: list[str] = []

        async def answer(name: str, reader: asyncio.StreamReader) -> int:
            frame = await read_frame(reader, 60)
            order.append(name)
            return update_answer(frame)

        w1.write(big)
        first = asyncio.ensure_future(answer("big", r1))
        await started_in_steps(broker)
        w2.write(small)
        second = asyncio.ensure_future(answer("small", r2))
        assert await first == ErrorCode.NONE
        assert await second == ErrorCode.NONE
        assert order == ["big", "small"]
        snap = broker.cache.snapshot
        assert snap.version == 2
        assert "late" in snap.partition_states
        assert "big-000" in snap.partition_states  # the small one was incremental
    finally:
        w1.close()
        w2.close()
        await broker.stop()


async def test_a_stale_request_behind_a_large_update_is_fenced_when_its_turn_comes() -> None:
    """Fencing happens in order: an epoch-1 update queued behind an epoch-2 one is stale."""
    broker = await started()
    port = broker.port(PLAINTEXT)
    big, stale = big_update(port, controller_epoch=2), small_update(port, "stale", controller_epoch=1)
    r1, w1 = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    r2, w2 = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    try:
        w1.write(big)
        await started_in_steps(broker)
        w2.write(stale)
        assert update_answer(await read_frame(r1, 60)) == ErrorCode.NONE
        assert update_answer(await read_frame(r2, 60)) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert "stale" not in broker.cache.snapshot.partition_states
        assert broker.cache.snapshot.version == 1
    finally:
        w1.close()
        w2.close()
        await broker.stop()


async def test_the_first_all_topics_answer_of_100k_partitions_is_encoded_in_steps() -> None:
    """Right after a broker takes the update, no topic block is encoded yet: the all-topics
    answer (what every client's first Metadata asks) encodes them in steps, answering others."""
    broker = await started()
    assert broker.loop_lag is not None
    port = broker.port(PLAINTEXT)
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    client = await KafkaConnection.open("127.0.0.1", port)
    raw_reader, raw_writer = await asyncio.open_connection("127.0.0.1", port, limit=2**22)
    try:
        writer.write(big_update(port))
        assert update_answer(await read_frame(reader, 60)) == ErrorCode.NONE
        all_topics = md.MetadataRequest(version=12, topics=None)
        frame = encode_frame(all_topics, 9)
        await asyncio.sleep(0.1)
        broker.loop_lag.max_cpu_s = 0.0
        raw_writer.write(frame)
        answered = asyncio.ensure_future(read_frame(raw_reader, 60))
        probe = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="big-000"),))
        others = 0
        while not answered.done():
            await client.request(probe, 10)
            others += 1
        held_ms = broker.loop_lag.max_cpu_s * 1000
        assert others >= 3, others
        assert held_ms < 100, f"the loop was held {held_ms:.0f} ms of CPU"
        body = answered.result()
        resp = md.RESPONSE.decode(body, 12, 5)  # after the v1 response header
        assert len(resp.topics) == TOPICS
        assert sum(len(t.partitions) for t in resp.topics) == TOPICS * PER_TOPIC
    finally:
        writer.close()
        raw_writer.close()
        client.close()
        await broker.stop()


async def test_a_100k_partition_leader_and_isr_is_applied_in_steps() -> None:
    """Its answer too is encoded topic by topic as it goes (100k partition errors)."""
    broker = await started()
    assert broker.loop_lag is not None
    parts = tuple(
        lai.LeaderAndIsrPartitionState(partition_index=p, controller_epoch=1, leader=1 + p % 3,
                                       leader_epoch=1, isr=BROKERS, partition_epoch=1, replicas=BROKERS)
        for p in range(PER_TOPIC)
    )  # fmt: skip
    request = lai.LeaderAndIsrRequest(
        version=7, controller_id=1, controller_epoch=1, type=2,
        topic_states=tuple(lai.LeaderAndIsrTopicState(f"big-{t:03d}", uuid.UUID(int=t + 1), parts)
                           for t in range(TOPICS)),
    )  # fmt: skip
    frame = encode_frame(request, 3)
    client = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port(CONTROL))
    try:
        await asyncio.sleep(0.1)
        broker.loop_lag.max_cpu_s = 0.0
        writer.write(frame)
        answered = asyncio.ensure_future(read_frame(reader, 60))
        probe = md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name="x"),))
        others = 0
        while not answered.done():
            await client.request(probe, 10)
            others += 1
        held_ms = broker.loop_lag.max_cpu_s * 1000
        assert others >= 3, others
        assert held_ms < 100, f"the loop was held {held_ms:.0f} ms of CPU"
        resp = lai.RESPONSE.decode(answered.result(), 7, 5)
        assert resp.error_code == ErrorCode.NONE
        assert [t.topic_id for t in resp.topics] == [uuid.UUID(int=t + 1) for t in range(TOPICS)]
        assert {e.error_code for t in resp.topics for e in t.partition_errors} == {ErrorCode.NONE}
        assert sum(len(t.partition_errors) for t in resp.topics) == TOPICS * PER_TOPIC
        assert len(broker.state.replicas) == TOPICS * PER_TOPIC
        assert broker.state.replicas[("big-007", 0)].role == "leader"  # (this is broker 1)
        assert broker.state.replicas[("big-007", 1)].role == "follower"
    finally:
        writer.close()
        client.close()
        await broker.stop()
