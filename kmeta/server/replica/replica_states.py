"""ReplicaStates: this broker's role per partition, as the last accepted LeaderAndIsr set it.

It is a ``MutableMapping[(topic, partition), ReplicaState]``: a state is made on access;
handlers read, set and pop it as they did the dict. Underneath, each topic is kept as int32
columns (:mod:`kmeta.server.replica.replica_columns`: ~33 bytes per partition against 361 as a dict
of NamedTuples), and a LeaderAndIsr is applied to them under Kafka's acceptance rule
(:mod:`kmeta.server.replica.leader_and_isr_acceptance`) without a state made per partition.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from typing import NamedTuple

from kmeta.metadata.model import TopicPartitionKey
from kmeta.server.replica.leader_and_isr_acceptance import (
    PartitionStateRecord,
    apply_distinct,
    apply_states,
)
from kmeta.server.replica.replica_columns import (
    ISR,
    LEADER_EPOCH,
    LEADER_ID,
    PARTITION_EPOCH,
    REPLICAS,
    ROLE,
    TOPIC_ID,
    WIDTH,
    Interned,
    TopicColumns,
)

LEADER = "leader"
FOLLOWER = "follower"


class ReplicaState(NamedTuple):
    """This broker's role for one partition, as the last accepted LeaderAndIsr set it.

    (A NamedTuple: a LeaderAndIsr for 100k partitions makes 100k of them.)"""

    role: str  # LEADER or FOLLOWER
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    topic_id: uuid.UUID | None


_make = tuple.__new__
_ROLES = (FOLLOWER, LEADER)


def _state(topic: TopicColumns, row: int) -> ReplicaState:
    d, sets, b = topic.data, topic.sets, row * WIDTH
    return _make(ReplicaState, (
        _ROLES[d[b + ROLE]], d[b + LEADER_ID], d[b + LEADER_EPOCH], d[b + PARTITION_EPOCH],
        sets[d[b + ISR]], sets[d[b + REPLICAS]], topic.ids[d[b + TOPIC_ID]],
    ))  # fmt: skip


class ReplicaStates(MutableMapping[TopicPartitionKey, ReplicaState]):
    """``(topic, partition) -> ReplicaState``, stored as columns per topic."""

    __slots__ = ("_interned", "_topics")

    def __init__(self) -> None:
        self._topics: dict[str, TopicColumns] = {}
        #: replica/ISR sets shared by every topic (equal sets: one tuple)
        self._interned: Interned = {}

    def __getitem__(self, key: TopicPartitionKey) -> ReplicaState:
        topic = self._topics.get(key[0])
        row = -1 if topic is None else topic.row(key[1])
        if row < 0:
            raise KeyError(key)
        assert topic is not None
        return _state(topic, row)

    def get(self, key: TopicPartitionKey, default: ReplicaState | None = None) -> ReplicaState | None:  # type: ignore[override]
        topic = self._topics.get(key[0])
        row = -1 if topic is None else topic.row(key[1])
        return default if row < 0 or topic is None else _state(topic, row)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        topic = self._topics.get(key[0])
        return topic is not None and topic.row(key[1]) >= 0

    def __setitem__(self, key: TopicPartitionKey, state: ReplicaState) -> None:
        name, index = key
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = TopicColumns()
        row = topic.row(index)
        if row < 0:
            row = topic.place(index)
            topic.count += 1
        interned = self._interning()
        b = row * WIDTH
        topic.digest = None
        topic.data[b : b + WIDTH] = array("i", (
            index, state.role == LEADER, state.leader, state.leader_epoch, state.partition_epoch,
            topic.ref(state.isr, interned), topic.ref(state.replicas, interned),
            topic.id_ref(state.topic_id),
        ))  # fmt: skip

    def _interning(self) -> Interned:
        """The shared replica/ISR sets, emptied when they have grown large (sharing is an
        optimisation, not a rule)."""
        interned = self._interned
        if len(interned) >= 100_000:
            interned.clear()
        return interned

    def apply_leader_and_isr(
        self, name: str, topic_id: uuid.UUID | None, parts: Iterable[PartitionStateRecord], me: int
    ) -> list[int]:
        """One topic's LeaderAndIsr partition states applied as Kafka's broker does
        (:func:`kmeta.server.replica.leader_and_isr_acceptance.apply_states`): each partition's error
        code, in order. ``topic_id``: the request's (None: it has none)."""
        topic = self._topics.get(name)
        new_topic = topic is None
        if topic is None:
            topic = TopicColumns()
        errors = apply_states(topic, topic_id, parts, me, self._interning())
        return self._applied(name, topic, new_topic, errors)

    def apply_distinct(
        self,
        name: str,
        topic_id: uuid.UUID | None,
        indexes: Sequence[int],
        keys: Sequence[int],
        states: Sequence[PartitionStateRecord],
        me: int,
    ) -> list[int]:
        """:meth:`apply_leader_and_isr` of partition ``indexes[e]`` with the state
        ``states[keys[e]]`` (but for its index), for each ``e`` in order
        (:func:`kmeta.server.replica.leader_and_isr_acceptance.apply_distinct`)."""
        topic = self._topics.get(name)
        new_topic = topic is None
        if topic is None:
            topic = TopicColumns()
        errors = apply_distinct(topic, topic_id, indexes, keys, states, me, self._interning())
        return self._applied(name, topic, new_topic, errors)

    def _applied(self, name: str, topic: TopicColumns, new_topic: bool, errors: list[int]) -> list[int]:
        """The end of an apply: a topic with a changed row loses its digest, a new topic that
        got a partition is kept; ``errors`` returned."""
        if 0 in errors:
            topic.digest = None  # (a row changed)
        if new_topic and topic.count:
            self._topics[name] = topic
        return errors

    def __delitem__(self, key: TopicPartitionKey) -> None:
        name, index = key
        topic = self._topics.get(name)
        row = -1 if topic is None else topic.row(index)
        if row < 0 or topic is None:
            raise KeyError(key)
        topic.remove(index, row)
        if topic.count == 0:
            del self._topics[name]

    def indexes(self, name: str) -> list[int]:
        """The partitions of ``name`` this broker holds a state for."""
        topic = self._topics.get(name)
        if topic is None:
            return []
        return topic.indexes()

    def topic_names(self) -> list[str]:
        return list(self._topics)

    def digest(self, name: str) -> int | None:
        """The digest of ``name``'s states (kept until one of them changes); None: no state,
        or not one topic id."""
        topic = self._topics.get(name)
        if topic is None:
            return None
        if topic.digest is None:
            topic.digest = topic.compute_digest()
        return topic.digest

    def __iter__(self) -> Iterator[TopicPartitionKey]:
        for name, topic in list(self._topics.items()):
            for i in topic.indexes():
                yield (name, i)

    def __len__(self) -> int:
        return sum(t.count for t in self._topics.values())

    def __repr__(self) -> str:
        return f"ReplicaStates({dict(self.items())!r})"
