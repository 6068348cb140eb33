"""ReplicaStates: this broker's role per partition, kept as int32 columns per topic.

At RF 3 on 3 brokers every broker replicates every partition, so LeaderAndIsr leaves one
``ReplicaState`` per partition of the cluster. As a dict of ``(topic, partition)`` keys to
NamedTuples holding fresh replica/ISR tuples that cost 361 bytes per partition (tracemalloc,
100k partitions), more than the whole metadata cache, and a million GC-tracked objects. Here
each topic is one ``array('i')`` of :data:`WIDTH` int32 per partition (its index, role,
leader, leader epoch, partition epoch and references into small tables of the replica/ISR
sets and topic ids), addressed by partition index while the indexes are dense (a dict only
for a topic whose indexes are not): ~33 bytes per partition, measured the same way.

It is a ``MutableMapping[(topic, partition), ReplicaState]``: a state is made on access;
handlers read, set and pop it as they did the dict.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from typing import NamedTuple, Protocol

from kmeta.metadata.model import TopicPartitionKey
from kmeta.metadata.partitions import iota
from kmeta.metadata.replica_digest import (
    digest_of_bytes,
    index_bytes,
    partition_words,
    words_bytes,
)
from kmeta.protocol.errors import ErrorCode

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


class PartitionStateRecord(Protocol):
    """What :meth:`ReplicaStates.apply_leader_and_isr` reads of a LeaderAndIsr partition state."""

    @property
    def partition_index(self) -> int: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def partition_epoch(self) -> int: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def replicas(self) -> Sequence[int]: ...


_INCONSISTENT_TOPIC_ID = int(ErrorCode.INCONSISTENT_TOPIC_ID)
_STALE_CONTROLLER_EPOCH = int(ErrorCode.STALE_CONTROLLER_EPOCH)
_UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

#: int32 per partition: index (ABSENT: no state), role (1: leader), leader, leader epoch,
#: partition epoch, isr and replicas (positions in ``sets``), topic id (position in ``ids``)
WIDTH = 8
_IDX, _ROLE, _LEADER, _LE, _PE, _ISR, _REP, _ID = range(WIDTH)
ABSENT = -1
#: a topic id column value for :meth:`_Topic.put`: keep the id held (a request without one)
KEEP_ID = -1
#: a topic stays index-addressed while an index is below this much more than twice its rows
_DENSE_SLACK = 1024
_make = tuple.__new__
_ROLES = (FOLLOWER, LEADER)


class _Topic:
    __slots__ = ("count", "data", "digest", "ids", "rows", "set_ref", "sets")

    def __init__(self) -> None:
        self.data: array[int] = array("i")
        self.rows: dict[int, int] | None = None  # None: row == partition index
        self.sets: list[tuple[int, ...]] = []
        self.set_ref: dict[tuple[int, ...], int] = {}
        self.ids: list[uuid.UUID | None] = [None]
        self.count = 0
        #: kmeta.metadata.replica_digest's digest of the rows (None: not computed since a change)
        self.digest: int | None = None

    def row(self, index: int) -> int:
        rows = self.rows
        if rows is None:
            if 0 <= index < len(self.data) // WIDTH and self.data[index * WIDTH] != ABSENT:
                return index
            return -1
        return rows.get(index, -1)

    def ref(self, ids: Sequence[int], interned: dict[tuple[int, ...], tuple[int, ...]]) -> int:
        t = ids if type(ids) is tuple else tuple(ids)
        ref = self.set_ref.get(t)
        if ref is None:
            ref = self.set_ref[t] = len(self.sets)
            self.sets.append(interned.setdefault(t, t))
        return ref

    def id_ref(self, topic_id: uuid.UUID | None) -> int:
        ids = self.ids
        for i, known in enumerate(ids):  # one or two per topic
            if known == topic_id:
                return i
        ids.append(topic_id)
        return len(ids) - 1

    def refusal(self, row: int, topic_id: uuid.UUID | None, leader_epoch: int, mine: bool) -> int:
        """Kafka's acceptance rule for one LeaderAndIsr partition state (its ``leader_epoch``,
        whether its replicas name this broker) over the partition's ``row`` (-1: none held),
        the request's ``topic_id`` (None: it has none): the partition's error code, 0 when
        the state is accepted. A topic id other than the one held: INCONSISTENT_TOPIC_ID; a
        leader epoch not newer than the one held: STALE_CONTROLLER_EPOCH (Kafka answers both
        "older" and "same" so); replicas without this broker: UNKNOWN_TOPIC_OR_PARTITION.
        (:meth:`ReplicaStates._rewrites` checks the same for a whole topic at once.) The apply
        loops call it for a partition held or not naming this broker only: 400k states half
        new, half held cost 0.38-0.39 s CPU against 0.36-0.37 s with the rule inline twice
        (best of 5, alternated, load 2-7)."""
        if row >= 0:
            b = row * WIDTH
            data = self.data
            held = self.ids[data[b + _ID]]
            if held is not None and topic_id is not None and held != topic_id:
                return _INCONSISTENT_TOPIC_ID
            if leader_epoch <= data[b + _LE]:
                return _STALE_CONTROLLER_EPOCH
        if not mine:
            return _UNKNOWN_TOPIC_OR_PARTITION
        return 0

    def put(self, index: int, row: int, values: array[int]) -> None:
        """One partition's column ``values`` written at its ``row`` (-1: a partition the topic
        does not hold yet: appended when it is the next dense row, else given a row); a topic
        id column of :data:`KEEP_ID` keeps the one held (none for a new row). A call per
        partition costs no measurable time in the apply loops (200k partitions: 194-212 ms
        CPU against 195-216 ms inline, alternated)."""
        data = self.data
        if row < 0:
            self.count += 1
            if values[_ID] == KEEP_ID:
                values[_ID] = 0
            if self.rows is None and index == len(data) // WIDTH:  # the next dense row
                data.extend(values)
                return
            row = self.place(index)
        b = row * WIDTH
        if values[_ID] == KEEP_ID:
            values[_ID] = data[b + _ID]
        data[b : b + WIDTH] = values

    def place(self, index: int) -> int:
        """The row for a new ``index`` (made room for)."""
        data = self.data
        if self.rows is None:
            n = len(data) // WIDTH
            if 0 <= index < n:
                return index
            if 0 <= index <= 2 * n + _DENSE_SLACK:
                data.extend([ABSENT] * ((index + 1 - n) * WIDTH))
                return index
            # sparse indexes: keep the rows, address them through a dict
            self.rows = {data[r * WIDTH]: r for r in range(n) if data[r * WIDTH] != ABSENT}
        row = len(data) // WIDTH
        data.extend([ABSENT] * WIDTH)
        self.rows[index] = row
        return row

    def compute_digest(self) -> int | None:
        """The rows' digest (:mod:`kmeta.metadata.replica_digest`); None when they do not
        share one topic id (no digest can match then: the topic is not reported). Joined
        from bytes, each distinct state's words laid out once: a registration after a
        controller restart computes it over every partition held (2M: ~0.75 -> 0.34 us
        per partition, while the full update is being applied)."""
        d, sets, W = self.data, self.sets, WIDTH
        ids: set[int] = set()
        tails: dict[tuple[int, int, int, int, int], bytes] = {}
        rows: Iterable[tuple[int, int, int, int, int, int, int]] = zip(
            d[_IDX::W], d[_LEADER::W], d[_LE::W], d[_PE::W], d[_REP::W], d[_ISR::W], d[_ID::W],
            strict=True,
        )  # fmt: skip
        if self.rows is not None:  # (dense rows are in index order already)
            rows = sorted(rows)
        chunks: list[bytes] = []
        append = chunks.append
        for i, leader, le, pe, rep, isr, tid in rows:
            if i == ABSENT:
                continue
            ids.add(tid)
            key = (leader, le, pe, rep, isr)
            tail = tails.get(key)
            if tail is None:
                words = partition_words(leader, le, pe, sets[rep], sets[isr])
                tail = tails[key] = words_bytes(words)
            append(index_bytes(i))
            append(tail)
        if len(ids) != 1:
            return None
        return digest_of_bytes(self.ids[ids.pop()], b"".join(chunks))

    def state(self, row: int) -> ReplicaState:
        d, sets, b = self.data, self.sets, row * WIDTH
        return _make(ReplicaState, (
            _ROLES[d[b + _ROLE]], d[b + _LEADER], d[b + _LE], d[b + _PE], sets[d[b + _ISR]],
            sets[d[b + _REP]], self.ids[d[b + _ID]],
        ))  # fmt: skip


class ReplicaStates(MutableMapping[TopicPartitionKey, ReplicaState]):
    """``(topic, partition) -> ReplicaState``, stored as columns per topic."""

    __slots__ = ("_interned", "_topics")

    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}
        #: replica/ISR sets shared by every topic (equal sets: one tuple)
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}

    def __getitem__(self, key: TopicPartitionKey) -> ReplicaState:
        topic = self._topics.get(key[0])
        row = -1 if topic is None else topic.row(key[1])
        if row < 0:
            raise KeyError(key)
        assert topic is not None
        return topic.state(row)

    def get(self, key: TopicPartitionKey, default: ReplicaState | None = None) -> ReplicaState | None:  # type: ignore[override]
        topic = self._topics.get(key[0])
        row = -1 if topic is None else topic.row(key[1])
        return default if row < 0 or topic is None else topic.state(row)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        topic = self._topics.get(key[0])
        return topic is not None and topic.row(key[1]) >= 0

    def __setitem__(self, key: TopicPartitionKey, state: ReplicaState) -> None:
        name, index = key
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = _Topic()
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

    def _interning(self) -> dict[tuple[int, ...], tuple[int, ...]]:
        """The shared replica/ISR sets, emptied when they have grown large (sharing is an
        optimisation, not a rule)."""
        interned = self._interned
        if len(interned) >= 100_000:
            interned.clear()
        return interned

    def apply_leader_and_isr(
        self, name: str, topic_id: uuid.UUID | None, parts: Iterable[PartitionStateRecord], me: int
    ) -> list[int]:
        """One topic's LeaderAndIsr partition states applied as Kafka's broker does (see
        :mod:`kmeta.server.handlers.leader_and_isr`): each partition's error code, in order.

        The columns are read and written directly (a state is not made per partition): a
        million-partition create sends every broker a state per partition it replicates.
        ``topic_id``: the request's (None: it has none)."""
        topic = self._topics.get(name)
        new_topic = topic is None
        if topic is None:
            topic = _Topic()
        interned = self._interning()
        ref, row_of, refusal = topic.ref, topic.row, topic.refusal
        id_ref = topic.id_ref(topic_id) if topic_id is not None else KEEP_ID
        errors: list[int] = []
        append = errors.append
        for p in parts:
            index = p.partition_index
            row = row_of(index)
            mine = me in p.replicas
            if row >= 0 or not mine:  # (a new partition naming this broker is accepted)
                error = refusal(row, topic_id, p.leader_epoch, mine)
                if error:
                    append(error)
                    continue
            values = array("i", (
                index, p.leader == me, p.leader, p.leader_epoch, p.partition_epoch,
                ref(p.isr, interned), ref(p.replicas, interned), id_ref,
            ))  # fmt: skip
            topic.put(index, row, values)
            append(0)
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
        ``states[keys[e]]`` (but for its index), for each ``e`` in order, as a broker reads a
        topic state (:class:`kmeta.protocol.stream.Distinct`): the few distinct states are
        turned into column values once. A topic sent whole in index order with every state
        naming this broker and accepted (a create, a restarted broker's first LeaderAndIsr,
        a new controller's resync of a topic whose every leader epoch moved) is filled at C
        speed."""
        topic = self._topics.get(name)
        new_topic = topic is None
        if topic is None:
            topic = _Topic()
        interned = self._interning()
        mine = [me in p.replicas for p in states]
        if all(mine) and self._rewrites(topic, topic_id, indexes, states):
            n = len(indexes)
            id_ref = topic.id_ref(topic_id) if topic_id is not None else 0
            ref = topic.ref
            rows_of = [
                array("i", (0, p.leader == me, p.leader, p.leader_epoch, p.partition_epoch,
                            ref(p.isr, interned), ref(p.replicas, interned), id_ref)).tobytes()
                for p in states
            ]  # fmt: skip
            block = array("i", b"".join(map(rows_of.__getitem__, keys)))
            block[_IDX::WIDTH] = array("i", indexes)
            topic.data, topic.rows, topic.count, topic.digest = block, None, n, None
            if new_topic:
                self._topics[name] = topic
            return [0] * n
        ref, row_of, refusal = topic.ref, topic.row, topic.refusal
        id_ref = topic.id_ref(topic_id) if topic_id is not None else KEEP_ID
        #: per distinct state: its columns after the index (made on use)
        columns: list[tuple[int, ...] | None] = [None] * len(states)
        errors: list[int] = []
        append = errors.append
        for index, k in zip(indexes, keys, strict=True):
            p = states[k]
            row = row_of(index)
            if row >= 0 or not mine[k]:  # (a new partition naming this broker is accepted)
                error = refusal(row, topic_id, p.leader_epoch, mine[k])
                if error:
                    append(error)
                    continue
            c = columns[k]
            if c is None:
                c = columns[k] = (p.leader == me, p.leader, p.leader_epoch, p.partition_epoch,
                                  ref(p.isr, interned), ref(p.replicas, interned), id_ref)  # fmt: skip
            values = array("i", (index, *c))
            topic.put(index, row, values)
            append(0)
        return self._applied(name, topic, new_topic, errors)

    def _applied(self, name: str, topic: _Topic, new_topic: bool, errors: list[int]) -> list[int]:
        """The end of an apply: a topic with a changed row loses its digest, a new topic that
        got a partition is kept; ``errors`` returned."""
        if 0 in errors:
            topic.digest = None  # (a row changed)
        if new_topic and topic.count:
            self._topics[name] = topic
        return errors

    @staticmethod
    def _rewrites(
        topic: _Topic, topic_id: uuid.UUID | None, indexes: Sequence[int], states: Sequence[PartitionStateRecord]
    ) -> bool:
        """Whether partitions ``indexes`` of ``topic`` with ``states`` (each naming this
        broker) are all accepted and make its rows 0..n-1 in order: ``indexes`` are 0..n-1
        in order, the rows held are partitions 0..m-1 (m <= n), each newer than the one it
        replaces (every leader epoch held below every one sent) and of no other topic id;
        a topic held without an id keeps it only when it is new. Checked at C speed."""
        n, data = len(indexes), topic.data
        m = len(data) // WIDTH
        if not n or m > n or array("i", indexes) != iota(n):
            return False
        if not m:
            return True
        if topic.rows is not None or topic_id is None or data[_IDX::WIDTH] != iota(m):
            return False
        if max(data[_LE::WIDTH]) >= min(p.leader_epoch for p in states):
            return False
        ids = topic.ids
        return all(ids[i] is None or ids[i] == topic_id for i in set(data[_ID::WIDTH]))

    def __delitem__(self, key: TopicPartitionKey) -> None:
        name, index = key
        topic = self._topics.get(name)
        row = -1 if topic is None else topic.row(index)
        if row < 0 or topic is None:
            raise KeyError(key)
        topic.data[row * WIDTH] = ABSENT
        topic.digest = None
        if topic.rows is not None:
            del topic.rows[index]
        topic.count -= 1
        if topic.count == 0:
            del self._topics[name]

    def indexes(self, name: str) -> list[int]:
        """The partitions of ``name`` this broker holds a state for."""
        topic = self._topics.get(name)
        if topic is None:
            return []
        return [i for i in topic.data[_IDX::WIDTH] if i != ABSENT]

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
            for i in list(topic.data[_IDX::WIDTH]):
                if i != ABSENT:
                    yield (name, i)

    def __len__(self) -> int:
        return sum(t.count for t in self._topics.values())

    def __repr__(self) -> str:
        return f"ReplicaStates({dict(self.items())!r})"
