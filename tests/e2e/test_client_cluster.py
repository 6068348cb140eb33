"""kmeta.client's MetadataClient against three in-process kmeta brokers (real sockets).

Metadata reaches the brokers as the controller would send it (UpdateMetadata on the CONTROL
listener); the client only ever talks ApiVersions + Metadata on PLAINTEXT.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kmeta.client import MetadataClient, TopicPartition
from kmeta.server.broker import Broker
from tests.server.helpers import (
    PLAINTEXT,
    loopback_config,
    partition,
    push_update_metadata,
)

pytestmark = pytest.mark.e2e

TOPICS = {"orders": [partition(0, 1, (1, 2, 3)), partition(1, 2, (2, 3, 1))]}


async def push(
    brokers: list[Broker], topics: dict[str, list[Any]], live: list[Broker] | None = None
) -> None:
    await push_update_metadata(brokers if live is None else live, topics)


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    started = [Broker(loopback_config(i)) for i in (1, 2, 3)]
    for b in started:
        await b.start()
    await push(started, TOPICS)
    yield started
    for b in started:
        await b.stop()


def bootstrap(brokers: list[Broker]) -> str:
    return ",".join(f"127.0.0.1:{b.port(PLAINTEXT)}" for b in brokers)


async def test_client_reads_a_kmeta_cluster(brokers: list[Broker]) -> None:
    async with MetadataClient(bootstrap(brokers), all_topics=True) as client:
        cluster = await client.refresh(10)
        assert {n.id for n in cluster.nodes} == {1, 2, 3}
        assert cluster.cluster_id == "kmeta-test"
        assert cluster.partition_count("orders") == 2
        assert cluster.leader_for(TopicPartition("orders", 1)).id == 2  # type: ignore[union-attr]
        assert cluster.partition(TopicPartition("orders", 0)).isr == (1, 2, 3)  # type: ignore[union-attr]


async def test_wait_on_metadata_returns_once_the_topic_is_pushed(brokers: list[Broker]) -> None:
    async with MetadataClient(bootstrap(brokers)) as client:
        await client.refresh(10)
        waiter = asyncio.create_task(client.wait_on_metadata("late", partition=2, max_wait_s=10))
        await asyncio.sleep(0.2)
        assert not waiter.done()
        await push(brokers, {"late": [partition(i, 1 + i % 3, (1 + i % 3,)) for i in range(3)]})
        pushed = time.monotonic()
        cluster = await asyncio.wait_for(waiter, 5)
        assert time.monotonic() - pushed < 1.5
        assert cluster.partition_count("late") == 3


async def test_the_client_survives_the_death_of_its_broker(brokers: list[Broker]) -> None:
    async with MetadataClient(bootstrap(brokers), topics=["orders"]) as client:
        await client.refresh(10)
        await client.refresh(10)
        [used] = client.network_client.ready_nodes()
        dead = brokers[used - 1]
        await dead.stop()
        survivors = [b for b in brokers if b is not dead]
        await push(survivors, {"after": [partition(0, survivors[0].config.broker_id, (1, 2, 3))]},
                   live=survivors)  # fmt: skip
        cluster = await client.wait_on_metadata("after", max_wait_s=10)
        assert cluster.partition_count("after") == 1
        assert used not in client.network_client.ready_nodes()
        brokers.remove(dead)  # the fixture stops the rest


async def test_many_clients_spread_over_the_brokers(brokers: list[Broker]) -> None:
    clients = [MetadataClient(bootstrap(brokers)) for _ in range(24)]
    try:
        for c in clients:
            c.start()
        for _ in range(3):
            await asyncio.gather(*(c.refresh(10) for c in clients))
        per_node: dict[int, int] = {}
        for c in clients:
            for node_id, n in c.network_client.stats.requests_by_node.items():
                key = node_id if node_id > 0 else -node_id  # bootstrap -i is broker i here
                per_node[key] = per_node.get(key, 0) + n
        assert sum(per_node.values()) == 72
        assert set(per_node) == {1, 2, 3}
        assert min(per_node.values()) >= 10, per_node
    finally:
        await asyncio.gather(*(c.close() for c in clients))
