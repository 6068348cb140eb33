"""Helpers for the data-plane tests (Produce, Fetch): record batches built by kafka-python's
encoder (an independent implementation of the format), a broker given its partitions the way
the controller gives them (UpdateMetadata, then LeaderAndIsr), and request builders."""

from __future__ import annotations

import struct
import warnings
from typing import Any

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.state import BrokerState
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    ConnectionPair,
    broker_state,
    live_broker,
    partition,
    topic_id,
    update_metadata,
)


def batch(n: int = 3, *, transactional: bool = False, producer_id: int = -1, compression: int = 0,
          value: bytes = b"value-%d", timestamp: int | None = None) -> bytes:  # fmt: skip
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 24,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, timestamp=timestamp, key=None, value=value % i if b"%" in value else value, headers=[])
    return bytes(builder.build())


def recrc(data: bytes) -> bytes:
    """The batch with its CRC-32C recomputed (kafka-python's) after an edit."""
    return data[:17] + struct.pack(">I", calc_crc32c(data[21:])) + data[21:]


def as_stored(data: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """A produced batch as the leader's log keeps it: base offset and partition leader epoch
    written in place (outside the CRC), every other byte as sent."""
    return struct.pack(">q", base_offset) + data[8:12] + struct.pack(">i", leader_epoch) + data[16:]


#: (index, leader, replicas, isr, leader epoch)
Part = tuple[int, int, tuple[int, ...], tuple[int, ...], int]


def leader_and_isr(topics: dict[str, list[Part]], controller_epoch: int = 1) -> lai.LeaderAndIsrRequest:
    return lai.LeaderAndIsrRequest(
        version=7, controller_id=1, controller_epoch=controller_epoch,
        topic_states=tuple(
            lai.LeaderAndIsrTopicState(name, topic_id(name), tuple(
                lai.LeaderAndIsrPartitionState(
                    partition_index=i, controller_epoch=controller_epoch, leader=leader,
                    leader_epoch=epoch, isr=isr, partition_epoch=epoch, replicas=replicas,
                )
                for i, leader, replicas, isr, epoch in parts
            ))
            for name, parts in topics.items()
        ),
    )  # fmt: skip


def metadata_for(topics: dict[str, list[Part]], brokers: list[Any], controller_epoch: int = 1,
                 configs: dict[str, dict[str, str]] | None = None) -> Any:  # fmt: skip
    """UpdateMetadata of ``topics`` (``configs``: topic -> its overrides, kmeta's tagged field)."""
    request = update_metadata(brokers, {
        name: [partition(i, leader, replicas, isr=isr, leader_epoch=epoch, controller_epoch=controller_epoch)
               for i, leader, replicas, isr, epoch in parts]
        for name, parts in topics.items()
    }, controller_epoch=controller_epoch)  # fmt: skip
    given = configs or {}
    return request._replace(topic_states=tuple(
        t._replace(kmeta_topic_configs=tuple(um.KmetaTopicConfig(k, v) for k, v in given[t.topic_name].items()))
        if t.topic_name in given else t
        for t in request.topic_states
    ))  # fmt: skip


#: broker 1's view: ``orders`` 0 and 2 led by 1 (epoch 4, ISR 1), 1 led by 2 (epoch 7), and
#: the internal ``__consumer_offsets`` led by 1
TOPICS: dict[str, list[Part]] = {
    "orders": [(0, 1, (1, 2), (1,), 4), (1, 2, (2, 1), (2, 1), 7), (2, 1, (1,), (1,), 4)],
    "__consumer_offsets": [(0, 1, (1,), (1,), 1)],
}
TWO_BROKERS = [live_broker(i, {PLAINTEXT: ("127.0.0.1", 9090 + i)}) for i in (1, 2)]


def holding(topics: dict[str, list[Part]] = TOPICS, broker_id: int = 1, state: BrokerState | None = None,
            **config: Any) -> BrokerState:  # fmt: skip
    """A broker state given ``topics`` as the controller gives them, on its control listener."""
    if state is None:
        if config:
            state = BrokerState(BrokerConfig(
                broker_id=broker_id, listeners=(ListenerSpec(PLAINTEXT, "127.0.0.1", 0), ListenerSpec(CONTROL, "127.0.0.1", 0)),
                cluster_id="kmeta-test", **config,
            ))  # fmt: skip
        else:
            state = broker_state(broker_id)
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    assert ctl.request(metadata_for(topics, TWO_BROKERS)).error_code == 0
    answer = ctl.request(leader_and_isr(topics))
    assert answer.error_code == 0
    return state


def produce(topic: str, index: int, records: bytes | None, *, version: int = 9, acks: int = -1,
            txn: str | None = None) -> pr.ProduceRequest:  # fmt: skip
    data = (pr.TopicProduceData(topic, (pr.PartitionProduceData(index, records),)),)
    return pr.ProduceRequest(version=version, transactional_id=txn, acks=acks, timeout_ms=1000, topic_data=data)


def only(response: Any) -> Any:
    [topic] = response.responses
    [part] = topic.partition_responses if hasattr(topic, "partition_responses") else topic.partitions
    return part


def fetch(parts: list[tuple[str, int, int]], *, version: int = 12, max_wait_ms: int = 0, min_bytes: int = 1,
          max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20, current_leader_epoch: int = -1,
          isolation_level: int = 0, replica_id: int = -1, session_epoch: int = -1,
          last_fetched_epoch: int = -1) -> fe.FetchRequest:  # fmt: skip
    """Fetch ``(topic, partition, offset)`` in order (grouped by topic as they come)."""
    topics: list[tuple[str, list[fe.FetchPartition]]] = []
    for name, index, offset in parts:
        if not topics or topics[-1][0] != name:
            topics.append((name, []))
        topics[-1][1].append(fe.FetchPartition(
            partition=index, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, partition_max_bytes=partition_max_bytes,
        ))  # fmt: skip
    return fe.FetchRequest(
        version=version, replica_id=replica_id if version < 15 else -1,
        replica_state=fe.ReplicaState(replica_id, -1) if version >= 15 and replica_id >= 0 else None,
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_epoch=session_epoch,
        topics=tuple(fe.FetchTopic(n, topic_id(n), tuple(ps)) for n, ps in topics),
    )  # fmt: skip


async def started_broker(topics: dict[str, list[Part]], **config: Any) -> Broker:
    """A started broker 1 on loopback given ``topics`` (UpdateMetadata then LeaderAndIsr)."""
    broker = Broker(BrokerConfig(
        broker_id=1, listeners=(ListenerSpec(PLAINTEXT, "127.0.0.1", 0), ListenerSpec(CONTROL, "127.0.0.1", 0)),
        cluster_id="kmeta-test", **config,
    ))  # fmt: skip
    await broker.start()
    await push(broker.port(PLAINTEXT), broker.port(CONTROL), topics)
    return broker


async def push(client_port: int, control_port: int, topics: dict[str, list[Part]]) -> None:
    """What the controller sends a broker 1 serving on ``client_port``: the brokers and
    ``topics`` (UpdateMetadata), then its roles (LeaderAndIsr)."""
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", client_port)})]
    if any(2 in p[2] for parts in topics.values() for p in parts):  # (a broker 2 named, not running)
        brokers.append(live_broker(2, {PLAINTEXT: ("127.0.0.1", 9092)}))
    conn = await KafkaConnection.open("127.0.0.1", control_port)
    try:
        assert (await conn.request(metadata_for(topics, brokers), 10)).error_code == 0
        assert (await conn.request(leader_and_isr(topics), 10)).error_code == 0
    finally:
        conn.close()
