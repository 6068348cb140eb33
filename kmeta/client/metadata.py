"""``Metadata``: the client's metadata state, as Kafka's ``Metadata`` plus ``ProducerMetadata``.

* ``update_version`` goes up by one on every successful update; ``request_update()`` marks an
  update as needed and returns the version the caller should wait past with
  ``await_update(version, timeout_s)``.
* Topics are tracked on demand (``add``) and forgotten after ``metadata_max_idle_ms`` without
  use; subscribed topics (``subscribe``) never expire. A newly added topic is fetched at once in
  a *partial* update (only the new topics), which skips the refresh backoff.
* A full refresh happens at least every ``metadata_max_age_ms``. After a failed update the next
  one waits ``retry_backoff_ms * 2**(attempts-1)`` capped at ``retry_backoff_max_ms``, +-20 %;
  after a success it waits the initial backoff, growing the same way while consecutive answers
  are equivalent (KIP-580/KIP-951), so a stuck leaderless partition cannot make a tight loop.
* Leader-epoch fencing: partition metadata with an older leader epoch than the last seen is
  not applied (the cached partition is kept); a changed topic id resets the epoch.
* A response without brokers (a broker still starting) counts as a failed update.

Two collaborators carry the parts Kafka's ``ProducerMetadata`` and ``handleMetadataResponse``
hold: ``TrackedTopics`` (kmeta.client.metadata_topics: which topics, until when) and
``MetadataResponseHandler`` (kmeta.client.metadata_response: what an answer means, with the
leader epochs it fences on).

Everything here is synchronous and clock-free: callers pass ``now_ms``. Only ``await_update``
touches asyncio, to wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kmeta.client.backoff import ExponentialBackoff
from kmeta.client.cluster import Cluster
from kmeta.client.errors import MetadataClosedError
from kmeta.client.metadata_response import (
    INVALID_METADATA_ERRORS,
    MetadataResponseHandler,
    equivalent,
)
from kmeta.client.metadata_topics import TrackedTopics
from kmeta.metadata.addresses import Address
from kmeta.metadata.model import TopicPartition
from kmeta.protocol.messages import metadata as md

__all__ = [
    "DEFAULT_METADATA_MAX_AGE_MS",
    "DEFAULT_METADATA_MAX_IDLE_MS",
    "INVALID_METADATA_ERRORS",
    "ClusterListener",
    "Metadata",
    "MetadataRequestAndVersion",
]

DEFAULT_METADATA_MAX_AGE_MS = 5 * 60 * 1000
DEFAULT_METADATA_MAX_IDLE_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class MetadataRequestAndVersion:
    """What to ask for: ``topics`` None means all topics; an empty tuple means brokers only."""

    topics: tuple[str, ...] | None
    request_version: int
    is_partial_update: bool


ClusterListener = Callable[[Cluster], None]


class Metadata:
    def __init__(
        self,
        *,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = DEFAULT_METADATA_MAX_AGE_MS,
        metadata_max_idle_ms: int = DEFAULT_METADATA_MAX_IDLE_MS,
        need_metadata_for_all_topics: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self.refresh_backoff = ExponentialBackoff(
            retry_backoff_ms, 2, max(retry_backoff_ms, retry_backoff_max_ms), 0.2, rng
        )
        self.metadata_max_age_ms = metadata_max_age_ms
        self.need_metadata_for_all_topics = need_metadata_for_all_topics
        self.update_version = 0
        self.last_refresh_ms = 0
        self.last_successful_refresh_ms = 0
        self._request_version = 0
        self._attempts = 0  # consecutive failed updates
        self._equivalent_responses = 0  # consecutive successful updates that changed nothing
        self._allow_update_at_ms = 0
        self._need_full_update = False
        self._need_partial_update = False
        self._cluster = Cluster.empty()
        self._bootstrap_addresses: tuple[Address, ...] = ()
        self._tracked = TrackedTopics(metadata_max_idle_ms)
        self._responses = MetadataResponseHandler(self.retain_topic, self.request_update)
        self._closed = False
        self._listeners: list[ClusterListener] = []
        self._wakeups: list[Callable[[], None]] = []
        self._changed = asyncio.Event()

    # -- state -----------------------------------------------------------------------------------
    @property
    def cluster(self) -> Cluster:
        return self._cluster

    def fetch(self) -> Cluster:
        return self._cluster

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def metadata_max_idle_ms(self) -> int:
        return self._tracked.max_idle_ms

    @property
    def topics(self) -> frozenset[str]:
        """Every topic whose metadata is kept: tracked on demand plus subscribed."""
        return self._tracked.all

    @property
    def new_topics(self) -> frozenset[str]:
        return self._tracked.new

    @property
    def attempts(self) -> int:
        return self._attempts

    def last_seen_leader_epoch(self, tp: TopicPartition) -> int | None:
        return self._responses.last_seen_leader_epoch(tp)

    # -- bootstrap -------------------------------------------------------------------------------
    def bootstrap(self, addresses: Sequence[Address]) -> None:
        self._bootstrap_addresses = tuple(addresses)
        self._cluster = Cluster.bootstrap(self._bootstrap_addresses)
        self._need_full_update = True

    def rebootstrap(self) -> None:
        """Forget the known brokers and start again from the bootstrap servers (KIP-899).

        Not an update: ``update_version`` stays, so waiters keep waiting for real metadata.
        """
        self.bootstrap(self._bootstrap_addresses)

    # -- asking for updates ----------------------------------------------------------------------
    def add_wakeup(self, callback: Callable[[], None]) -> None:
        """``callback`` runs whenever an update is requested (the network client's poll wakes)."""
        self._wakeups.append(callback)

    def _wake(self) -> None:
        for callback in self._wakeups:
            callback()

    def request_update(self) -> int:
        """Mark a full update as needed; return the version to wait past."""
        self._need_full_update = True
        self._wake()
        return self.update_version

    def request_update_for_new_topics(self) -> int:
        """Fetch new topics at once: a partial update that skips the refresh backoff."""
        self._allow_update_at_ms = 0
        self._need_partial_update = True
        self._equivalent_responses = 0
        self._request_version += 1
        self._wake()
        return self.update_version

    def request_update_for_topic(self, topic: str) -> int:
        if self._tracked.is_new(topic):
            return self.request_update_for_new_topics()
        return self.request_update()

    def update_requested(self) -> bool:
        return self._need_full_update or self._need_partial_update

    # -- topics ----------------------------------------------------------------------------------
    def add(self, topic: str, now_ms: int) -> None:
        """Track ``topic`` (or refresh its idle expiry); a new topic is fetched right away."""
        if self._tracked.add(topic, now_ms):
            self.request_update_for_new_topics()

    def subscribe(self, topics: Iterable[str]) -> None:
        """Topics kept without expiry (a consumer's subscription)."""
        if self._tracked.subscribe(topics):
            self.request_update_for_new_topics()

    def retain_topic(self, topic: str, is_internal: bool, now_ms: int) -> bool:
        return self.need_metadata_for_all_topics or self._tracked.retain(topic, now_ms)

    # -- timing ----------------------------------------------------------------------------------
    def time_to_allow_update(self, now_ms: int) -> int:
        return max(self._allow_update_at_ms - now_ms, 0)

    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until an update is due: now if requested (after backoff), else at max age."""
        expires_in = max(self.last_successful_refresh_ms + self.metadata_max_age_ms - now_ms, 0)
        if expires_in == 0:
            self._equivalent_responses = 0  # a periodic refresh is not a retry
        time_to_expire = 0 if self.update_requested() else expires_in
        return max(time_to_expire, self.time_to_allow_update(now_ms))

    def new_metadata_request(self, now_ms: int) -> MetadataRequestAndVersion:
        if self.need_metadata_for_all_topics:
            return MetadataRequestAndVersion(None, self._request_version, False)
        fresh = self.last_successful_refresh_ms + self.metadata_max_age_ms > now_ms
        new_topics = self._tracked.new
        if not self._need_full_update and fresh and new_topics:
            return MetadataRequestAndVersion(tuple(sorted(new_topics)), self._request_version, True)
        return MetadataRequestAndVersion(tuple(sorted(self.topics)), self._request_version, False)

    # -- outcomes --------------------------------------------------------------------------------
    def failed_update(self, now_ms: int) -> None:
        self.last_refresh_ms = now_ms
        self._attempts += 1
        self._equivalent_responses = 0
        self._allow_update_at_ms = now_ms + self.refresh_backoff.backoff(self._attempts - 1)

    def update(
        self,
        request_version: int,
        response: md.MetadataResponse,
        is_partial_update: bool,
        now_ms: int,
    ) -> bool:
        """Apply a Metadata response. False when it counted as a failed update (no brokers)."""
        if self._closed:
            return False
        if not response.brokers:
            self.failed_update(now_ms)
            return False
        self._need_partial_update = request_version < self._request_version
        self.last_refresh_ms = now_ms
        self._attempts = 0
        self.update_version += 1
        if not is_partial_update:
            self._need_full_update = False
            self.last_successful_refresh_ms = now_ms
        old = self._cluster
        self._cluster = self._responses.handle(old, response, is_partial_update, now_ms)
        if equivalent(old, self._cluster):
            self._equivalent_responses += 1
        else:
            self._equivalent_responses = 0
        backoff_attempts = max(self._equivalent_responses - 1, 0)
        self._allow_update_at_ms = now_ms + self.refresh_backoff.backoff(backoff_attempts)
        for t in response.topics:
            if t.name is not None:
                self._tracked.answered(t.name)
        if not self.need_metadata_for_all_topics:
            self._responses.forget_epochs_except(self.topics)
        for listener in list(self._listeners):
            listener(self._cluster)
        self._notify()
        return True

    # -- waiting ---------------------------------------------------------------------------------
    def add_listener(self, listener: ClusterListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: ClusterListener) -> None:
        self._listeners.remove(listener)

    def _notify(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def await_update(self, last_version: int, timeout_s: float) -> int:
        """Wait until ``update_version`` passes ``last_version``; return the new version.

        Raises TimeoutError("Failed to update metadata after N ms.") at the deadline and
        MetadataClosedError once the metadata is closed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            if self._closed:
                raise MetadataClosedError("Requested metadata update after close")
            if self.update_version > last_version:
                return self.update_version
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"Failed to update metadata after {round(max(timeout_s, 0.0) * 1000)} ms."
                )
            event = self._changed
            # on timeout, loop to re-check: the raise above names the caller's full timeout
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await event.wait()

    def close(self) -> None:
        self._closed = True
        self._notify()
