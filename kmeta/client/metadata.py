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

Everything here is synchronous and clock-free: callers pass ``now_ms``. Only ``await_update``
touches asyncio, to wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kmeta.client.backoff import ExponentialBackoff
from kmeta.client.cluster import Cluster, PartitionInfo, partition_from_response
from kmeta.client.errors import MetadataClosedError
from kmeta.metadata.model import TopicPartition
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.types import ZERO_UUID

#: Error codes whose Java exceptions extend ``InvalidMetadataException``: the cached metadata
#: is stale and a refresh is due.
INVALID_METADATA_ERRORS: frozenset[int] = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.LISTENER_NOT_FOUND,
        74,  # FENCED_LEADER_EPOCH
        75,  # UNKNOWN_LEADER_EPOCH
        78,  # OFFSET_NOT_AVAILABLE
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)

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
        self.metadata_max_idle_ms = metadata_max_idle_ms
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
        self._bootstrap_addresses: tuple[tuple[str, int], ...] = ()
        self._last_seen_leader_epochs: dict[TopicPartition, int] = {}
        self._topics: dict[str, int] = {}  # tracked topic -> expiry (ms)
        self._new_topics: set[str] = set()
        self._subscribed: set[str] = set()
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
    def topics(self) -> frozenset[str]:
        """Every topic whose metadata is kept: tracked on demand plus subscribed."""
        return frozenset(self._topics) | self._subscribed

    @property
    def new_topics(self) -> frozenset[str]:
        return frozenset(self._new_topics)

    @property
    def attempts(self) -> int:
        return self._attempts

    def last_seen_leader_epoch(self, tp: TopicPartition) -> int | None:
        return self._last_seen_leader_epochs.get(tp)

    # -- bootstrap -------------------------------------------------------------------------------
    def bootstrap(self, addresses: Sequence[tuple[str, int]]) -> None:
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
        if topic in self._new_topics:
            return self.request_update_for_new_topics()
        return self.request_update()

    def update_requested(self) -> bool:
        return self._need_full_update or self._need_partial_update

    # -- topics ----------------------------------------------------------------------------------
    def add(self, topic: str, now_ms: int) -> None:
        """Track ``topic`` (or refresh its idle expiry); a new topic is fetched right away."""
        known = topic in self._topics or topic in self._subscribed
        self._topics[topic] = now_ms + self.metadata_max_idle_ms
        if not known:
            self._new_topics.add(topic)
            self.request_update_for_new_topics()

    def subscribe(self, topics: Iterable[str]) -> None:
        """Topics kept without expiry (a consumer's subscription)."""
        fresh = set(topics) - self._subscribed - set(self._topics)
        self._subscribed.update(topics)
        if fresh:
            self._new_topics.update(fresh)
            self.request_update_for_new_topics()

    def retain_topic(self, topic: str, is_internal: bool, now_ms: int) -> bool:
        if self.need_metadata_for_all_topics or topic in self._subscribed:
            return True
        expiry = self._topics.get(topic)
        if expiry is None:
            return False
        if topic in self._new_topics:
            return True
        if expiry <= now_ms:
            del self._topics[topic]
            return False
        return True

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
        if not self._need_full_update and fresh and self._new_topics:
            return MetadataRequestAndVersion(
                tuple(sorted(self._new_topics)), self._request_version, True
            )
        return MetadataRequestAndVersion(tuple(sorted(self.topics)), self._request_version, False)

    # -- outcomes --------------------------------------------------------------------------------
    def failed_update(self, now_ms: int) -> None:
        self.last_refresh_ms = now_ms
        self._attempts += 1
        self._equivalent_responses = 0
        self._allow_update_at_ms = now_ms + self.refresh_backoff.backoff(self._attempts - 1)

    def update(
        self, request_version: int, response: md.MetadataResponse, is_partial_update: bool, now_ms: int
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
        self._cluster = self._handle_response(response, is_partial_update, now_ms)
        if self._equivalent(old, self._cluster):
            self._equivalent_responses += 1
        else:
            self._equivalent_responses = 0
        backoff_attempts = max(self._equivalent_responses - 1, 0)
        self._allow_update_at_ms = now_ms + self.refresh_backoff.backoff(backoff_attempts)
        for t in response.topics:
            self._new_topics.discard(t.name)
        kept = self.topics
        if not self.need_metadata_for_all_topics:
            for tp in [tp for tp in self._last_seen_leader_epochs if tp.topic not in kept]:
                del self._last_seen_leader_epochs[tp]
        for listener in list(self._listeners):
            listener(self._cluster)
        self._notify()
        return True

    @staticmethod
    def _equivalent(old: Cluster, new: Cluster) -> bool:
        return (
            not old.is_bootstrap
            and old.nodes == new.nodes
            and old.partitions_by_topic == new.partitions_by_topic
            and old.topic_errors == new.topic_errors
        )

    def _handle_response(self, response: md.MetadataResponse, is_partial: bool, now_ms: int) -> Cluster:
        old = self._cluster
        reliable_epochs = response.version >= 9  # older brokers did not propagate epochs reliably
        partitions: list[PartitionInfo] = []
        topic_ids: dict[str, uuid.UUID] = {}
        errors: dict[str, int] = {}
        internal: set[str] = set()
        in_response: set[str] = set()
        node_ids = {b.node_id for b in response.brokers}
        for t in response.topics:
            name = t.name
            if name is None:
                continue
            in_response.add(name)
            topic_id = t.topic_id if t.topic_id not in (None, ZERO_UUID) else None
            if not self.retain_topic(name, t.is_internal, now_ms):
                continue
            old_topic_id = old.topic_ids.get(name) if topic_id is not None else None
            if topic_id is not None:
                topic_ids[name] = topic_id
            if t.is_internal:
                internal.add(name)
            if t.error_code != ErrorCode.NONE:
                errors[name] = t.error_code
                if t.error_code in INVALID_METADATA_ERRORS:
                    self.request_update()
                continue
            for p in t.partitions:
                info = self._latest(
                    partition_from_response(name, p), reliable_epochs, topic_id, old_topic_id, old
                )
                if info is not None:
                    partitions.append(info)
                if p.error_code in INVALID_METADATA_ERRORS or p.leader_id not in node_ids:
                    self.request_update()  # stale, or a partition without a known leader
        if is_partial:  # keep what the partial answer did not cover (Kafka's mergeWith)
            for name, parts in old.partitions_by_topic.items():
                if name not in in_response and self.retain_topic(
                    name, name in old.internal_topics, now_ms
                ):
                    partitions.extend(parts)
                    if name in old.topic_ids:
                        topic_ids[name] = old.topic_ids[name]
                    if name in old.internal_topics:
                        internal.add(name)
            for name, code in old.topic_errors.items():
                if name not in in_response and name not in errors:
                    errors[name] = code
        return Cluster.of_response(response, partitions, topic_ids, errors, internal)

    def _latest(
        self,
        info: PartitionInfo,
        reliable_epochs: bool,
        topic_id: uuid.UUID | None,
        old_topic_id: uuid.UUID | None,
        old: Cluster,
    ) -> PartitionInfo | None:
        """The partition metadata to keep: the new one unless its leader epoch is older."""
        tp = info.tp
        epoch = info.leader_epoch
        if not reliable_epochs or epoch is None:
            self._last_seen_leader_epochs.pop(tp, None)
            return info.without_leader_epoch()
        current = self._last_seen_leader_epochs.get(tp)
        if topic_id is not None and topic_id != old_topic_id:
            self._last_seen_leader_epochs[tp] = epoch  # a re-created topic starts over
            return info
        if current is None or epoch >= current:
            self._last_seen_leader_epochs[tp] = epoch
            return info
        return old.partition(tp)  # fenced: keep what we had

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
