"""Startup's LeaderAndIsr: to each broker once it registered here, only where it differs.

Kafka's onControllerFailover sends every live broker LeaderAndIsr for every partition it
hosts. A broker that kept running through the controller's restart already holds nearly all
of it and answers each partition STALE_CONTROLLER_EPOCH (its leader epoch is not newer); at
1M partitions that is seconds of encoding, sending and applying per broker, and the first
admin write's UpdateMetadata waits behind it in each broker's FIFO channel queue (issue 17).

So a broker's startup LeaderAndIsr waits for its registration with this controller (a running
broker registers again within a heartbeat: the new controller does not know its connection),
which carries a digest per topic of the states the broker holds
(:mod:`kmeta.metadata.replica_digest`, kmeta's tagged field ``KmetaTopicDigests``). The push
then goes over the topics in slices (:mod:`slices`) and sends LeaderAndIsr only for the topics
whose digest is missing or differs from the one computed over the controller's state at that
slice; a topic the broker holds as the controller does costs no request. A broker that
registers again as a new incarnation (a new epoch) gets the registration's full rejoin instead.
One that has not registered :data:`REGISTRATION_GRACE_S` after the Startup event (a broker
that does not register again, or runs a longer heartbeat interval) gets every partition it
hosts then, as Kafka sends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.slices import LeaderAndIsrTargets, push_leader_and_isr
from kmeta.metadata.replica_digest import MAX_DIGEST_TOPICS, partition_words, topic_digest
from kmeta.protocol.messages import broker_registration as br

#: how long after the Startup event a broker's startup LeaderAndIsr waits for its registration
#: (a running broker's next heartbeat, every 2 s by Kafka's broker.heartbeat.interval.ms
#: default, finds that the new controller does not know its connection), at most half the
#: session timeout; then it is sent whole
REGISTRATION_GRACE_S = 3.0


def reported_digests(
    digests: Sequence[br.KmetaTopicDigest] | None,
) -> dict[str, int] | None:
    """A registration's digests by topic; None when not said or over the bound (the push
    then sends every topic)."""
    if digests is None or len(digests) > MAX_DIGEST_TOPICS:
        return None
    return {d.name: d.digest for d in digests}


def expected_digest(
    info: TopicInfo,
    broker_id: int,
    words: dict[PartitionRegistration, tuple[int, ...]],
) -> int:
    """The digest ``broker_id`` would hold for ``info`` after this controller's LeaderAndIsr
    (``words``: each distinct state's words, shared across topics of one slice)."""
    parts: list[tuple[int, tuple[int, ...]]] = []
    partitions = info.partitions
    for p in sorted(partitions):
        st = partitions[p]
        if broker_id in st.replicas:
            tail = words.get(st)
            if tail is None:
                tail = words[st] = partition_words(
                    st.leader, st.leader_epoch, st.partition_epoch, st.replicas, st.isr
                )
            parts.append((p, tail))
    return topic_digest(info.topic_id, parts)


class _SharedDigests:
    """Each topic's digest for the brokers that host all its partitions (at RF 3 on 3
    brokers, every broker): computed once, not once per broker's push. An entry is used
    while the topic's partitions are the same objects (equal states are shared, so the check
    is a C-level scan of pointers); dropped when no push runs."""

    def __init__(self) -> None:
        #: topic -> (partition keys, states, brokers hosting every partition, their digest)
        self._topics: dict[
            str, tuple[tuple[int, ...], tuple[PartitionRegistration, ...], frozenset[int], int]
        ] = {}
        self.words: dict[PartitionRegistration, tuple[int, ...]] = {}

    def digest(self, info: TopicInfo, broker_id: int) -> int:
        partitions = info.partitions
        keys, states = tuple(partitions), tuple(partitions.values())
        hit = self._topics.get(info.name)
        if hit is None or hit[0] != keys or hit[1] != states:
            distinct = {id(st): st for st in states}.values()
            everyone = frozenset.intersection(*(frozenset(st.replicas) for st in distinct))
            digest = expected_digest(info, min(everyone), self.words) if everyone else 0
            hit = self._topics[info.name] = (keys, states, everyone, digest)
        if len(self.words) > 10_000:
            self.words.clear()  # (a cache of distinct states, bounded)
        if broker_id in hit[2]:
            return hit[3]
        return expected_digest(info, broker_id, self.words)

    def clear(self) -> None:
        self._topics.clear()
        self.words.clear()


class StartupResync:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        #: live brokers' epochs when the state was loaded (a new epoch: a new incarnation)
        self._epochs: dict[int, int] = {}
        #: brokers registered here since the start, with their digests (None: not said)
        self._registered: dict[int, dict[str, int] | None] = {}
        #: brokers whose startup LeaderAndIsr is still to go out; None: Startup not done
        self._pending: set[int] | None = None
        #: topics whose digest matched and were skipped, LeaderAndIsr partitions sent (status)
        self.skipped_topics = 0
        self.sent_partitions = 0
        self._grace: asyncio.TimerHandle | None = None
        self._shared = _SharedDigests()
        self._pushing = 0

    def loaded(self) -> None:
        """The controller loaded its state (start): note the live brokers' epochs."""
        self._epochs = {b.broker_id: b.epoch for b in self.host.state.brokers.values() if b.alive}
        self._registered.clear()
        self._pending = None

    def started(self) -> None:
        """The Startup event is done (the full UpdateMetadata went out): push to the brokers
        registered meanwhile; the others get theirs as they register."""
        self._pending = set(self._epochs)
        for broker_id, digests in list(self._registered.items()):
            self._push(broker_id, digests)
        if self._pending:
            grace = min(REGISTRATION_GRACE_S, self.host.config.session_timeout_s / 2)
            self._grace = asyncio.get_running_loop().call_later(grace, self._graced)

    def _graced(self) -> None:
        self._grace = None
        for broker_id in sorted(self._pending or ()):
            self._push(broker_id, None)

    def stop(self) -> None:
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def broker_registered(self, broker_id: int, epoch: int, digests: dict[str, int] | None) -> None:
        """A registration answered with ``epoch`` (outside an event: only queues events)."""
        if self._epochs.get(broker_id) != epoch:
            # a new incarnation: its registration's rejoin sends it everything
            self._registered.pop(broker_id, None)
            if self._pending is not None:
                self._pending.discard(broker_id)
            return
        if self._pending is None:
            self._registered[broker_id] = digests
        else:
            self._push(broker_id, digests)

    def _push(self, broker_id: int, digests: dict[str, int] | None) -> None:
        if self._pending is None or broker_id not in self._pending:
            return  # (already pushed: a second registration of the same session)
        self._pending.discard(broker_id)
        epoch = self._epochs[broker_id]

        ended = [False]

        def done() -> None:
            if not ended[0]:
                ended[0] = True
                self._pushing -= 1
                if not self._pushing:
                    self._shared.clear()

        def valid() -> bool:
            broker = self.host.state.brokers.get(broker_id)
            if broker is not None and broker.alive and broker.epoch == epoch:
                return True
            done()  # (the push ends here)
            return False

        def targets(info: TopicInfo) -> LeaderAndIsrTargets:
            held = None if digests is None else digests.get(info.name)
            if held is not None and held == self._shared.digest(info, broker_id):
                self.skipped_topics += 1
                return []
            out: LeaderAndIsrTargets = [
                ([broker_id], (info.name, p), False)
                for p, st in info.partitions.items()
                if broker_id in st.replicas
            ]
            self.sent_partitions += len(out)
            return out

        self._pushing += 1
        push_leader_and_isr(
            self.host, "StartupLeaderAndIsr", list(self.host.state.topics), targets, valid, done
        )
