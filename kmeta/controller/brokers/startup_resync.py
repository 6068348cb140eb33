"""Startup's LeaderAndIsr: to each broker once it registered here, only where it differs.

Kafka's onControllerFailover sends every live broker LeaderAndIsr for every partition it
hosts. A broker that kept running through the controller's restart already holds nearly all
of it and answers each partition STALE_CONTROLLER_EPOCH (its leader epoch is not newer); at
1M partitions that is seconds of encoding, sending and applying per broker, and the first
admin write's UpdateMetadata waits behind it in each broker's FIFO channel queue (issue 17).

So a broker's startup LeaderAndIsr waits for its registration with this controller (a running
broker registers again at its next heartbeat: the new controller does not know its
connection), which carries a digest per topic of the states the broker holds
(:mod:`kmeta.metadata.replica_digest`, kmeta's tagged field ``KmetaTopicDigests``). The push
then goes over the topics in slices (:mod:`kmeta.controller.slices`) and sends LeaderAndIsr only for the topics
whose digest is missing or differs from the one computed over the controller's state at that
slice; a topic the broker holds as the controller does costs no request.

How long it waits is the broker's session (:mod:`sessions`, KRaft's BrokerHeartbeatManager)
once the broker was heard from, not a timer: the Startup event gives every stored live broker
a fresh session, and only a registration on this controller renews it (a heartbeat on a
connection it does not know is refused and extends nothing). A running broker's first
heartbeat to the new controller comes at once (it reconnects every 100 ms) and is refused;
it then computes its digests and registers. At 2M partitions that registration comes only
after it applied the full UpdateMetadata, which can take seconds; a fixed grace (3 s, at most
half the session, as before) then sent two brokers every partition they already held (4M
partitions in one measured restart, 50 s to the first create instead of 11 s). A broker not
heard from at all (no heartbeat with its stored epoch) within :data:`REGISTRATION_GRACE_S`
of the Startup event gets everything, as Kafka's onControllerFailover sends it: it may be a
broker that does not register again, or one stopped, whose requests wait in its socket.

Every broker's wait ends within its session, each in one defined way, shown per broker in
``/status`` (:meth:`StartupResync.outcomes`):

* ``digests``: it registered again (same incarnation, same epoch) with digests: only the
  topics whose digest is missing or differs are sent (a digest list cut at the broker's bound,
  MAX_DIGEST_TOPICS, leaves the rest unreported: those are sent);
* ``everything``: it registered again without digests (a broker that does not send them, or
  a list over the bound): every partition it hosts, as Kafka sends it;
* ``silent``: not heard from within the grace: every partition it hosts (a registration
  that comes later changes nothing more);
* ``rejoined``: it registered as a new incarnation or after a fencing (a new epoch): the
  registration's rejoin sends it everything (:mod:`kmeta.controller.brokers.lifecycle`), this push
  nothing; ``fenced_first`` says which: true when it still held its stored epoch
  (PreviousBrokerEpoch), so the same process lost its session here before it registered
  (a broker starved of CPU past its session, as Kafka would fence it too);
* ``fenced``: its session ended before it registered (killed, stopped past the session, or
  cut off): the expiry fences it as any lost broker and what was queued for it is dropped
  with its channel; should it come back, it registers with a new epoch (``rejoined``);
* ``waiting``: its session is alive and neither a registration nor the grace ended the wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.slices import LeaderAndIsrTargets, push_leader_and_isr
from kmeta.metadata.replica_digest import (
    MAX_DIGEST_TOPICS,
    digest_of_bytes,
    index_bytes,
    partition_words,
    words_bytes,
)
from kmeta.protocol.messages import broker_registration as br

#: how long after the Startup event a broker not heard from (no heartbeat, no registration
#: with its stored epoch) waits before it is sent everything; at most half the session
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
    words: dict[PartitionRegistration, bytes],
) -> int:
    """The digest ``broker_id`` would hold for ``info`` after this controller's LeaderAndIsr
    (``words``: each distinct state's words as bytes, shared across topics; at 2M partitions
    this runs over every partition once per startup, so it joins bytes, a few C calls per
    partition, instead of building words)."""
    partitions = info.partitions
    chunks: list[bytes] = []
    append = chunks.append
    for p in sorted(partitions):  # (in index order already, mostly: a linear C pass)
        st = partitions[p]
        if broker_id in st.replicas:
            tail = words.get(st)
            if tail is None:
                tail = words[st] = words_bytes(
                    partition_words(
                        st.leader, st.leader_epoch, st.partition_epoch, st.replicas, st.isr
                    )
                )
            append(index_bytes(p))
            append(tail)
    return digest_of_bytes(info.topic_id, b"".join(chunks))


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
        self.words: dict[PartitionRegistration, bytes] = {}

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


#: a broker's outcome (see the module docstring); shown in /status
WAITING, DIGESTS, EVERYTHING, SILENT, REJOINED, FENCED = (
    "waiting", "digests", "everything", "silent", "rejoined", "fenced",
)  # fmt: skip


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
        #: broker id -> how its wait ended, once a push or a rejoin ended it (outcomes()), and
        #: seconds from the Startup event to its registration here (0: before it was done)
        self._outcomes: dict[int, str] = {}
        self._registered_after_s: dict[int, float] = {}
        #: rejoined brokers that still held their stored epoch: fenced here first
        self._fenced_first: set[int] = set()
        self._started_at: float | None = None
        #: brokers heard from with their stored epoch since the start (heartbeat, registration)
        self._heard: set[int] = set()
        self._grace: asyncio.TimerHandle | None = None
        self._recheck: asyncio.TimerHandle | None = None
        self._shared = _SharedDigests()
        self._pushing = 0

    def loaded(self) -> None:
        """The controller loaded its state (start): note the live brokers' epochs."""
        self._epochs = {b.broker_id: b.epoch for b in self.host.state.brokers.values() if b.alive}
        self._registered.clear()
        self._pending = None
        self._outcomes.clear()
        self._registered_after_s.clear()
        self._fenced_first.clear()
        self._started_at = None
        self._heard.clear()

    def started(self) -> None:
        """The Startup event is done (the full UpdateMetadata went out, every stored live
        broker has a fresh session): push to the brokers registered meanwhile; the others get
        theirs as they register (or after the grace, if never heard from), or nothing if
        their session ends first."""
        self._started_at = time.monotonic()
        self._pending = set(self._epochs)
        for broker_id, digests in list(self._registered.items()):
            self._push(broker_id, digests)
        if self._pending - self._heard:
            grace = min(REGISTRATION_GRACE_S, self.host.config.session_timeout_s / 2)
            self._grace = asyncio.get_running_loop().call_later(grace, self._graced)

    def _graced(self) -> None:
        """The grace ran out: brokers never heard from get everything (``silent``)."""
        self._grace = None
        for broker_id in sorted((self._pending or set()) - self._heard):
            self._push(broker_id, None, SILENT)

    def stop(self) -> None:
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None

    def _drop_shared_digests(self) -> None:
        """The shared digests serve every push of this startup (computed once, not once per
        broker: at 2M partitions each pass was seconds of CPU while the brokers applied the
        full update): dropped once no push runs and no broker in its session is still to
        be pushed to, checked again a session later while one is."""
        if self._recheck is not None:
            self._recheck.cancel()  # (harmless when it is the one running)
            self._recheck = None
        if self._pushing:
            return
        if any(self._same_session(b) for b in self._pending or ()):
            later = self.host.config.session_timeout_s
            self._recheck = asyncio.get_running_loop().call_later(later, self._drop_shared_digests)
            return
        self._shared.clear()

    def heard(self, broker_id: int, broker_epoch: int) -> None:
        """A heartbeat from ``broker_id`` with ``broker_epoch``, accepted or not (after a
        restart it is refused until the broker registers here): a broker of that epoch is
        running and will register, so its wait is its session's. A forged one only makes
        the push wait for the session, at most."""
        if self._epochs.get(broker_id) == broker_epoch:
            self._heard.add(broker_id)

    def outcomes(self) -> dict[int, dict[str, object]]:
        """Per broker stored live at the start: how its startup LeaderAndIsr went (/status).
        ``fenced`` is read from the state, not kept: a fencing whose commit was refused is
        rolled back, and the broker is then waited for again."""
        out: dict[int, dict[str, object]] = {}
        for broker_id in sorted(self._epochs):
            outcome = self._outcomes.get(broker_id)
            if outcome in (None, SILENT) and not self._same_session(broker_id):
                outcome = FENCED  # (before it registered: what was queued went with it)
            elif outcome is None:
                outcome = WAITING
            after = self._registered_after_s.get(broker_id)
            out[broker_id] = {
                "outcome": outcome,
                "registered_after_s": None if after is None else round(after, 3),
                "fenced_first": broker_id in self._fenced_first,
            }
        return out

    def _same_session(self, broker_id: int) -> bool:
        """Alive with the epoch it had at the start: the session has not ended."""
        broker = self.host.state.brokers.get(broker_id)
        return broker is not None and broker.alive and broker.epoch == self._epochs.get(broker_id)

    def broker_registered(
        self, broker_id: int, epoch: int, digests: dict[str, int] | None, held: int = -1
    ) -> None:
        """A registration answered with ``epoch`` (outside an event: only queues events);
        ``held``: the epoch the broker said it held (PreviousBrokerEpoch, -1: none)."""
        if broker_id not in self._epochs:
            return  # (not live at the start: its registration's rejoin sends everything)
        self._heard.add(broker_id)
        if broker_id not in self._registered_after_s:
            started = self._started_at
            self._registered_after_s[broker_id] = (
                0.0 if started is None else time.monotonic() - started
            )
        if self._epochs[broker_id] != epoch:
            # a new incarnation, or one fenced meanwhile: its registration's rejoin sends it
            # everything
            self._registered.pop(broker_id, None)
            self._outcomes[broker_id] = REJOINED
            if held == self._epochs[broker_id]:
                self._fenced_first.add(broker_id)
            if self._pending is not None:
                self._pending.discard(broker_id)
            return
        if self._pending is None:
            self._registered[broker_id] = digests
        else:
            self._push(broker_id, digests)

    def _push(
        self, broker_id: int, digests: dict[str, int] | None, outcome: str | None = None
    ) -> None:
        if self._pending is None or broker_id not in self._pending:
            return  # (already pushed: a second registration of the same session)
        self._pending.discard(broker_id)
        epoch = self._epochs[broker_id]
        self._outcomes[broker_id] = outcome or (EVERYTHING if digests is None else DIGESTS)

        ended = [False]

        def done() -> None:
            if not ended[0]:
                ended[0] = True
                self._pushing -= 1
                self._drop_shared_digests()

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
