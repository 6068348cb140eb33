"""What a broker's return and its fencing change in the partitions it hosts, in slices.

Kafka's ZooKeeper-mode controller does this in ``onBrokerStartup`` (the returning broker's
replicas online: it rejoins their ISRs, gets the full partition set, then LeaderAndIsr) and
``onReplicasBecomeOffline`` (a fenced broker's partitions re-elected and their ISRs shrunk).
At 1M partitions each is seconds of work, so each runs in slices of topics (:mod:`kmeta.controller.slices`),
one controller event per slice. ``BrokerLifecycleManager`` decides *that* a broker registered
or was fenced; these functions only need the controller as :class:`ControllerHost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.slices import in_slices
from kmeta.controller.topics.election import (
    add_replica,
    is_unclean,
    remove_replicas,
    unclean_allowed,
)
from kmeta.metadata.model import TopicPartitionKey

#: partitions per slice at most while the full set's blocks are encoded (at 1M partitions
#: SLICE_PARTITIONS made that 200 events, most of them quick compares of a kept block)
ENCODE_SLICE_PARTITIONS = 100_000


def rejoin_in_slices(
    host: ControllerHost,
    broker_id: int,
    epoch: int,
    bounced: bool,
    then: Callable[[], object],
) -> None:
    """A registered broker's partitions come back: it gets the full partition set, then
    LeaderAndIsr for its replicas. It does not rejoin their ISRs here: each leader adds it
    through AlterPartition once it caught up (:mod:`kmeta.controller.topics.isr`), as
    Kafka's. An offline partition it is in the ISR of is led by it again (a clean election;
    an unclean one if no ISR member is live and the topic allows it); the partitions whose
    ISR or leader changed go to all their replicas and the other brokers, and so do all of its
    partitions if it was fenced (their offline replicas changed). ``bounced``: the
    broker's previous incarnation was registered alive until this registration, so each
    partition is first failed for it (re-elected, ISR shrunk: Kafka's onBrokerFailure). In slices of topics (:mod:`kmeta.controller.slices`): with 1M partitions this is seconds of
    work, which one event would hold the loop for. The full set's topic blocks are
    encoded first, in slices; then the first slice of the rejoin sends the full set after
    its own changes (a small cluster's all happens in the registration event); each later
    slice reads the state as it is then, and sends what it changes to every live broker, the
    new one too. Then ``then`` (the deletions that waited for the broker: Kafka's
    resumeDeletionForTopics)."""
    full_sent = [False]
    gone = {broker_id}.__contains__

    def valid() -> bool:
        # the registration was refused (its commit failed), or is stale
        broker = host.state.brokers.get(broker_id)
        return broker is not None and broker.alive and broker.epoch == epoch

    def each(infos: list[TopicInfo]) -> None:
        state = host.state
        alive = set(state.live_broker_ids()).__contains__
        grown: dict[TopicPartitionKey, PartitionRegistration] = {}
        lair: list[tuple[Iterable[int], TopicPartitionKey, bool]] = []
        moved: list[TopicPartitionKey] = []
        # few distinct states (equal ones are shared): each rejoined once per slice, per
        # (failed first, unclean allowed)
        caches: dict[tuple[bool, bool], dict[PartitionRegistration, PartitionRegistration]] = {}
        deleting = state.deleting
        unclean = 0
        for info in infos:
            # (no election for a topic being deleted: Kafka's ineligible topics)
            fail = bounced and info.name not in deleting
            may = info.name not in deleting and unclean_allowed(info.configs)
            cache = caches.setdefault((fail, may), {})
            for p, st in info.partitions.items():
                if broker_id not in st.replicas:
                    continue
                tp = (info.name, p)
                new = cache.get(st)
                if new is None:
                    failed = remove_replicas(st, gone) if fail else st
                    new = add_replica(failed, broker_id, alive, may)
                    if fail and new[1] == st[1] and new[2] == st[2]:  # isr, leader: as before
                        new = st
                    cache[st] = new
                if new == st:  # (unchanged, maybe computed for an equal state)
                    new = st
                if new is not st:
                    unclean += may and is_unclean(st, new)
                    grown[tp] = new
                    lair.append((new.replicas, tp, False))
                    moved.append(tp)
                else:
                    lair.append(([broker_id], tp, False))
                    if not bounced:  # (its replica is online again: Kafka's UpdateMetadata
                        moved.append(tp)  # to every broker with each LeaderAndIsr)
        if grown:
            with host.store.transaction():
                host.persist_partitions(grown)
        host.metrics.unclean_elections(unclean)
        um_to = state.live_broker_ids()
        if not full_sent[0]:  # (the full set carries what this slice changed)
            full_sent[0] = True
            host.send(
                ControllerRequests(update_metadata_to=[broker_id], full_update_metadata=True),
            )
            um_to = [b for b in um_to if b != broker_id]
        host.send(
            ControllerRequests(
                update_metadata_to=um_to if moved else (),
                update_metadata_partitions=moved,
                leader_and_isr=lair,
            ),
        )

    def rejoin() -> None:
        in_slices(
            host,
            "BrokerRegistrationLeaderAndIsr",
            list(host.state.topics),
            each,
            valid,
            then=then,
            first_here=True,
        )
        if not full_sent[0] and valid():  # no topics (or all being deleted)
            host.send(
                ControllerRequests(update_metadata_to=[broker_id], full_update_metadata=True),
            )

    # the full set's topic blocks first (every offline replica list changed with the
    # broker's return), so the event that sends it only splices them. Encoding sends
    # nothing, and a block still valid (a bounce: no replica went offline) is only compared,
    # so its slices are held to the pace alone: the full set waits for the last of them.
    in_slices(
        host,
        "BrokerRegistrationEncode",
        list(host.state.topics),
        host.encode_update_metadata,
        valid,
        then=rejoin,
        first_here=True,
        most=ENCODE_SLICE_PARTITIONS,
    )


def offline_in_slices(host: ControllerHost, broker_id: int, epoch: int) -> None:
    """The re-elections and ISR shrinks of a fenced broker's partitions, in slices of topics
    (:mod:`kmeta.controller.slices`), the calling event doing the first; the first slice also tells the live
    brokers of the new broker set. ``epoch``: the fenced registration's; a registration
    since (the broker is back in the ISRs it would leave) ends the rest."""
    gone = {broker_id}.__contains__
    first = [True]

    def valid() -> bool:
        now = host.state.brokers.get(broker_id)
        return now is not None and not now.alive and now.epoch == epoch

    def each(infos: list[TopicInfo]) -> None:
        changed: dict[TopicPartitionKey, PartitionRegistration] = {}
        shrunk: dict[PartitionRegistration, PartitionRegistration] = {}  # (as rejoined)
        shrunk_unclean: dict[PartitionRegistration, PartitionRegistration] = {}
        eligible = set(host.state.live_broker_ids()).__contains__
        unclean = 0
        for info in infos:
            may = unclean_allowed(info.configs) and info.name not in host.state.deleting
            cache = shrunk_unclean if may else shrunk
            for p, st in info.partitions.items():
                if broker_id in st.replicas:
                    new = cache.get(st)
                    if new is None:
                        new = cache[st] = remove_replicas(st, gone, eligible if may else None)
                    unclean += may and is_unclean(st, new)
                    changed[(info.name, p)] = new
        host.metrics.unclean_elections(unclean)
        if changed:
            with host.store.transaction():
                host.persist_partitions(changed)
        elif not first[0]:
            return
        first[0] = False  # (the first tells the live brokers of the new broker set)
        lair = [(st.replicas, tp, False) for tp, st in changed.items()]
        live = host.state.live_broker_ids()
        host.send(
            ControllerRequests(
                update_metadata_to=live,
                update_metadata_partitions=changed,
                leader_and_isr=lair,
            ),
        )

    in_slices(
        host, "BrokerFailurePartitions", list(host.state.topics), each, valid, first_here=True
    )
    if first[0]:  # no topics at all: the live brokers still learn of the new broker set
        host.send(
            ControllerRequests(update_metadata_to=host.state.live_broker_ids()),
        )
