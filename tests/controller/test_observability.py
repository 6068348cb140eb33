"""Scrape /metrics and /status of a running in-process cluster and check values move."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from tests.controller.observed_cluster import (
    ObservedCluster,
    eventually,
    http_get,
    sample,
    scrape,
    status,
)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ObservedCluster]:
    c = await ObservedCluster(tmp_path, brokers=3).start()
    try:
        yield c
    finally:
        await c.stop()


async def test_topic_creation_raises_partitions_on_every_broker(cluster: ObservedCluster) -> None:
    before = {i: await scrape(cluster.broker_metrics_port(i)) for i in cluster.brokers}
    for s in before.values():
        assert sample(s, "kmeta_broker_partitions") == 0
        assert sample(s, "kmeta_broker_epoch") > 0  # registered
    assert await cluster.create_topic("orders", 6, via=2) == ErrorCode.NONE
    # the propagation barrier answered only once every broker acked: no waiting needed
    for i in cluster.brokers:
        s = await scrape(cluster.broker_metrics_port(i))
        assert sample(s, "kmeta_broker_partitions") == 6
        assert sample(s, "kmeta_broker_topics") == 1
        assert sample(s, "kmeta_broker_snapshot_version") > sample(
            before[i], "kmeta_broker_snapshot_version"
        )
        assert sample(s, "kmeta_broker_update_apply_seconds_count") > sample(
            before[i], "kmeta_broker_update_apply_seconds_count"
        )
        # the controller's UpdateMetadata arrived on the CONTROL listener and was counted
        assert (
            sample(
                s,
                "kmeta_requests_total",
                listener="CONTROL",
                api_key="6",
                api="UpdateMetadata",
                version="8",
            )
            >= 1
        )
    forwarder = await scrape(cluster.broker_metrics_port(2))
    assert (
        sample(
            forwarder,
            "kmeta_requests_total",
            listener="PLAINTEXT",
            api_key="19",
            api="CreateTopics",
            version="5",
        )
        == 1
    )
    # the forwarded CreateTopics is asynchronous: its latency counts when its answer is ready
    assert (
        sample(
            forwarder,
            "kmeta_request_latency_seconds_count",
            listener="PLAINTEXT",
            api="CreateTopics",
        )
        == 1
    )
    assert sample(forwarder, "kmeta_bytes_in_total", listener="PLAINTEXT") > 0
    assert sample(forwarder, "kmeta_bytes_out_total", listener="PLAINTEXT") > 0

    c = await scrape(cluster.controller_metrics_port)
    assert sample(c, "kmeta_controller_partitions") == 6
    assert sample(c, "kmeta_controller_active_brokers") == 3
    assert sample(c, "kmeta_controller_propagation_seconds_count") >= 1
    assert sample(c, "kmeta_controller_channel_total_queue_size") == 0
    for i in cluster.brokers:
        assert sample(c, "kmeta_controller_broker_lag_versions", broker_id=str(i)) == 0
        assert sample(c, "kmeta_controller_broker_applied_update", broker_id=str(i)) == sample(
            c, "kmeta_controller_latest_update"
        )
        assert (
            sample(
                c, "kmeta_controller_channel_request_rate_and_queue_time_ms_count", broker_id=str(i)
            )
            >= 1
        )
    # the brokers registered on the controller's own (metered) listener
    registrations = sum(
        v
        for (name, labels), v in c.items()
        if name == "kmeta_requests_total" and ("api", "BrokerRegistration") in labels
    )
    assert registrations == 3


async def test_stopped_broker_lag_grows_then_queues_drain(cluster: ObservedCluster) -> None:
    # Broker 3 stops serving (its CONTROL listener is gone) but is not fenced yet: its session
    # is 30 s and it keeps heartbeating. Changes pile up for it alone.
    victim = cluster.brokers[3]
    control = next(lst for lst in victim.listeners if lst.name == "CONTROL")
    port = control.port
    await control.shutdown(0.1)
    # the barrier cannot complete: the admin answer times out (the change still happened)
    assert await cluster.create_topic("t1", 2, timeout_ms=200) == ErrorCode.REQUEST_TIMED_OUT
    assert await cluster.create_topic("t2", 1, timeout_ms=50) == ErrorCode.REQUEST_TIMED_OUT
    first = await scrape(cluster.controller_metrics_port)
    await asyncio.sleep(0.2)
    second = await scrape(cluster.controller_metrics_port)
    lag_ms = "kmeta_controller_broker_lag_ms"
    assert sample(second, "kmeta_controller_broker_lag_versions", broker_id="3") == 2
    assert sample(second, lag_ms, broker_id="3") >= sample(first, lag_ms, broker_id="3") + 150
    assert sample(second, "kmeta_controller_channel_queue_size", broker_id="3") >= 1
    assert sample(second, "kmeta_controller_channel_total_queue_size") >= 1
    for healthy in ("1", "2"):
        assert sample(second, "kmeta_controller_broker_lag_versions", broker_id=healthy) == 0
        assert sample(second, lag_ms, broker_id=healthy) == 0
    st = await status(cluster.controller_metrics_port)
    row = next(b for b in st["brokers"] if b["id"] == 3)
    assert row["state"] == "alive"
    assert row["lag_versions"] == 2
    assert row["lag_ms"] >= 150
    assert st["partitions"] == 3
    assert st["topics"] == 2

    # back on the same port: the sender's retry delivers, and every queue returns to zero
    control.requested_port = port
    await control.start()

    async def drained() -> bool:
        s = await scrape(cluster.controller_metrics_port)
        return (
            sample(s, "kmeta_controller_channel_total_queue_size") == 0
            and sample(s, "kmeta_controller_broker_lag_versions", broker_id="3") == 0
        )

    assert await eventually(drained)
    s = await scrape(cluster.controller_metrics_port)
    assert sample(s, "kmeta_controller_channel_queue_size", broker_id="3") == 0
    assert sample(s, "kmeta_controller_event_queue_size") == 0
    assert sample(s, lag_ms, broker_id="3") == 0
    assert sample(s, "kmeta_controller_channel_send_failures_total", broker_id="3") >= 1
    b3 = await scrape(cluster.broker_metrics_port(3))
    assert sample(b3, "kmeta_broker_partitions") == 3


async def test_status_reports_brokers_and_partitions(cluster: ObservedCluster) -> None:
    assert await cluster.create_topic("a", 3) == ErrorCode.NONE
    st = await status(cluster.controller_metrics_port)
    assert [b["id"] for b in st["brokers"]] == [1, 2, 3]
    assert all(b["state"] == "alive" and b["epoch"] > 0 for b in st["brokers"])
    assert all(b["queue_size"] == 0 and b["lag_ms"] == 0 for b in st["brokers"])
    assert st["controller"]["epoch"] >= 1
    assert (st["topics"], st["partitions"], st["offline_partitions"]) == (1, 3, 0)
    assert st["under_replicated_partitions"] == 0
    # a broker's own /status: its view of the cache
    own = await status(cluster.broker_metrics_port(1))
    assert (own["broker_id"], own["partitions"], own["topics"]) == (1, 3, 1)

    # a fenced broker's partitions go offline (RF 1) and it shows as fenced
    await cluster.brokers[2].stop()  # controlled shutdown: fenced at once

    async def fenced() -> dict[str, object] | None:
        s = await status(cluster.controller_metrics_port)
        row = next(b for b in s["brokers"] if b["id"] == 2)
        return s if row["state"] == "fenced" else None

    after = await eventually(fenced)
    assert after is not None
    assert isinstance(after["offline_partitions"], int)
    assert after["offline_partitions"] >= 1
    c = await scrape(cluster.controller_metrics_port)
    assert sample(c, "kmeta_controller_fenced_brokers") == 1
    assert sample(c, "kmeta_controller_offline_partitions") == after["offline_partitions"]


async def test_metrics_http_bad_input_and_errors_by_class(cluster: ObservedCluster) -> None:
    port = cluster.broker_metrics_port(1)
    assert (await http_get(port, "/nope"))[0] == 404
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"X" * 20_000)  # no end of head within the 8 KiB bound
    data = await asyncio.wait_for(reader.read(), 5.0)
    writer.close()
    assert data.startswith(b"HTTP/1.1 400")
    # a Kafka client that sends an unknown api key is cut off and counted by class
    conn = await KafkaConnection.open("127.0.0.1", cluster.brokers[1].port("PLAINTEXT"))
    conn._transport.write(b"\x00\x00\x00\x0a\x7f\x00\x00\x00\x00\x00\x00\x01\xff\xff")  # type: ignore[union-attr]

    async def counted() -> bool:
        s = await scrape(port)
        return (
            sample(
                s,
                "kmeta_connection_errors_total",
                listener="PLAINTEXT",
                **{"class": "UnsupportedVersionError"},
            )
            == 1
        )

    assert await eventually(counted)
    conn.close()
    s = await scrape(port)
    assert sample(s, "kmeta_connections_accepted_total", listener="PLAINTEXT") >= 1
