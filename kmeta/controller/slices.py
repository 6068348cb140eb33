"""Work over every topic in slices: one controller event per slice, the loop free between.

A controller restart sends LeaderAndIsr for every partition to its replicas, and a broker's
return sends it LeaderAndIsr for every partition it hosts. At 1M partitions that is seconds of
building and encoding; as one event it held the event loop past the brokers' session timeout
(no heartbeat is read meanwhile) and behind it every admin request waited (issue 17's
livelock). So the work is cut into slices of whole topics, ~:data:`SLICE_PARTITIONS`
partitions each (~25 ms on the 2-core box), each its own event: heartbeats, admin requests
and the senders run between two slices, and each slice reads the state as it is then (a
topic deleted meanwhile is skipped; one created meanwhile got its LeaderAndIsr when created).

Each slice's requests are whole requests for their partitions, so a broker applies them one
by one as they come, as Kafka brokers apply the controller's batched LeaderAndIsr requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kmeta.controller.host import ControllerHost
from kmeta.controller.model import TopicInfo
from kmeta.metadata.model import TopicPartitionKey

log = logging.getLogger(__name__)

#: partitions per slice (a slice of whole topics stops once it holds this many)
SLICE_PARTITIONS = 5000

#: (replicas to send to, partition, is_new), as ``ControllerHost.send(lair=...)`` takes them
LeaderAndIsrTargets = list[tuple[Iterable[int], TopicPartitionKey, bool]]


def in_slices(
    host: ControllerHost,
    name: str,
    topics: list[str],
    each: Callable[[list[TopicInfo]], object],
    valid: Callable[[], bool] = lambda: True,
    then: Callable[[], object] | None = None,
    first_here: bool = False,
) -> None:
    """Queue the first of the events ``name`` that run ``each`` on slices of ``topics`` (those
    still there, not being deleted); each queues the next (so it comes after whatever was
    queued meanwhile), the last runs ``then``. ``first_here``: the caller is an event, which
    does the first slice itself (a cluster of up to a slice's partitions sees no change). ``valid`` is asked before each slice: False
    ends it all (e.g. the broker a push was for is gone, or registered again: a push of its
    own replaces this one)."""
    queued: set[int] = set()
    slice_partitions = SLICE_PARTITIONS  # (read now: a test may lower it)

    def run_slice(start: int) -> None:
        if not valid():
            return
        state = host.state
        deleting = state.deleting
        infos: list[TopicInfo] = []
        end, counted = start, 0
        while end < len(topics) and counted < slice_partitions:
            info = state.topics.get(topics[end])
            end += 1
            if info is None or info.name in deleting:
                continue  # deleted (or being deleted) since the push began
            counted += len(info.partitions)
            infos.append(info)
        if infos:
            each(infos)
        if end < len(topics):
            # (once: a slice that runs again, its group's commit having failed, re-sends
            # what it sends, and the next slice is already queued)
            if end not in queued:
                queued.add(end)
                host.enqueue(name, lambda: run_slice(end))
        elif then is not None:
            then()

    if first_here:
        run_slice(0)
    else:
        host.enqueue(name, lambda: run_slice(0))


def push_leader_and_isr(
    host: ControllerHost,
    name: str,
    topics: list[str],
    targets: Callable[[TopicInfo], LeaderAndIsrTargets],
    valid: Callable[[], bool] = lambda: True,
    then: Callable[[], object] | None = None,
) -> None:
    """LeaderAndIsr over ``topics`` in slices: ``targets`` gives one topic's entries."""

    def each(infos: list[TopicInfo]) -> None:
        lair: LeaderAndIsrTargets = []
        for info in infos:
            lair += targets(info)
        if lair:
            host.send(lair=lair)

    in_slices(host, name, topics, each, valid, then)
