"""ReplicaFetcher: a follower's fetcher for the partitions one leader broker leads (Kafka's
``ReplicaFetcherThread`` on ``AbstractFetcherThread``): an asyncio task and one connection.

The connection goes to the leader's control listener (``control_listener_name``, CONTROL by
default), authenticated as the controller link authenticates: TLS and the cluster credential
as that listener's security protocol says. It is kmeta's inter-broker listener: every broker
registers it, it knows only the cluster's identity (which has CLUSTER_ACTION), and
replication does not share the client listeners' connection limits.

Each partition is fetching or truncating (Kafka's ``PartitionFetchState``):

* **Truncating**, after it was added (a new leader or leader epoch): a log with no leader
  epoch is truncated to its high watermark; else OffsetForLeaderEpoch (v3+ with our replica
  id) asks where the leader's copy of our latest epoch ends, and the log is cut there as
  ``AbstractFetcherThread.getOffsetTruncationState`` says (an epoch the leader answers that
  we do not hold: cut to our end of that epoch and ask again).
* **Fetching**: Fetch v12+ (v15+: ReplicaState with our broker epoch) from our log end with
  the epoch of our last batch; the leader's batches are appended as they are
  (``PartitionLog.append_as_follower``); the high watermark becomes min(leader's, our log
  end) and the log start follows the leader's. A diverging epoch in the answer truncates as
  above without another round trip (KIP-595's truncation on fetch). OFFSET_OUT_OF_RANGE:
  the leader's log end below ours cuts ours there (an unclean election), else a log below the
  leader's log start starts afresh there (``fetchOffsetAndTruncate``, by ListOffsets).
* Other errors (not the leader any more, an epoch this leader does not know yet, a
  connection lost) retry after replica.fetch.backoff.ms; the next LeaderAndIsr moves the
  partition to another fetcher if the leader changed.

Here is the loop: when to ask the leader, what to retry, and whether a partition is still
the one asked about when the answer comes. What goes on the wire is in
:mod:`kmeta.server.fetcher.leader_endpoint`, what an answer does to a partition's log in
:mod:`kmeta.server.fetcher.partition_fetch_state` (Kafka's split of ``AbstractFetcherThread``,
``ReplicaFetcherThread`` and ``LeaderEndPoint``, roughly).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from ssl import SSLContext
from typing import TYPE_CHECKING, Protocol

from kmeta.metadata.cache import MetadataCache
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import fetch as fe
from kmeta.server.fetcher.leader_endpoint import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    epoch_end_offsets_request,
    fetch_request,
    list_offset,
)
from kmeta.server.fetcher.partition_fetch_state import (
    PartitionFetchState,
    apply_truncation,
    process_partition_data,
    start_at_leader_start,
    start_fetching,
    truncate_to_leader_end,
)
from kmeta.server.to_controller.controller_connection import NET_ERRORS, call, open_connection

if TYPE_CHECKING:
    from kmeta.server.replica.partition import Partition
    from kmeta.server.replica.replica_states import ReplicaState

log = logging.getLogger("kmeta.server.replica_fetcher")

Key = tuple[str, int]

#: Kafka's replica.fetch.backoff.ms (the other replica.fetch.* settings: leader_endpoint)
FETCH_BACKOFF_S = 1.0


class FetcherHost(Protocol):
    """What a fetcher asks of the manager that owns it (ReplicaFetcherManager): who this broker
    is, where and how it reaches a leader, and the partitions it follows. A typed seam, so that
    the manager imports its fetchers and they do not import it back."""

    broker_id: int
    cache: MetadataCache
    client_id: str
    #: the leaders' listener, and the TLS and SASL it takes
    listener: str
    ssl: SSLContext | None
    sasl: ClientCredential | None
    broker_epoch: Callable[[], int]

    def follower_state(self, key: Key) -> ReplicaState | None: ...

    def peek(self, key: Key) -> Partition | None: ...

    def partition(self, key: Key) -> Partition | None: ...

    def unfollow(self, key: Key) -> None: ...


class ReplicaFetcher:
    def __init__(self, manager: FetcherHost, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[Key, PartitionFetchState] = {}
        self._wake = asyncio.Event()
        self._conn: KafkaConnection | None = None
        self._versions: dict[int, range] = {}
        self._task: asyncio.Task[None] | None = None
        #: responses applied (for status and tests)
        self.fetches = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{self.leader_id}"
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._close()

    def cancel(self) -> None:
        """Stop now, without waiting (the broker is shutting down)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._close()

    def add(self, key: Key, state: PartitionFetchState) -> None:
        self.partitions[key] = state
        self._wake.set()

    def remove(self, key: Key) -> None:
        self.partitions.pop(key, None)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                conn = await self._connection()
                if conn is None:
                    await asyncio.sleep(FETCH_BACKOFF_S)
                    continue
                if any(s.truncating for s in self.partitions.values()):
                    await self._truncate(conn)
                if not await self._fetch(conn):
                    await self._idle()
            except NET_ERRORS as exc:
                log.debug("fetcher for leader %d: %r; retrying", self.leader_id, exc)
                self._close()
                await asyncio.sleep(FETCH_BACKOFF_S)
            except Exception:  # (a bug: said loudly, and the fetcher goes on after a pause)
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                self._close()
                await asyncio.sleep(FETCH_BACKOFF_S)

    async def _idle(self) -> None:
        """Nothing to fetch now (every partition backing off): wait for the first to be due
        or for a partition to be added."""
        loop = asyncio.get_running_loop()
        due = min((s.delayed_until for s in self.partitions.values()), default=loop.time())
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, due - loop.time()) or FETCH_BACKOFF_S):
                await self._wake.wait()

    async def _connection(self) -> KafkaConnection | None:
        if self._conn is not None and self._conn.is_open:
            return self._conn
        manager = self.manager
        node = manager.cache.snapshot.alive_node(self.leader_id, manager.listener)
        if node is None:  # (not registered yet, or gone: the next LeaderAndIsr says who leads)
            return None
        self._conn, self._versions = await open_connection(
            node.host, node.port, manager.client_id, manager.ssl, manager.sasl
        )
        return self._conn

    def _due(self) -> list[tuple[Key, PartitionFetchState]]:
        now = asyncio.get_running_loop().time()
        return [(k, s) for k, s in self.partitions.items() if s.delayed_until <= now]

    def _delay(self, key: Key, state: PartitionFetchState) -> None:
        if self.partitions.get(key) is state:
            state.delayed_until = asyncio.get_running_loop().time() + FETCH_BACKOFF_S

    def _current(
        self, key: Key, state: PartitionFetchState, offset: int, make: bool = True
    ) -> Partition | None:
        """The follower partition when ``state`` is still the one asked with, at ``offset``
        (a LeaderAndIsr may have replaced or removed it while the request was out); its log
        made now unless ``make`` is False."""
        if self.partitions.get(key) is not state or state.fetch_offset != offset:
            return None
        return self.manager.partition(key) if make else self.manager.peek(key)

    # -- truncation --------------------------------------------------------------------------
    async def _truncate(self, conn: KafkaConnection) -> None:
        """``AbstractFetcherThread.maybeTruncate``: without an epoch, to the high watermark;
        with one, where the leader's copy of our latest epoch ends."""
        asks: dict[Key, tuple[PartitionFetchState, int, int]] = {}
        for key, state in self._due():
            if not state.truncating:
                continue
            partition = self.manager.partition(key)
            if partition is None:
                continue
            epoch = partition.log.latest_epoch
            if epoch is None:
                partition.log.truncate_to(partition.log.high_watermark)
                start_fetching(partition, state)
                continue
            asks[key] = (state, epoch, state.fetch_offset)
        if not asks:
            return
        epochs = {
            key: (state.current_leader_epoch, epoch) for key, (state, epoch, _) in asks.items()
        }
        response = await call(
            conn, epoch_end_offsets_request(self._versions, self.manager.broker_id, epochs)
        )
        for t in response.topics:
            for p in t.partitions:
                key = (t.topic, p.partition)
                if key not in asks:
                    continue
                state, _, offset = asks[key]
                partition = self._current(key, state, offset)
                if partition is None:
                    continue
                if p.error_code != ErrorCode.NONE:
                    self._delay(key, state)
                    continue
                apply_truncation(partition, state, self.leader_id, p.leader_epoch, p.end_offset)

    # -- fetching ----------------------------------------------------------------------------
    async def _fetch(self, conn: KafkaConnection) -> bool:
        """One Fetch of every due partition that is fetching; False when there was none."""
        wanted: dict[Key, tuple[PartitionFetchState, int, Partition | None]] = {}
        for key, state in self._due():
            if self.manager.follower_state(key) is None:  # (its state was dropped: no more)
                self.manager.unfollow(key)
            elif not state.truncating:
                wanted[key] = (state, state.fetch_offset, self.manager.peek(key))
        if not wanted:
            return False
        manager = self.manager
        request = fetch_request(
            self._versions, self.leader_id, manager.broker_id, manager.broker_epoch(), wanted
        )
        response = await call(conn, request)  # (its wait, 500 ms, well within the timeout)
        self.fetches += 1
        if response.error_code != ErrorCode.NONE:
            log.warning(
                "fetch from leader %d: %s", self.leader_id, ErrorCode(response.error_code).name
            )
            for key, (state, _, _) in wanted.items():
                self._delay(key, state)
            return True
        names = {s.topic_id: k[0] for k, (s, _, _) in wanted.items() if s.topic_id is not None}
        for t in response.responses:
            topic = t.topic if request.version < 13 else names.get(t.topic_id, "")
            for p in t.partitions:
                key = (topic, p.partition_index)
                if key in wanted:
                    state, offset, _ = wanted[key]
                    await self._process(conn, key, state, offset, p)
        return True

    async def _process(
        self, conn: KafkaConnection, key: Key, state: PartitionFetchState, offset: int,
        data: fe.PartitionData,
    ) -> None:  # fmt: skip
        error = data.error_code
        # (the log is made when there is something to write or cut; else an empty log not
        # made yet stays so: see kmeta.server.replica.follower_reads)
        make = (
            error == ErrorCode.OFFSET_OUT_OF_RANGE
            or bool(data.records)
            or data.diverging_epoch is not None
        )
        partition = self._current(key, state, offset, make)
        if partition is None:  # (gone, moved on, or an empty log not made: nothing to write)
            if error != ErrorCode.NONE:
                self._delay(key, state)
            return
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(conn, key, state, partition)
            return
        if error != ErrorCode.NONE:
            if error == ErrorCode.FENCED_LEADER_EPOCH:
                log.info("%s: leader %d has a newer epoch than %d; waiting for its LeaderAndIsr",
                         partition, self.leader_id, state.current_leader_epoch)  # fmt: skip
            self._delay(key, state)
            return
        if not process_partition_data(partition, state, self.leader_id, offset, data):
            self._delay(key, state)

    async def _out_of_range(
        self, conn: KafkaConnection, key: Key, state: PartitionFetchState, partition: Partition
    ) -> None:
        """``AbstractFetcherThread.fetchOffsetAndTruncate``: the leader's log end below ours
        cuts ours there; else a log end below the leader's log start starts afresh there."""
        offset = state.fetch_offset
        leader_end = await self._leader_offset(conn, key, state, LATEST_TIMESTAMP)
        if leader_end is None or self._current(key, state, offset) is None:
            self._delay(key, state)
        elif leader_end < partition.log.log_end_offset:
            truncate_to_leader_end(partition, state, self.leader_id, leader_end)
        else:
            leader_start = await self._leader_offset(conn, key, state, EARLIEST_TIMESTAMP)
            if leader_start is None or self._current(key, state, offset) is None:
                self._delay(key, state)
            else:
                start_at_leader_start(partition, state, self.leader_id, leader_start)

    async def _leader_offset(
        self, conn: KafkaConnection, key: Key, state: PartitionFetchState, which: int
    ) -> int | None:
        me, epoch = self.manager.broker_id, state.current_leader_epoch
        return await list_offset(conn, self._versions, me, key, epoch, which)
