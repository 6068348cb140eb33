"""Real Kafka clients (kafka-python, confluent-kafka) against three in-process kmeta brokers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.server.broker import Broker
from tests.server.helpers import (
    PLAINTEXT,
    loopback_config,
    partition,
    push_update_metadata,
)

pytestmark = [
    pytest.mark.e2e,
    # kafka-python 3.0.12 reads its bundled schemas with importlib.resources.read_text
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

TOPICS = {
    "orders": [partition(0, 1, (1, 2, 3)), partition(1, 2, (2, 3, 1)), partition(2, 3, (3, 1, 2))],
    "payments": [partition(0, 2, (2, 1)), partition(1, 4, (4, 1), isr=(1,), offline=(4,))],  # leader offline
    "audit": [partition(0, 3, (3,))],
}


@pytest.fixture
async def cluster() -> AsyncIterator[list[Broker]]:
    brokers = [Broker(loopback_config(i)) for i in (1, 2, 3)]
    for b in brokers:
        await b.start()
    await push_update_metadata(brokers, TOPICS, controller_epoch=1)
    yield brokers
    for b in brokers:
        await b.stop()


def _kafka_python_view(bootstrap: str) -> dict[str, Any]:
    from kafka import KafkaAdminClient, KafkaConsumer

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kmeta-e2e", request_timeout_ms=10_000)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kmeta-e2e-consumer")
    try:
        names = set(admin.list_topics())
        described = {
            t["name"]: {
                p["partition_index"]: (p["leader_id"], tuple(p["replica_nodes"]), tuple(p["isr_nodes"]), p["error_code"])
                for p in t["partitions"]
            }
            for t in admin.describe_topics(sorted(names))
        }
        partitions = {name: consumer.partitions_for_topic(name) for name in names}
        return {"names": names, "described": described, "partitions": partitions}
    finally:
        admin.close()
        consumer.close()


def _confluent_view(bootstrap: str) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kmeta-e2e"})
    md = admin.list_topics(timeout=10)
    return {
        "brokers": {b.id: (b.host, b.port) for b in md.brokers.values()},
        "controller": md.controller_id,
        "topics": {
            name: {
                p.id: (p.leader, tuple(p.replicas), tuple(p.isrs), p.error.code() if p.error else 0)
                for p in t.partitions.values()
            }
            for name, t in md.topics.items()
        },
    }


async def test_clients_see_exactly_the_pushed_metadata(cluster: list[Broker]) -> None:
    bootstrap = f"127.0.0.1:{cluster[0].port(PLAINTEXT)}"
    kp = await asyncio.to_thread(_kafka_python_view, bootstrap)
    assert kp["names"] == set(TOPICS)
    assert kp["described"]["orders"] == {0: (1, (1, 2, 3), (1, 2, 3), 0), 1: (2, (2, 3, 1), (2, 3, 1), 0), 2: (3, (3, 1, 2), (3, 1, 2), 0)}
    assert kp["described"]["payments"] == {0: (2, (2, 1), (2, 1), 0), 1: (-1, (4, 1), (1,), 5)}
    assert kp["partitions"] == {"orders": {0, 1, 2}, "payments": {0, 1}, "audit": {0}}

    cf = await asyncio.to_thread(_confluent_view, bootstrap)
    assert cf["brokers"] == {b.config.broker_id: ("127.0.0.1", b.port(PLAINTEXT)) for b in cluster}
    assert cf["controller"] == 1
    assert set(cf["topics"]) == set(TOPICS)
    assert cf["topics"]["orders"][1] == (2, (2, 3, 1), (2, 3, 1), 0)
    assert cf["topics"]["payments"][1][0] == -1
    assert cf["topics"]["payments"][1][3] == 5

    # delete "audit" (leader -2) on every broker: both clients stop seeing it
    await push_update_metadata(cluster, {"audit": [partition(0, -2, (3,))]}, controller_epoch=1)
    kp2 = await asyncio.to_thread(_kafka_python_view, f"127.0.0.1:{cluster[1].port(PLAINTEXT)}")
    assert kp2["names"] == {"orders", "payments"}
    cf2 = await asyncio.to_thread(_confluent_view, f"127.0.0.1:{cluster[2].port(PLAINTEXT)}")
    assert set(cf2["topics"]) == {"orders", "payments"}
