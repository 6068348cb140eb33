"""A real broker over loopback that holds partition logs: the controller's UpdateMetadata and
LeaderAndIsr pushed to its control listener, as the controller would push them.

Broker 1 leads ``TOPIC`` partitions 0 and 1 (leader epoch :data:`EPOCH`) and follows partition
2, led by broker 2 (alive in the metadata, on a port nothing listens on): enough for the
"led elsewhere" answers. Records go in with raw Produce requests (:func:`produce`), whose
batches are built by kafka-python's encoder, independent of kmeta.
"""

from __future__ import annotations

import struct
import time
import warnings
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

with warnings.catch_warnings():  # kafka-python 3.0.12 reads its schemas with read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.broker import Broker
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    live_broker,
    loopback_config,
    partition,
    topic_id,
    update_metadata,
)

TOPIC = "events"
EPOCH = 5
#: broker 2's advertised port: nothing listens there
ELSEWHERE_PORT = 1


def batch(values: Sequence[bytes], timestamps: Sequence[int] | None = None, compression: int = 0) -> bytes:
    """One v2 batch (kafka-python's builder) of ``values`` at ``timestamps`` (now by default)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 22,
    )  # fmt: skip
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        ts = now if timestamps is None else timestamps[i]
        builder.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


def recrc(data: bytes) -> bytes:
    """A v2 batch with its CRC-32C recomputed after an edit."""
    return data[:17] + struct.pack(">I", calc_crc32c(data[21:])) + data[21:]


def _leader_and_isr(states: Sequence[tuple[int, int, int, tuple[int, ...]]], topics: Sequence[str] = ()) -> Any:
    """(partition, leader, leader epoch, replicas) of TOPIC, and partition 0 of each of
    ``topics`` led by broker 1, as the controller (id 1) sends them. The ISR is the leader
    alone: the other replica (broker 2) never runs here, so it could not be in sync, and
    acks=-1 / the high watermark would wait for it."""
    def state(p: int, leader: int, epoch: int, replicas: tuple[int, ...]) -> Any:
        return lai.LeaderAndIsrPartitionState(
            partition_index=p, controller_epoch=1, leader=leader, leader_epoch=epoch, isr=(leader,),
            partition_epoch=0, replicas=replicas,
        )  # fmt: skip

    topic_states = [lai.LeaderAndIsrTopicState(TOPIC, topic_id(TOPIC), tuple(state(*x) for x in states))]
    topic_states += [
        lai.LeaderAndIsrTopicState(name, topic_id(name), (state(0, 1, EPOCH, (1,)),)) for name in topics
    ]
    return lai.LeaderAndIsrRequest(
        version=6, controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=tuple(topic_states),
    )  # fmt: skip


async def control(broker: Broker, request: Any) -> Any:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(CONTROL))
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


async def move_leadership(broker: Broker, partition_index: int, leader: int, epoch: int) -> None:
    """A leader change of one partition of TOPIC, as the controller pushes it: LeaderAndIsr,
    then UpdateMetadata (so clients see the new leader epoch too)."""
    replicas = (leader, 1) if leader != 1 else (1, 2)
    resp = await control(broker, _leader_and_isr([(partition_index, leader, epoch, replicas)]))
    assert resp.error_code == 0
    snap = broker.state.cache.snapshot
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", broker.port(PLAINTEXT))})]
    if 2 in snap.alive_nodes:
        brokers.append(live_broker(2, {PLAINTEXT: ("127.0.0.1", ELSEWHERE_PORT)}))
    parts = [
        partition(i, leader, replicas, leader_epoch=epoch) if i == partition_index
        else partition(i, state.leader, tuple(state.replicas), leader_epoch=state.leader_epoch)
        for i, state in sorted(snap.partition_states[TOPIC].items())
    ]  # fmt: skip
    assert (await control(broker, update_metadata(brokers, {TOPIC: parts}))).error_code == 0


@asynccontextmanager
async def log_broker(
    extra: dict[str, dict[str, str]] | None = None, *, elsewhere: bool = True, epoch: int = EPOCH,
    **config: Any,
) -> AsyncIterator[Broker]:
    """The broker (``config``: BrokerConfig fields); ``extra``: more topics, each one partition
    led here, with these config overrides; ``elsewhere``: broker 2 alive in the metadata (else
    partition 2's leader is not alive)."""
    extra = extra or {}
    broker = Broker(loopback_config(1, **config))
    await broker.start()
    try:
        brokers = [
            live_broker(1, {PLAINTEXT: ("127.0.0.1", broker.port(PLAINTEXT))}),
        ]
        if elsewhere:
            brokers.append(live_broker(2, {PLAINTEXT: ("127.0.0.1", ELSEWHERE_PORT)}))
        parts = [
            partition(0, 1, (1,), leader_epoch=epoch),
            partition(1, 1, (1,), leader_epoch=epoch),
            partition(2, 2, (2, 1), leader_epoch=EPOCH),
        ]
        topics = {TOPIC: parts} | {name: [partition(0, 1, (1,), leader_epoch=EPOCH)] for name in extra}
        request = update_metadata(brokers, topics)
        request = request._replace(
            topic_states=tuple(
                t._replace(kmeta_topic_configs=tuple(um.KmetaTopicConfig(k, v) for k, v in extra[t.topic_name].items()))
                if t.topic_name in extra
                else t
                for t in request.topic_states
            )
        )
        assert (await control(broker, request)).error_code == 0
        states = [(0, 1, epoch, (1,)), (1, 1, epoch, (1,)), (2, 2, EPOCH, (2, 1))]
        resp = await control(broker, _leader_and_isr(states, tuple(extra)))
        assert resp.error_code == 0
        yield broker
    finally:
        await broker.stop()


async def produce(conn: KafkaConnection, index: int, records: bytes | None, *, version: int = 9,
                  acks: int = -1, topic: str = TOPIC) -> Any:  # fmt: skip
    """One partition's Produce; its partition answer."""
    request = pr.ProduceRequest(
        version=version, acks=acks, timeout_ms=5000,
        topic_data=(pr.TopicProduceData(topic, (pr.PartitionProduceData(index, records),)),),
    )  # fmt: skip
    resp = await conn.request(request, 10)
    return resp.responses[0].partition_responses[0]


class RequestVersions:
    """A connection observer noting the versions each api key was served at."""

    def __init__(self) -> None:
        self.seen: dict[int, set[int]] = {}

    def on_request(self, api_key: int, api_version: int, answer: object) -> None:
        self.seen.setdefault(api_key, set()).add(api_version)

    def on_read(self, nbytes: int) -> None: ...
    def on_answers_ready(self) -> None: ...
    def on_write(self, nbytes: int) -> None: ...
    def on_fault(self, kind: object, detail: str) -> None: ...
    def on_close(self) -> None: ...


def observe(broker: Broker) -> RequestVersions:
    """What the broker's client listeners serve from now on, version by version."""
    versions = RequestVersions()
    for listener in broker.listeners:
        if not listener.info.is_control:
            listener.hooks = listener.hooks.with_observer(lambda _conn: versions)  # type: ignore[arg-type,return-value]
    return versions
