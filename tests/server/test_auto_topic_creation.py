"""auto.create.topics.enable, end to end in one process: a real controller and real brokers.

Metadata requests go to a broker's client listener; a topic it auto-creates goes to the
controller as a CreateTopics (counted by the controller's own request metrics) and shows up in
every broker's cache. Kafka's answers: kmeta.server.auto_topic_creation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md
from tests.controller.helpers import InProcessCluster, start_cluster, wait_until
from tests.server.data_plane import batch, only, produce

E = ErrorCode


def metadata(*names: str, version: int = 12, auto: bool = True) -> md.MetadataRequest:
    return md.MetadataRequest(
        version=version,
        topics=tuple(md.MetadataRequestTopic(ZERO_UUID, n) for n in names),
        allow_auto_topic_creation=auto,
    )


def create_topics_received(c: InProcessCluster) -> float:
    """CreateTopics requests the controller was sent (its kmeta_requests_total)."""
    registry = c.controller.controller.metrics.registry
    return sum(
        sample.value
        for family in registry.collect()
        if family.name == "kmeta_requests"
        for sample in family.samples
        if sample.name == "kmeta_requests_total" and sample.labels.get("api") == "CreateTopics"
    )


async def answers(conn: KafkaConnection, request: md.MetadataRequest) -> dict[str, int]:
    response = await conn.request(request, 10.0)
    return {t.name: t.error_code for t in response.topics}


async def cluster(tmp_path: Path, **broker_overrides: Any) -> InProcessCluster:
    return await start_cluster(tmp_path, brokers=2, broker_overrides=broker_overrides, metrics_port=0)


async def served(c: InProcessCluster, name: str) -> None:
    await wait_until(
        lambda: all(name in b.cache.snapshot.partition_states for b in c.brokers.values()), 10.0
    )


async def test_an_unknown_topic_is_created_once_with_the_brokers_defaults(tmp_path: Path) -> None:
    c = await cluster(tmp_path, num_partitions=3, default_replication_factor=2)
    conn = await c.connect(1)
    try:
        before = create_topics_received(c)
        # five at once on one connection: the first starts the creation (LEADER_NOT_AVAILABLE),
        # the others find it in flight (UNKNOWN_TOPIC_OR_PARTITION) and send nothing
        futures = [conn.send(metadata("auto-1")) for _ in range(5)]
        got = [(await asyncio.wait_for(f, 10.0)).topics[0].error_code for f in futures]
        assert got == [E.LEADER_NOT_AVAILABLE] + [E.UNKNOWN_TOPIC_OR_PARTITION] * 4
        await served(c, "auto-1")
        assert create_topics_received(c) - before == 1
        response = await conn.request(metadata("auto-1"), 10.0)
        (topic,) = response.topics
        assert topic.error_code == 0
        assert [(p.partition_index, len(p.replica_nodes), p.error_code) for p in topic.partitions] == [
            (0, 2, 0), (1, 2, 0), (2, 2, 0),
        ]  # fmt: skip
        # v0-3 carry no allow flag: they always create (Kafka)
        assert await answers(conn, metadata("auto-v1", version=1, auto=False)) == {"auto-v1": E.LEADER_NOT_AVAILABLE}
        await served(c, "auto-v1")
    finally:
        conn.close()
        await c.stop()


async def test_what_metadata_does_not_create(tmp_path: Path) -> None:
    c = await cluster(tmp_path)
    conn = await c.connect(2)
    try:
        before = create_topics_received(c)
        assert await answers(conn, metadata("no-auto", auto=False)) == {"no-auto": E.UNKNOWN_TOPIC_OR_PARTITION}
        assert await answers(conn, metadata("bad name!", "a" * 250, "..")) == {
            "bad name!": E.INVALID_TOPIC_EXCEPTION, "a" * 250: E.INVALID_TOPIC_EXCEPTION,
            "..": E.INVALID_TOPIC_EXCEPTION,
        }  # fmt: skip
        internal = await answers(conn, metadata("__consumer_offsets", "__transaction_state"))
        assert internal == dict.fromkeys(("__consumer_offsets", "__transaction_state"), E.UNKNOWN_TOPIC_OR_PARTITION)
        await asyncio.sleep(0.3)  # (time for a creation that should not happen)
        assert create_topics_received(c) == before
        assert c.brokers[2].cache.snapshot.partition_states.keys().isdisjoint(
            {"no-auto", "__consumer_offsets", "__transaction_state"}
        )
    finally:
        conn.close()
        await c.stop()


async def test_a_broker_with_auto_creation_off_answers_unknown(tmp_path: Path) -> None:
    c = await cluster(tmp_path, auto_create_topics_enable=False)
    conn = await c.connect(1)
    try:
        for _ in range(2):
            assert await answers(conn, metadata("off-1")) == {"off-1": E.UNKNOWN_TOPIC_OR_PARTITION}
        assert create_topics_received(c) == 0
    finally:
        conn.close()
        await c.stop()


async def test_a_failed_creation_is_sent_again_by_the_next_request(tmp_path: Path) -> None:
    """default.replication.factor 3 on 2 brokers: the controller answers
    INVALID_REPLICATION_FACTOR (logged); the flight ends, and the same request on the same
    metadata is not answered from the memo: it sends the creation again, as Kafka."""
    c = await cluster(tmp_path, default_replication_factor=3)
    conn = await c.connect(1)
    try:
        before = create_topics_received(c)
        for attempt in (1, 2):
            assert await answers(conn, metadata("too-wide")) == {"too-wide": E.LEADER_NOT_AVAILABLE}
            await wait_until(lambda: not c.brokers[1].state.auto_creating, 10.0)
            assert create_topics_received(c) - before == attempt
        assert "too-wide" not in c.brokers[1].cache.snapshot.partition_states
    finally:
        conn.close()
        await c.stop()


async def test_a_produce_to_an_unknown_topic_creates_nothing(tmp_path: Path) -> None:
    """Kafka: only Metadata auto-creates; a Produce naming an unknown topic is answered
    UNKNOWN_TOPIC_OR_PARTITION (a client asks Metadata first, which creates it)."""
    c = await cluster(tmp_path)
    conn = await c.connect(1)
    try:
        answer = await conn.request(produce("never-asked", 0, batch(2)), 10.0)
        assert only(answer).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        await asyncio.sleep(0.3)  # (time for a creation that should not happen)
        assert create_topics_received(c) == 0
        assert "never-asked" not in c.brokers[1].cache.snapshot.partition_states
    finally:
        conn.close()
        await c.stop()


@pytest.mark.parametrize("fields", [{"num_partitions": 0}, {"default_replication_factor": 0}])
def test_the_defaults_must_be_positive(fields: dict[str, int]) -> None:
    from tests.server.helpers import loopback_config

    with pytest.raises(ValueError, match="at least 1"):
        loopback_config(1, **fields)
