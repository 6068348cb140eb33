"""``MetadataClient``: the facade. Bootstraps, runs the network client, waits like a producer.

    async with MetadataClient("localhost:9092") as client:
        cluster = await client.wait_on_metadata("orders", partition=3, max_wait_s=10)
        async for cluster in client.watch():
            ...

``wait_on_metadata`` is ``KafkaProducer.waitOnMetadata``: track the topic, and until its
partition count is known, request an update and await it; a partition at or past the count
raises InvalidPartitionError naming the valid range; the deadline raises TimeoutError.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from kmeta.client.cluster import Cluster
from kmeta.client.config import ClientConfig, parse_bootstrap_servers
from kmeta.client.errors import (
    InvalidPartitionError,
    InvalidTopicError,
    MetadataClosedError,
    TopicAuthorizationError,
)
from kmeta.client.metadata import Metadata
from kmeta.client.network_client import NetworkClient


class MetadataClient:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        config: ClientConfig | None = None,
        topics: Iterable[str] = (),
        all_topics: bool = False,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        **settings: Any,
    ) -> None:
        """``settings`` override ``ClientConfig`` fields (``retry_backoff_ms=10``, ...)."""
        if config is None:
            if bootstrap_servers is None:
                raise ValueError("give bootstrap_servers or a config")
            servers = (
                tuple(bootstrap_servers.split(","))
                if isinstance(bootstrap_servers, str)
                else tuple(bootstrap_servers)
            )
            config = ClientConfig(bootstrap_servers=servers)
        if settings:
            config = replace(config, **settings)
        self.config = config
        self._clock = clock
        rng = rng or random.Random()
        self.metadata = Metadata(
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            metadata_max_idle_ms=config.metadata_max_idle_ms,
            need_metadata_for_all_topics=all_topics,
            rng=rng,
        )
        self.metadata.bootstrap(parse_bootstrap_servers(config.bootstrap_servers))
        self.metadata.subscribe(topics)
        self.network_client = NetworkClient(config, self.metadata, clock=clock, rng=rng)
        self._closed = False

    async def __aenter__(self) -> MetadataClient:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def start(self) -> None:
        self.network_client.start()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.metadata.close()
        await self.network_client.close()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @property
    def cluster(self) -> Cluster:
        return self.metadata.cluster

    async def refresh(self, timeout_s: float = 60.0) -> Cluster:
        """Request a full update and wait for it."""
        version = self.metadata.request_update()
        await self.metadata.await_update(version, timeout_s)
        return self.cluster

    async def wait_on_metadata(
        self, topic: str, partition: int | None = None, max_wait_s: float = 60.0
    ) -> Cluster:
        """Return a cluster view that knows ``topic`` (and ``partition``), waiting up to
        ``max_wait_s`` for it."""
        if self._closed:
            raise MetadataClosedError("the client is closed")
        cluster = self.cluster
        if topic in cluster.invalid_topics:
            raise InvalidTopicError(f"Invalid topic: {topic}")
        self.metadata.add(topic, self._now_ms())
        count = cluster.partition_count(topic)
        if count is not None and (partition is None or partition < count):
            return cluster
        loop = asyncio.get_running_loop()
        start = loop.time()
        max_wait_ms = round(max_wait_s * 1000)
        remaining = max_wait_s
        while True:
            self.metadata.add(topic, self._now_ms())
            version = self.metadata.request_update_for_topic(topic)
            try:
                await self.metadata.await_update(version, remaining)
            except TimeoutError:
                raise TimeoutError(_missing(topic, partition, count, max_wait_ms)) from None
            cluster = self.cluster
            count = cluster.partition_count(topic)
            if count is not None:
                if partition is None or partition < count:
                    return cluster
                # a count from an update that began after this call: the partition is absent
                raise InvalidPartitionError(
                    f"Invalid partition given: {partition} is not in the range "
                    f"[0...{count}) of topic {topic}."
                )
            if topic in cluster.unauthorized_topics:
                raise TopicAuthorizationError(f"Not authorized to access topics: [{topic}]")
            if topic in cluster.invalid_topics:
                raise InvalidTopicError(f"Invalid topic: {topic}")
            remaining = max_wait_s - (loop.time() - start)
            if remaining <= 0:
                raise TimeoutError(_missing(topic, partition, count, max_wait_ms))

    async def watch(self, *, include_current: bool = True) -> AsyncIterator[Cluster]:
        """Yield the cluster after every successful update (the latest, if several landed
        between two steps), until the client closes."""
        version = self.metadata.update_version
        if include_current and version > 0:
            yield self.cluster
        while True:
            try:
                version = await self.metadata.await_update(version, 3600.0)
            except TimeoutError:
                continue
            except MetadataClosedError:
                return
            yield self.cluster


def _missing(topic: str, partition: int | None, count: int | None, max_wait_ms: int) -> str:
    if count is None:
        return f"Topic {topic} not present in metadata after {max_wait_ms} ms."
    return (
        f"Partition {partition} of topic {topic} with partition count {count} is not present "
        f"in metadata after {max_wait_ms} ms."
    )
