"""A consumer-group manager driven as the coordinator drives it, without the log: every
outcome's records are encoded, then replayed (decoded) into the manager at once, as the
runtime does once they are committed. Metadata comes from a real MetadataCache."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kmeta.metadata import MetadataCache, MetadataSnapshot
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.consumer import consumer_records as rec
from kmeta.server.group.consumer.consumer_heartbeat import ConsumerGroupConfig, Outcome
from kmeta.server.group.consumer.consumer_manager import ConsumerGroupManager
from tests.metadata.umr import B, P, umr


class Cluster:
    """Topics in a metadata cache (full updates, so deleted topics go)."""

    def __init__(self) -> None:
        self.cache = MetadataCache(1)
        self.ids: dict[str, uuid.UUID] = {}
        self.counts: dict[str, int] = {}
        self.version = 0

    def set_topic(self, name: str, partitions: int) -> None:
        self.ids.setdefault(name, uuid.uuid4())
        self.counts[name] = partitions
        self._push()

    def delete_topic(self, name: str) -> None:
        del self.counts[name]
        self._push()

    def _push(self) -> None:
        self.version += 1
        parts = [P(t, i) for t, n in self.counts.items() for i in range(n)]
        ids = {t: self.ids[t] for t in self.counts}
        self.cache.update_metadata(self.version, umr(8, parts, [B.plain(1)], topic_ids=ids, type_=2))

    @property
    def snap(self) -> MetadataSnapshot:
        return self.cache.snapshot


class Coordinator:
    def __init__(self, cluster: Cluster, **config: Any) -> None:
        self.cluster = cluster
        self.manager = ConsumerGroupManager(ConsumerGroupConfig(**config))
        self.written: list[tuple[bytes, bytes | None]] = []

    def apply(self, out: Outcome | None) -> Outcome | None:
        if out is not None:
            for key, value in out.records:
                self.written.append((key, value))
                if rec.key_version(key) in rec.KEY_VERSIONS:  # (as the shard routes them)
                    self.manager.replay(key, value)
        return out

    def heartbeat(self, **fields: Any) -> cgh.ConsumerGroupHeartbeatResponse:
        request = cgh.ConsumerGroupHeartbeatRequest(**{"group_id": "g", "version": 0, **fields})
        out = self.manager.heartbeat(request, "client", "/127.0.0.1", self.cluster.snap)
        self.apply(out)
        return out.response


class Consumer:
    """A KIP-848 client as librdkafka behaves: it takes what it is assigned, gives up what
    the assignment drops, and reports what it owns."""

    def __init__(self, coordinator: Coordinator, topics: Iterable[str], member_id: str = "", **extra: Any) -> None:
        self.c = coordinator
        self.topics = tuple(topics)
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.extra = extra
        self.last: cgh.ConsumerGroupHeartbeatResponse | None = None
        #: after an answer that never came, the next heartbeat is a full one (Kafka's client)
        self.full_next = False

    def heartbeat(self) -> cgh.ConsumerGroupHeartbeatResponse:
        if self.epoch == 0:
            r = self.c.heartbeat(member_id=self.member_id, member_epoch=0, rebalance_timeout_ms=300_000,
                                 subscribed_topic_names=self.topics, topic_partitions=(), **self.extra)
        else:
            full = {"rebalance_timeout_ms": 300_000, "subscribed_topic_names": self.topics} if self.full_next else {}
            self.full_next = False
            r = self.c.heartbeat(member_id=self.member_id, member_epoch=self.epoch,
                                 topic_partitions=tuple(cgh.TopicPartitions(t, tuple(sorted(p))) for t, p in self.owned.items()),
                                 **{k: v for k, v in self.extra.items() if k == "instance_id"}, **full)
        self.last = r
        if r.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.epoch, self.owned = 0, {}  # (it drops its partitions and rejoins, as a client does)
        if r.error_code == 0:
            self.member_id = r.member_id or self.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {tp.topic_id: frozenset(tp.partitions) for tp in r.assignment.topic_partitions if tp.partitions}
        return r

    def leave(self) -> cgh.ConsumerGroupHeartbeatResponse:
        return self.c.heartbeat(member_id=self.member_id, member_epoch=-1)


def owners(consumers: Iterable[Consumer]) -> dict[tuple[uuid.UUID, int], list[str]]:
    seen: dict[tuple[uuid.UUID, int], list[str]] = {}
    for c in consumers:
        for t, ps in c.owned.items():
            for p in ps:
                seen.setdefault((t, p), []).append(c.member_id)
    return seen


def converge(consumers: list[Consumer], rounds: int = 20) -> None:
    """Heartbeat round-robin until nothing changes, checking that no partition ever has two
    owners on the way."""
    for _ in range(rounds):
        before = [(c.epoch, dict(c.owned)) for c in consumers]
        for c in consumers:
            c.heartbeat()
            assert all(len(m) == 1 for m in owners(consumers).values()), owners(consumers)
        if before == [(c.epoch, dict(c.owned)) for c in consumers]:
            return
    raise AssertionError("the group did not converge")


def partitions_of(cluster: Cluster, counts: Mapping[str, int]) -> set[tuple[uuid.UUID, int]]:
    return {(cluster.ids[t], p) for t, n in counts.items() for p in range(n)}
