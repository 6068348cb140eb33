"""ReplicaFetcherManager: this broker's fetchers, one per leader broker it follows (Kafka's
``ReplicaFetcherManager`` with num.replica.fetchers 1).

The replica manager calls :meth:`ReplicaFetcherManager.follow` when a LeaderAndIsr makes this
broker a follower of a partition (or gives its leader a new epoch) and :meth:`unfollow` when
it leads it or stops holding it. Following starts (again) from the follower's own log end:
a restarted broker with a log dir resumes where its log ends, one without starts at 0 and is
moved to the leader's log start by the first OFFSET_OUT_OF_RANGE. A fetcher left with no
partitions stops (Kafka's ``shutdownIdleFetcherThreads``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from ssl import SSLContext
from typing import TYPE_CHECKING

from kmeta.metadata.cache import MetadataCache
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.net.tls import uses_sasl, uses_tls
from kmeta.server.config import BrokerConfig
from kmeta.server.fetcher.partition_fetch_state import PartitionFetchState
from kmeta.server.fetcher.replica_fetcher import ReplicaFetcher
from kmeta.server.replica.replica_states import FOLLOWER, ReplicaState, ReplicaStates

if TYPE_CHECKING:
    from kmeta.server.replica.partition import Partition

log = logging.getLogger("kmeta.server.fetcher_manager")

Key = tuple[str, int]


class ReplicaFetcherManager:
    def __init__(
        self, config: BrokerConfig, cache: MetadataCache, replicas: ReplicaStates,
        partition_of: Callable[[Key], Partition | None], made: Callable[[Key], Partition | None],
        broker_epoch: Callable[[], int],
    ) -> None:  # fmt: skip
        self.broker_id = config.broker_id
        self.cache = cache
        self.client_id = f"kmeta-replica-fetcher-{config.broker_id}"
        #: the leaders' listener we fetch on, and how we authenticate there (as the link does)
        self.listener = config.control_listener_name
        protocol = config.security_protocol(self.listener)
        self.ssl: SSLContext | None = config.tls.client_context() if uses_tls(protocol) else None
        self.sasl: ClientCredential | None = config.cluster_credential if uses_sasl(protocol) else None
        self._replicas = replicas
        self._partition_of = partition_of
        self._made = made
        self.broker_epoch = broker_epoch
        self.fetchers: dict[int, ReplicaFetcher] = {}
        #: partition -> the leader whose fetcher holds it
        self._leader_of: dict[Key, int] = {}
        self._closed = False

    def follower_state(self, key: Key) -> ReplicaState | None:
        """This broker's replica state of ``key`` while it follows it, else None."""
        state = self._replicas.get(key)
        return state if state is not None and state.role == FOLLOWER else None

    def peek(self, key: Key) -> Partition | None:
        """The followed partition if its log was made here (never making it)."""
        return self._made(key) if self.follower_state(key) is not None else None

    def partition(self, key: Key) -> Partition | None:
        """The followed partition, its log made now if it was not (records came for it)."""
        return self._partition_of(key) if self.follower_state(key) is not None else None

    def follow(self, key: Key, state: ReplicaState, partition: Partition | None) -> None:
        """Fetch ``key`` from the leader ``state`` names; a new leader or leader epoch starts
        over from our log end (a log that was made truncates first; none: an empty log, at
        0), the same one leaves the fetch as it is."""
        if self._closed or state.role != FOLLOWER or state.leader < 0:
            self.unfollow(key)
            return
        leader = self._leader_of.get(key)
        if leader == state.leader:
            current = self.fetchers[leader].partitions.get(key)
            if current is not None and current.current_leader_epoch == state.leader_epoch:
                return
        self.unfollow(key)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # (built outside a loop, as in-memory tests do: nothing fetches)
            return
        fetcher = self.fetchers.get(state.leader)
        if fetcher is None:
            fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader)
            fetcher.start()
        topic_id = state.topic_id if state.topic_id is not None else self.cache.snapshot.topic_id(key[0])
        offset = 0 if partition is None else partition.log.log_end_offset
        fetcher.add(key, PartitionFetchState(offset, state.leader_epoch, partition is not None, topic_id))
        self._leader_of[key] = state.leader

    def unfollow(self, key: Key) -> None:
        leader = self._leader_of.pop(key, None)
        if leader is None:
            return
        fetcher = self.fetchers[leader]
        fetcher.remove(key)
        if not fetcher.partitions:
            del self.fetchers[leader]
            asyncio.get_running_loop().create_task(fetcher.stop())

    def following(self) -> int:
        return len(self._leader_of)

    def shutdown(self) -> None:
        """Every fetcher stops; nothing is followed from now on."""
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._leader_of.clear()
        for fetcher in fetchers:
            fetcher.cancel()
