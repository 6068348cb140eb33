"""TopicPartitions: one topic's partition states as one int32 column block, not one object each.

A broker caches every partition of the cluster. Kept as a ``PartitionState`` tuple per
partition in a dict per topic, that was ~157 bytes per partition (tracemalloc, 100k partitions
at RF 3) plus the fresh replica/ISR tuples of each decoded record, and a million GC-tracked
tuples that every full collection walks. Here a topic is one ``array('i')`` of
:data:`WIDTH` int32 per partition (its index, controller epoch, leader, leader epoch, zk
version, and references into the topic's small table of distinct replica/ISR/offline sets),
about 34 bytes per partition, and nothing per partition for the GC to track. Measured with
``benchmarks/cache_update.py``-style builds in-process (100 topics x 1000 partitions, RF 3;
tracemalloc): 157 -> 36 bytes per cached partition.

Readers see an immutable ``Mapping[int, PartitionState]``: a state is made on access (about
a microsecond), so the per-topic Metadata encoder, which reads every partition once per cached
block, pays what it paid for the tuple it used to find. Nothing reachable from a published
``TopicPartitions`` is mutated; :class:`TopicBuilder` makes the next version of a topic from the
current one (a C-speed copy of the block) while the current one keeps serving.
"""

from __future__ import annotations

from array import array
from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from typing import Any, Protocol, TypeVar, overload

from kmeta.metadata.model import PartitionState
from kmeta.protocol.codec import columnar

#: int32 per partition: index, controller epoch, leader, leader epoch, zk version, isr,
#: replicas and offline replicas (the last three: positions in the topic's ``sets``)
WIDTH = 8
_IDX, _CE, _LEADER, _LE, _ZK, _ISR, _REP, _OFF = range(WIDTH)
_make = tuple.__new__
class WireState(Protocol):
    """The fields of an UpdateMetadataPartitionState that a topic keeps."""

    @property
    def partition_index(self) -> int: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def zk_version(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def offline_replicas(self) -> Sequence[int]: ...


#: (leader, leader epoch, isr, replicas, offline replicas), the sets as table positions
LeadershipKey = tuple[int, int, int, int, int]
#: distinct replica sets kept in a shared intern table before it is dropped and rebuilt
INTERN_LIMIT = 100_000
T = TypeVar("T")


class TopicPartitions(Mapping[int, PartitionState]):
    """One topic's partitions, immutable; iterates partition indexes in the order they came."""

    __slots__ = ("_data", "_rows", "_sets", "derived", "topic")

    def __init__(
        self, topic: str, data: array[int], sets: tuple[tuple[int, ...], ...], rows: dict[int, int] | None
    ) -> None:
        self.topic = topic
        self._data = data
        self._sets = sets
        #: partition index -> row; None when row == index for every row (0..n-1 in order)
        self._rows = rows
        #: a memo of values computed from these partitions (the broker keeps encoded Metadata
        #: blocks here); it dies with this object, which a change of the topic replaces
        self.derived: dict[Any, Any] = {}

    @classmethod
    def of(cls, topic: str, states: Mapping[int, PartitionState] | None = None) -> TopicPartitions:
        """From plain states (tests)."""
        builder = TopicBuilder(topic)
        for state in (states or {}).values():
            builder.put(state.partition_index, state.controller_epoch, state.leader,
                        state.leader_epoch, state.isr, state.zk_version, state.replicas,
                        state.offline_replicas)  # fmt: skip
        return builder.freeze()

    def _row(self, index: int) -> int:
        rows = self._rows
        if rows is None:
            return index if 0 <= index < len(self._data) // WIDTH else -1
        return rows.get(index, -1)

    def _state(self, row: int) -> PartitionState:
        d, sets, b = self._data, self._sets, row * WIDTH
        return _make(PartitionState, (
            self.topic, d[b], d[b + _CE], d[b + _LEADER], d[b + _LE], sets[d[b + _ISR]],
            d[b + _ZK], sets[d[b + _REP]], sets[d[b + _OFF]],
        ))  # fmt: skip

    def __getitem__(self, index: int) -> PartitionState:
        row = self._row(index)
        if row < 0:
            raise KeyError(index)
        return self._state(row)

    @overload
    def get(self, index: int, /) -> PartitionState | None: ...
    @overload
    def get(self, index: int, /, default: PartitionState | T) -> PartitionState | T: ...

    def get(self, index: int, /, default: PartitionState | T | None = None) -> PartitionState | T | None:
        row = self._row(index)
        return default if row < 0 else self._state(row)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and self._row(index) >= 0

    def __len__(self) -> int:
        return len(self._data) // WIDTH

    def __iter__(self) -> Iterator[int]:
        return iter(self._data[_IDX::WIDTH])

    def period(self) -> int | None:
        """The smallest P such that partition p holds the values of partition p mod P for
        every p (but for its index), when the rows are partitions 0..n-1 in order; None when
        not so. (As the controller assigns them, a topic's partitions repeat every few: 6 on
        3 brokers.) :func:`kmeta.protocol.codec.columnar.period` over the rows, the index blanked."""
        if self._rows is not None or not len(self):
            return None
        size = self._data.itemsize
        return columnar.period(self._data.tobytes(), WIDTH * size, size)

    def leadership(self, first: int | None = None) -> tuple[list[int], list[LeadershipKey], tuple[tuple[int, ...], ...]]:
        """For encoders that write what clients see of each partition (a Metadata answer):
        the indexes in ascending order, each one's (leader, leader epoch, isr, replicas,
        offline replicas) with the three sets as positions in the returned table. Partitions
        with equal keys encode alike but for the index, and a topic has few distinct keys:
        the caller encodes each once. Read from the columns at C speed (no state objects).
        ``first``: only the first rows (of rows 0..n-1 in order: those partitions)."""
        d = self._data if first is None else self._data[: first * WIDTH]
        keys = list(zip(d[_LEADER::WIDTH], d[_LE::WIDTH], d[_ISR::WIDTH], d[_REP::WIDTH],
                        d[_OFF::WIDTH], strict=True))  # fmt: skip
        indexes = d[_IDX::WIDTH].tolist()
        if self._rows is not None:  # (rows in arrival order): sorted by index
            order = sorted(range(len(indexes)), key=indexes.__getitem__)
            indexes, keys = [indexes[r] for r in order], [keys[r] for r in order]
        return indexes, keys, self._sets

    def iter_states(self) -> Iterator[PartitionState]:
        state = self._state
        return (state(row) for row in range(len(self)))

    def items(self) -> ItemsView[int, PartitionState]:
        return _Items(self)

    def values(self) -> ValuesView[PartitionState]:
        return _Values(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TopicPartitions):
            return self.topic == other.topic and dict(self.items()) == dict(other.items())
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TopicPartitions({self.topic!r}, {dict(self.items())!r})"


class _Items(ItemsView[int, PartitionState]):
    """The items, read row by row (no tuple of states built up front)."""

    __slots__ = ()
    _mapping: TopicPartitions

    def __iter__(self) -> Iterator[tuple[int, PartitionState]]:
        return ((s.partition_index, s) for s in self._mapping.iter_states())


class _Values(ValuesView[PartitionState]):
    """The states, read row by row."""

    __slots__ = ()
    _mapping: TopicPartitions

    def __iter__(self) -> Iterator[PartitionState]:
        return self._mapping.iter_states()


class TopicBuilder:
    """The next version of one topic, built while the current one keeps serving.

    ``put`` adds or replaces a partition, ``delete`` removes one; ``seen`` remembers which
    rows this update mentioned (a FULL update drops the others: :meth:`drop_unseen`).
    """

    __slots__ = ("_data", "_deleted", "_interned", "_rows", "_seen", "_set_ref", "_sets", "changed",
                 "topic")  # fmt: skip

    def __init__(
        self,
        topic: str,
        current: TopicPartitions | None = None,
        interned: dict[tuple[int, ...], tuple[int, ...]] | None = None,
    ) -> None:
        self.topic = topic
        #: replica sets shared across topics (the cache's table): equal sets, one tuple
        self._interned = {} if interned is None else interned
        if current is None:
            self._data: array[int] = array("i")
            self._sets: list[tuple[int, ...]] = [()]
            self._rows: dict[int, int] = {}
        else:
            self._data = array("i", current._data)
            self._sets = list(current._sets)
            index = current._data[_IDX::WIDTH]
            self._rows = dict(zip(index, range(len(index)), strict=True))
        # keyed by the decoded sequences as they come (tuples), equal to the tuples kept
        self._set_ref: dict[Sequence[int], int] = {s: i for i, s in enumerate(self._sets)}
        self._seen = bytearray(len(self._rows))
        self._deleted: set[int] = set()
        #: put, delete or drop_unseen changed something (else the current version stands)
        self.changed = False

    def _ref(self, ids: Sequence[int]) -> int:
        ref = self._set_ref.get(ids)
        if ref is None:
            ref = self._set_ref[ids] = len(self._sets)
            t = tuple(ids)
            interned = self._interned
            if len(interned) >= INTERN_LIMIT:
                interned.clear()  # sharing is an optimisation, not a rule
            self._sets.append(interned.setdefault(t, t))
        return ref

    def put(self, index: int, controller_epoch: int, leader: int, leader_epoch: int, isr: Sequence[int],
            zk_version: int, replicas: Sequence[int], offline: Sequence[int]) -> None:  # fmt: skip
        self.changed = True
        ref = self._ref
        row = self._rows.get(index)
        values = (index, controller_epoch, leader, leader_epoch, zk_version,
                  ref(isr), ref(replicas), ref(offline) if offline else 0)  # fmt: skip
        if row is None:
            self._rows[index] = len(self._seen)
            self._data.extend(values)
            self._seen.append(1)
            return
        b = row * WIDTH
        self._data[b : b + WIDTH] = array("i", values)
        self._seen[row] = 1
        self._deleted.discard(row)

    def put_states(self, states: Iterable[WireState]) -> None:
        """:meth:`put` of each of ``states`` (records with UpdateMetadataPartitionState's
        fields), in one loop: a full update puts a million, and the call per partition
        was half of applying it. Non-empty: an empty one changes nothing, as no put."""
        self.changed = True
        rows, data, seen, deleted = self._rows, self._data, self._seen, self._deleted
        find, ref = self._set_ref.get, self._ref
        for p in states:
            isr, replicas, offline = p.isr, p.replicas, p.offline_replicas
            i = find(isr)
            if i is None:
                i = ref(isr)
            r = find(replicas)
            if r is None:
                r = ref(replicas)
            if offline:
                o = find(offline)
                if o is None:
                    o = ref(offline)
            else:
                o = 0
            index = p.partition_index
            values = (index, p.controller_epoch, p.leader, p.leader_epoch, p.zk_version, i, r, o)
            row = rows.get(index)
            if row is None:
                rows[index] = len(seen)
                data.extend(values)
                seen.append(1)
                continue
            b = row * WIDTH
            data[b : b + WIDTH] = array("i", values)
            seen[row] = 1
            deleted.discard(row)

    def put_distinct(self, indexes: Sequence[int], keys: Sequence[int], states: Sequence[WireState]) -> None:
        """:meth:`put` of partition ``indexes[e]`` with the state ``states[keys[e]]`` (but for
        its index), for each ``e``: a topic has few distinct states, each turned into its
        column values once. Into a topic with no partitions yet (a restarted broker's first
        full update), without duplicate indexes, or over a topic's partitions 0..m-1 with
        partitions 0..n-1 (n >= m) in order, the columns are filled at C speed."""
        self.changed = True
        values: list[tuple[int, ...]] = []
        find, ref = self._set_ref.get, self._ref
        for p in states:
            isr, replicas, offline = p.isr, p.replicas, p.offline_replicas
            i = find(isr)
            r = find(replicas)
            values.append((p.controller_epoch, p.leader, p.leader_epoch, p.zk_version,
                           ref(isr) if i is None else i, ref(replicas) if r is None else r,
                           ref(offline) if offline else 0))  # fmt: skip
        rows, data, seen = self._rows, self._data, self._seen
        n = len(indexes)
        if not rows or self._covered(indexes):
            fresh = dict(zip(indexes, range(n), strict=True))
            if len(fresh) == n:
                # each state's row as bytes (index 0), one row per partition, then the indexes
                rows_of = [array("i", (0, *v)).tobytes() for v in values]
                block = array("i", b"".join(map(rows_of.__getitem__, keys)))
                block[_IDX::WIDTH] = array("i", indexes)
                self._rows, self._data = fresh, block
                self._seen[:] = b"\x01" * n
                self._deleted.clear()
                return
        deleted = self._deleted
        for index, k in zip(indexes, keys, strict=True):
            row = rows.get(index)
            if row is None:
                rows[index] = len(seen)
                data.append(index)
                data.extend(values[k])
                seen.append(1)
                continue
            b = row * WIDTH
            data[b + 1 : b + WIDTH] = array("i", values[k])
            seen[row] = 1
            deleted.discard(row)

    def _covered(self, indexes: Sequence[int]) -> bool:
        """``indexes`` are 0..n-1 in order and this topic's rows are partitions 0..m-1 in
        order, m <= n: every row is rewritten where it is (the rest appended), as when the
        controller sends a topic it changed whole (each later slice of a broker's rejoin
        after its restart sends every topic again). Checked at C speed."""
        n, m = len(indexes), len(self._seen)
        return m <= n and self._data[_IDX::WIDTH] == iota(m) and array("i", indexes) == iota(n)

    def delete(self, index: int) -> bool:
        """Remove ``index``; False when the topic did not hold it."""
        row = self._rows.get(index)
        if row is None or row in self._deleted:
            return False
        self._deleted.add(row)
        self.changed = True
        return True

    def drop_unseen(self) -> list[int]:
        """Remove every partition this update did not mention; their indexes."""
        seen = self._seen
        if seen.count(0) == 0:  # the common case (every partition sent): C speed
            return []
        data = self._data
        unseen = [r for r, s in enumerate(seen) if not s and r not in self._deleted]
        self._deleted.update(unseen)
        self.changed = self.changed or bool(unseen)
        return [data[r * WIDTH] for r in unseen]

    def __len__(self) -> int:
        return len(self._seen) - len(self._deleted)

    def freeze(self) -> TopicPartitions:
        data, sets = self._data, self._sets
        if self._deleted:
            keep = array("i")
            deleted = self._deleted
            for r in range(len(self._seen)):
                if r not in deleted:
                    keep.extend(data[r * WIDTH : (r + 1) * WIDTH])
            data = keep
        n = len(data) // WIDTH
        index = data[_IDX::WIDTH]
        rows = None if index == iota(n) else dict(zip(index, range(n), strict=True))
        return TopicPartitions(self.topic, data, tuple(sets), rows)


_IOTA = array("i")


def iota(n: int) -> array[int]:
    """``array("i", range(n))`` at C speed (a slice of one kept array, grown as needed): a
    full update freezes every topic, and making each range from Python ints was ~0.1 s of
    one step at 2M partitions."""
    global _IOTA
    if len(_IOTA) < n:
        _IOTA = array("i", range(max(n, 2 * len(_IOTA))))
    return _IOTA[:n]
