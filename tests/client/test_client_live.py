"""MetadataClient against real TCP servers (MiniBroker) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time

import pytest

from kmeta.client import (
    Cluster,
    InvalidPartitionError,
    MetadataClient,
    MetadataClosedError,
    TopicPartition,
)

from .mini_broker import ClusterState, MiniBroker, start_cluster

Cluster3 = tuple[ClusterState, list[MiniBroker]]


def servers(brokers: list[MiniBroker]) -> list[str]:
    return [b.address for b in brokers]


async def until(predicate: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_refresh_learns_brokers_topics_and_negotiates_versions(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    state.create_topic("orders", partitions=3, replication=2)
    async with MetadataClient(servers(brokers), topics=["orders"]) as client:
        cluster = await client.refresh(5)
        assert {n.id for n in cluster.nodes} == {1, 2, 3}
        assert cluster.partition_count("orders") == 3
        assert cluster.leader_for(TopicPartition("orders", 1)).id == 2  # type: ignore[union-attr]
        assert cluster.cluster_id == "mini-cluster"
        assert cluster.controller_id == 1
        await client.refresh(5)  # the bootstrap connection was dropped: now on a real node
        net = client.network_client
        assert {net.metadata_version(n) for n in net.ready_nodes()} == {12}


@pytest.mark.parametrize(("broker_range", "expected"), [((0, 13), 13), ((1, 5), 5)])
async def test_highest_common_metadata_version(
    broker_range: tuple[int, int], expected: int
) -> None:
    state = ClusterState()
    broker = await MiniBroker(state, 1, metadata_versions=broker_range).start()
    state.create_topic("t")
    try:
        async with MetadataClient(broker.address, topics=["t"]) as client:
            cluster = await client.refresh(5)
            assert cluster.partition_count("t") == 1
            await client.refresh(5)
            net = client.network_client
            assert [net.metadata_version(n) for n in net.ready_nodes()] == [expected]
    finally:
        await broker.stop()


async def test_old_broker_without_kip_511_falls_back_to_api_versions_v0() -> None:
    state = ClusterState()
    broker = await MiniBroker(state, 1, api_versions_max=2, metadata_versions=(0, 7)).start()
    try:
        async with MetadataClient(broker.address, reconnect_backoff_ms=10) as client:
            cluster = await client.refresh(5)
            assert [n.id for n in cluster.nodes] == [1]
    finally:
        await broker.stop()


async def test_wait_on_metadata_for_a_topic_created_after_the_call(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    async with MetadataClient(servers(brokers)) as client:
        await client.refresh(5)
        waiter = asyncio.create_task(client.wait_on_metadata("late", max_wait_s=10))
        requests = sum(b.metadata_requests for b in brokers)
        await until(lambda: sum(b.metadata_requests for b in brokers) > requests)
        assert not waiter.done()
        state.create_topic("late", partitions=2)
        created = time.monotonic()
        cluster = await asyncio.wait_for(waiter, 5)
        # visible at the next refresh: at most one (growing, capped at 1 s) backoff away
        assert time.monotonic() - created < 1.5
        assert cluster.partition_count("late") == 2
        # cached now: no further wait
        assert (await client.wait_on_metadata("late", 1, max_wait_s=0)) is client.cluster


async def test_wait_on_metadata_partition_range_and_timeout(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    state.create_topic("three", partitions=3)
    async with MetadataClient(servers(brokers)) as client:
        with pytest.raises(InvalidPartitionError, match=r"3 is not in the range \[0\.\.\.3\)"):
            await client.wait_on_metadata("three", partition=3, max_wait_s=5)
        with pytest.raises(TimeoutError, match=r"^Topic nope not present in metadata after 300 ms"):
            await client.wait_on_metadata("nope", max_wait_s=0.3)


async def test_killing_the_broker_in_use_moves_the_client_to_another(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    state.create_topic("t")
    async with MetadataClient(servers(brokers), topics=["t"]) as client:
        await client.refresh(5)
        await client.refresh(5)  # now on a connection to a real (non-bootstrap) node
        [used] = client.network_client.ready_nodes()
        await brokers[used - 1].stop()
        del state.brokers[used]  # the survivors no longer advertise it
        state.create_topic("after-kill", partitions=4)
        cluster = await client.wait_on_metadata("after-kill", max_wait_s=5)
        assert cluster.partition_count("after-kill") == 4
        assert used not in client.network_client.ready_nodes()
        assert client.network_client.stats.disconnects >= 1


async def test_request_timeout_fails_over_to_another_broker(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    async with MetadataClient(servers(brokers), request_timeout_ms=200) as client:
        await client.refresh(5)
        await client.refresh(5)
        [used] = client.network_client.ready_nodes()
        brokers[used - 1].hang_metadata = True
        await client.refresh(5)
        stats = client.network_client.stats
        assert stats.metadata_failures == 1
        assert stats.disconnects == 1
        assert used not in client.network_client.ready_nodes()


async def test_rebootstrap_when_no_known_node_can_be_reached() -> None:
    _state, brokers = await start_cluster(2)
    first, second = brokers
    first.only_self = second.only_self = True  # each advertises only itself
    try:
        async with MetadataClient([first.address], reconnect_backoff_ms=20) as client:
            assert [n.id for n in (await client.refresh(5)).nodes] == [1]
        async with MetadataClient(servers(brokers), reconnect_backoff_ms=20) as client:
            known = (await client.refresh(5)).nodes[0].id
            await brokers[known - 1].stop()
            cluster = await client.refresh(5)
            assert [n.id for n in cluster.nodes] == [3 - known]
            assert client.network_client.stats.rebootstraps >= 1
    finally:
        for b in brokers:
            await b.stop()


async def test_a_response_without_brokers_does_not_count(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    for b in brokers:
        b.empty_brokers = True
    async with MetadataClient(servers(brokers), retry_backoff_max_ms=100) as client:
        with pytest.raises(TimeoutError):
            await client.refresh(0.3)
        assert client.metadata.update_version == 0
        assert client.network_client.stats.metadata_responses >= 2
        for b in brokers:
            b.empty_brokers = False
        assert len((await client.refresh(5)).nodes) == 3


async def test_no_second_connection_while_one_is_being_established(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    for b in brokers:
        b.delay_s = 0.3  # slow ApiVersions: the first connection stays in CHECKING_API_VERSIONS
    async with MetadataClient(servers(brokers), reconnect_backoff_ms=10) as client:
        await client.refresh(5)
        assert sum(b.connections_accepted for b in brokers) == 1
        assert client.network_client.stats.metadata_requests == 1


async def test_metadata_requests_from_many_clients_spread(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    clients = [MetadataClient(servers(brokers)) for _ in range(30)]
    try:
        for c in clients:
            c.start()
        await asyncio.gather(*(c.refresh(5) for c in clients))
        await asyncio.gather(*(c.refresh(5) for c in clients))
        counts = [b.metadata_requests for b in brokers]
        assert sum(counts) == 60
        assert min(counts) >= 8, counts  # ~20 each; a skew this large is ~1e-4 likely
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_watch_yields_each_new_version(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    async with MetadataClient(servers(brokers), all_topics=True, metadata_max_age_ms=50) as client:
        seen = []
        async for cluster in client.watch():
            seen.append(cluster)
            if len(seen) == 1:
                state.create_topic("w", partitions=1)
            elif "w" in cluster.topics and len(seen) < 50:
                state.topics["w"].partitions[0].leader = 2
                state.topics["w"].partitions[0].leader_epoch = 1
                if cluster.leader_for(TopicPartition("w", 0)).id == 2:  # type: ignore[union-attr]
                    break
        assert "w" not in seen[0].topics
        versions = list(seen)
        assert len(versions) == len({id(c) for c in versions})  # a new Cluster each step


async def test_close_ends_waits_and_watches(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    client = MetadataClient(servers(brokers))
    client.start()
    await client.refresh(5)
    waiter = asyncio.create_task(client.wait_on_metadata("never", max_wait_s=30))

    async def drain() -> list[Cluster]:
        return [c async for c in client.watch(include_current=False)]

    before = client.metadata.update_version
    watcher = asyncio.create_task(drain())
    await asyncio.sleep(0.05)
    await client.close()
    with pytest.raises(MetadataClosedError):
        await waiter
    # the watch ends at the close, having yielded at most a Cluster per update after it began
    # (the wait for "never" asks for updates), each a new one, and none for the close itself
    seen = await asyncio.wait_for(watcher, 1)
    assert len(seen) <= client.metadata.update_version - before
    assert len({id(c) for c in seen}) == len(seen)
    with pytest.raises(MetadataClosedError):
        await client.wait_on_metadata("x")


async def test_maybe_update_sends_only_when_due_and_one_at_a_time(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    async with MetadataClient(servers(brokers), request_timeout_ms=5_000) as client:
        await client.refresh(5)
        net = client.network_client
        sent = net.stats.metadata_requests
        wait_ms = net.maybe_update(net.now_ms())  # not due: max age is 5 minutes away
        assert 290_000 < wait_ms <= 300_000
        assert net.stats.metadata_requests == sent
        for b in brokers:
            b.hang_metadata = True
        client.metadata.request_update()
        await until(lambda: net.stats.metadata_requests == sent + 1)
        client.metadata.request_update()
        assert net.maybe_update(net.now_ms()) == 5_000  # one in flight: wait for it
        await asyncio.sleep(0.05)
        assert net.stats.metadata_requests == sent + 1
        assert net.has_metadata_in_flight()
