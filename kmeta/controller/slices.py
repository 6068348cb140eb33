"""Work over every topic in slices: one controller event per slice, the loop free between.

A controller restart sends LeaderAndIsr for every partition to its replicas, and a broker's
return sends it LeaderAndIsr for every partition it hosts. At 1M partitions that is seconds of
building and encoding; as one event it held the event loop past the brokers' session timeout
(no heartbeat is read meanwhile) and behind it every admin request waited (issue 17's
livelock). So the work is cut into slices of whole topics, each its own event: heartbeats,
admin requests and the senders run between two slices, and each slice reads the state as it
is then (a topic deleted meanwhile is skipped; one created meanwhile got its own push when
created). A slice aims at :data:`SLICE_TARGET_S` of work: the first holds up to
:data:`FIRST_SLICE_PARTITIONS` partitions, each next one as many as the last one's pace
fits in the target (work per partition differs: a fencing writes, re-elects and sends to
every broker, a LeaderAndIsr push only encodes; and a loaded box is slower), never more than
:data:`SLICE_PARTITIONS`.

Each slice's requests are whole requests for their partitions, so a broker applies them one
by one as they come, as Kafka brokers apply the controller's batched LeaderAndIsr requests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import TopicInfo
from kmeta.metadata.model import TopicPartitionKey

log = logging.getLogger(__name__)

#: partitions per slice at most (a slice of whole topics stops once it holds this many)
SLICE_PARTITIONS = 5000
#: partitions of a push's first slice at most (its pace is not known yet)
FIRST_SLICE_PARTITIONS = 1000
#: the work one slice aims at (the loop is held that long, plus the slice's last topic)
SLICE_TARGET_S = 0.025

#: (replicas to send to, partition, is_new), as ``ControllerRequests.leader_and_isr`` takes them
LeaderAndIsrTargets = list[tuple[Iterable[int], TopicPartitionKey, bool]]


def in_slices(
    host: ControllerHost,
    name: str,
    topics: list[str],
    each: Callable[[list[TopicInfo]], object],
    valid: Callable[[], bool] = lambda: True,
    then: Callable[[], object] | None = None,
    first_here: bool = False,
    most: int | None = None,
) -> None:
    """Queue the first of the events ``name`` that run ``each`` on slices of ``topics`` (those
    still there, not being deleted); each queues the next (so it comes after whatever was
    queued meanwhile), the last runs ``then``. ``first_here``: the caller is an event, which
    does the first slice itself (a cluster of up to a first slice's partitions sees all of
    it done in that event). ``valid`` is asked before each slice: False ends it all (e.g.
    the broker a push was for is gone, or registered again: a push of its own replaces
    this one). ``most``: partitions per slice at most, :data:`SLICE_PARTITIONS` unless said
    (work that sends nothing, whose size bounds no request, may take more per slice: the
    pace still holds each to the target)."""
    queued: set[int] = set()
    if most is None:
        most = SLICE_PARTITIONS  # (read now: a test may lower it)
    budget = [min(FIRST_SLICE_PARTITIONS, most)]

    def run_slice(start: int) -> None:
        if not valid():
            return
        state = host.state
        deleting = state.deleting
        infos: list[TopicInfo] = []
        end, counted = start, 0
        while end < len(topics) and counted < budget[0]:
            info = state.topics.get(topics[end])
            end += 1
            if info is None or info.name in deleting:
                continue  # deleted (or being deleted) since the push began
            counted += len(info.partitions)
            infos.append(info)
        if infos:
            started = time.monotonic()
            each(infos)
            took = time.monotonic() - started
            pace = counted * SLICE_TARGET_S / took if took > 0 else most
            budget[0] = max(1, min(most, int(pace)))
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
            host.send(ControllerRequests(leader_and_isr=lair))

    in_slices(host, name, topics, each, valid, then)
