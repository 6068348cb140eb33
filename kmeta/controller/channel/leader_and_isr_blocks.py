"""LeaderAndIsr bodies built from per-topic blocks, each partition entry from few distinct bytes.

A 1M-partition create sends every partition's LeaderAndIsr state to each of its replicas. Built
as one ``LeaderAndIsrPartitionState`` record per partition and broker, then encoded, that was
the largest share of the controller's work in a create (about 20% of its samples). But a
topic's partitions share a few state objects (``AdminManager.create_topics`` makes equal states
one object), and on the wire (v2+: states grouped by topic) a partition's entry is its index
then bytes that depend only on its state, is_new flag and reassignment. So each distinct
(state, is_new, adding, removing) is encoded once with the element encoder
(:meth:`kmeta.protocol.codec.splice.Splice.element_rest`) and the topic's entry is joined from the
indexes and those bytes; the body is ``count | topic entries | live leaders`` after each
broker's head (its broker epoch), and brokers that get the same partitions share one body.
Tests hold every body equal to the whole-message encoding of the same request.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from kmeta.controller.model import ControllerContext, PartitionRegistration
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.codec.splice import Splice
from kmeta.protocol.messages import leader_and_isr as lair

_INDEX = struct.Struct(">i")
_NO_ADDING, _NO_REMOVING, _RECOVERY = (
    lair.LeaderAndIsrPartitionState._field_defaults[f]
    for f in ("adding_replicas", "removing_replicas", "leader_recovery_state")
)


class AddingRemoving(Protocol):
    """A partition's reassignment as LeaderAndIsr v3+ carries it (Kafka's AR and RR)."""

    @property
    def adding(self) -> tuple[int, ...]: ...

    @property
    def removing(self) -> tuple[int, ...]: ...


#: one topic's partitions for one broker: (index, state, is_new), in the order sent
TopicParts = Sequence[tuple[int, PartitionRegistration, bool]]


class LeaderAndIsrBlocks:
    """Encodes LeaderAndIsr topic entries and bodies at one version (v5+: topic ids)."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.splice: Splice = lair.REQUEST.splice(version, "topic_states")
        self.topic: Splice = self.splice.inner("partition_states")
        if self.topic.leading != "partition_index":
            raise ValueError(f"LeaderAndIsr v{version}: partitions are not grouped by topic")

    def topic_entry(
        self,
        name: str,
        topic_id: uuid.UUID,
        parts: TopicParts,
        controller_epoch: int,
        reassigning: Mapping[TopicPartitionKey, AddingRemoving],
        leaders: set[int],
    ) -> bytes:
        """One topic's entry; the leaders of ``parts`` are added to ``leaders``."""
        topic = self.topic
        # (id(state) * 2 + is_new, or that with adding and removing) -> bytes
        rests: dict[object, bytes] = {}
        pack = _INDEX.pack
        out: list[bytes] = []
        append = out.append
        for index, st, is_new in parts:
            adding, removing = _NO_ADDING, _NO_REMOVING
            key: object = id(st) * 2 + is_new
            if reassigning:
                r = reassigning.get((name, index))
                if r is not None:
                    adding, removing = r.adding, r.removing
                    key = (id(st), is_new, adding, removing)
            rest = rests.get(key)
            if rest is None:
                leaders.add(st.leader)
                rest = rests[key] = topic.element_rest(lair.LeaderAndIsrPartitionState(
                    "", 0, controller_epoch, st.leader, st.leader_epoch, st.isr,
                    st.partition_epoch, st.replicas, adding, removing, is_new, _RECOVERY,
                ))  # fmt: skip
            append(pack(index))
            append(rest)
        return b"".join((
            topic.head(topic_name=name, topic_id=topic_id), topic.count(len(parts)), *out,
            topic.tail(),
        ))  # fmt: skip

    def head(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> bytes:
        """The fields before the topics: one broker's own (its epoch)."""
        return self.splice.head(
            controller_id=controller_id,
            is_kraft_controller=True,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            type=0,
        )

    def body(
        self, entries: Sequence[bytes], live_leaders: Iterable[lair.LeaderAndIsrLiveLeader]
    ) -> bytes:
        """Everything after the head: the topic entries and the live leaders."""
        return b"".join((
            self.splice.count(len(entries)), *entries,
            self.splice.tail(live_leaders=tuple(live_leaders)),
        ))  # fmt: skip


def leader_and_isr_plans(
    state: ControllerContext,
    partitions: Mapping[int, Mapping[TopicPartitionKey, tuple[PartitionRegistration, bool]]],
    whole_topics: Mapping[str, bool],
) -> dict[int, dict[str, TopicParts]]:
    """Broker -> topic -> its (index, state, is_new) to send: ``partitions`` (broker -> the
    partitions added one by one, with their state and is_new) grouped by topic, in the order
    added, then every partition of each of ``whole_topics`` (-> is_new) for each of its live
    replicas (a whole topic replaces the partitions of it added one by one)."""
    plans: dict[int, dict[str, TopicParts]] = {}
    for broker_id, parts in partitions.items():
        plan: dict[str, list[tuple[int, PartitionRegistration, bool]]] = {}
        for (topic, p), (st, is_new) in parts.items():
            group = plan.get(topic)
            if group is None:
                group = plan[topic] = []
            group.append((p, st, is_new))
        plans[broker_id] = dict(plan)
    for name, is_new in whole_topics.items():
        info = state.topics.get(name)
        if info is None:
            continue
        states = info.partitions
        # a topic's partitions share few replica sets: which brokers host every partition is
        # known from those (the common case, RF = brokers: one list for all of them)
        sets = {st.replicas for st in states.values()}
        live = {b for replicas in sets for b in replicas if state.is_alive(b)}
        every = {b for b in live if all(b in replicas for replicas in sets)}
        if every:
            whole = [(p, st, is_new) for p, st in states.items()]
            for broker_id in sorted(every):
                plans.setdefault(broker_id, {})[name] = whole
        for broker_id in sorted(live - every):
            plans.setdefault(broker_id, {})[name] = [
                (p, st, is_new) for p, st in states.items() if broker_id in st.replicas
            ]
    return plans


def live_leaders(state: ControllerContext, leaders: Iterable[int]) -> list[lair.LeaderAndIsrLiveLeader]:
    """The live ones of ``leaders``, by id, with their control endpoint."""
    out = []
    for leader in sorted(leaders):
        broker = state.brokers.get(leader)
        ep = broker.endpoint(None) if broker is not None and broker.alive else None
        if ep is not None:
            out.append(lair.LeaderAndIsrLiveLeader(leader, ep.host, ep.port))
    return out
