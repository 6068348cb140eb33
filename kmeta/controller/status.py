"""What ``kmeta status`` shows, from the controller: its GET /status JSON and gauges.

The controller is the one place that knows every broker's epoch, liveness, queue,
propagation lag and rejections (``rejecting``: api -> error name of the control requests it
answered with an error; such a broker does not count as caught up), so the status comes from it (HTTP JSON next to /metrics, see
:mod:`kmeta.net.metrics_http`). Computed on request, O(partitions): nothing on the hot path.

Gauges added to the controller's registry (Kafka's names in brackets):

* ``kmeta_controller_broker_lag_versions{broker_id}``, ``kmeta_controller_broker_lag_ms``,
  ``kmeta_controller_broker_applied_update``, ``kmeta_controller_latest_update``;
* ``kmeta_controller_propagation_seconds``: time until every broker sent a change acked it;
* ``kmeta_controller_broker_rejecting{broker_id,api,error}``: 1 while a broker rejects an api
  (the count of rejections is ``kmeta_controller_channel_rejections_total``);
* ``kmeta_controller_topics``, ``kmeta_controller_partitions``,
  ``kmeta_controller_offline_partitions`` [OfflinePartitionsCount],
  ``kmeta_controller_under_replicated_partitions``, ``kmeta_controller_active_brokers``
  [ActiveBrokerCount], ``kmeta_controller_fenced_brokers`` [FencedBrokerCount],
  ``kmeta_controller_epoch``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kmeta.controller.gc_schedule import SCHEDULE
from kmeta.controller.model import PartitionRegistration
from kmeta.net.metrics import plain_histogram_family

if TYPE_CHECKING:
    from kmeta.controller.controller import KafkaController


#: topic -> (its states as last counted, their counts): a topic whose states are the same
#: objects (or equal ones) is not counted again. Valid whatever the controller or state:
#: the check is on the states themselves. ~8 bytes per partition.
_TOPIC_COUNTS: dict[str, tuple[tuple[PartitionRegistration, ...], Counter[PartitionRegistration]]] = {}


def partition_counts(controller: KafkaController) -> dict[str, int]:
    """Counts over every partition, at C level: each topic's states are counted by value
    once and kept with the states they counted; while a topic's states are the same objects
    (a tuple comparison, identity first), its counts are reused. Only the distinct states
    are looked at. At 1M partitions a Python step per partition held the loop ~0.5 s per
    /status, and a benchmark polls it; at 2M counting every partition on every read still
    held it ~0.15-0.25 s of CPU, now ~0.02 s (a restarted controller's busiest seconds)."""
    state = controller.state
    alive = set(state.live_broker_ids())
    counts: Counter[PartitionRegistration] = Counter()
    kept = _TOPIC_COUNTS
    if len(kept) > len(state.topics):
        for name in [n for n in kept if n not in state.topics]:
            del kept[name]
    for name, topic in state.topics.items():
        states = tuple(topic.partitions.values())
        hit = kept.get(name)
        if hit is None or hit[0] != states:
            hit = kept[name] = (states, Counter(states))
        counts.update(hit[1])
    offline = under = 0
    for st, n in counts.items():
        if st.leader not in alive:  # (-1: no leader)
            offline += n
        if len(st.isr) < len(st.replicas):
            under += n
    total = sum(counts.values())
    return {
        "topics": len(state.topics),
        "partitions": total,
        "offline_partitions": offline,
        "under_replicated_partitions": under,
    }


def controller_status(controller: KafkaController) -> dict[str, Any]:
    now = time.monotonic()
    tracker = controller.metrics.propagation
    brokers = []
    for broker_id, info in sorted(controller.state.brokers.items()):
        lag = tracker.brokers.get(broker_id)
        endpoint = info.listeners[0] if info.listeners else None
        brokers.append(
            {
                "id": broker_id,
                "epoch": info.epoch,
                "state": "alive" if info.alive else "fenced",
                "endpoint": f"{endpoint.host}:{endpoint.port}" if endpoint else None,
                "rack": info.rack,
                "applied_update": lag.applied_update if lag else None,
                "lag_versions": lag.lag_versions if lag else None,
                "lag_ms": round(lag.lag_ms(now), 1) if lag else None,
                "queue_size": controller.channel.queue_size(broker_id) if info.alive else None,
                # api name -> error name while it answers that api with an error (not an ack)
                "rejecting": dict(lag.rejecting) if lag else {},
            }
        )
    return {
        "controller": {
            "node_id": controller.config.node_id,
            "epoch": controller.epoch,
            "event_queue_size": controller.events.queue_size,
            "total_queue_size": controller.channel.queue_size(),
            "latest_update": tracker.latest_update,
            # since this controller started: topics whose startup LeaderAndIsr a broker's
            # digest made unnecessary, the partitions it did send, and per broker live at the
            # start how its wait for the registration ended (startup_resync)
            "startup_resync": {
                "skipped_topics": controller.resync.skipped_topics,
                "sent_partitions": controller.resync.sent_partitions,
                "brokers": {str(b): o for b, o in controller.resync.outcomes().items()},
            },
            # the process's full collections, paced by their cost (gc_schedule)
            "full_collections": SCHEDULE.status(),
            # since this controller started: the ISR changes its leaders' AlterPartition made
            # (kmeta.controller.topics.isr), and the leaders elected from outside the ISR
            # (unclean.leader.election.enable: what the ISR had beyond them may be lost)
            "isr_shrinks": controller.isr.shrinks,
            "isr_expands": controller.isr.expands,
            "unclean_leader_elections": int(
                controller.metrics.value("kmeta_controller_unclean_leader_elections_total")
            ),
        },
        "faults": {str(b): str(f) for b, f in sorted(controller.faults.active().items())},
        "brokers": brokers,
        **partition_counts(controller),
    }


class ControllerCollector(Collector):
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Metric]:
        controller = self.controller
        now = time.monotonic()
        tracker = controller.metrics.propagation
        labels = ["broker_id"]
        lag_v = GaugeMetricFamily(
            "kmeta_controller_broker_lag_versions", "UpdateMetadata not yet acked", labels=labels
        )
        lag_ms = GaugeMetricFamily(
            "kmeta_controller_broker_lag_ms",
            "Age of the oldest UpdateMetadata the broker has not acked",
            labels=labels,
        )
        applied = GaugeMetricFamily(
            "kmeta_controller_broker_applied_update",
            "Controller update id of the last UpdateMetadata the broker acked",
            labels=labels,
        )
        rejecting = GaugeMetricFamily(
            "kmeta_controller_broker_rejecting",
            "1 while the broker answers this api's control requests with this error",
            labels=["broker_id", "api", "error"],
        )
        for broker_id, lag in sorted(tracker.brokers.items()):
            lag_v.add_metric([str(broker_id)], lag.lag_versions)
            lag_ms.add_metric([str(broker_id)], lag.lag_ms(now))
            applied.add_metric([str(broker_id)], lag.applied_update)
            for api, error in sorted(lag.rejecting.items()):
                rejecting.add_metric([str(broker_id), api, error], 1)
        yield from (lag_v, lag_ms, applied, rejecting)
        yield GaugeMetricFamily(
            "kmeta_controller_latest_update",
            "Latest controller update id",
            value=tracker.latest_update,
        )
        yield plain_histogram_family(
            "kmeta_controller_propagation_seconds",
            "Time from enqueue until every broker it was sent to acked an update",
            [([], tracker.propagation)],
            [],
        )
        counts = partition_counts(controller)
        for key, doc in (
            ("topics", "Topics"),
            ("partitions", "Partitions"),
            ("offline_partitions", "Partitions without a live leader (OfflinePartitionsCount)"),
            ("under_replicated_partitions", "Partitions whose ISR is smaller than the replicas"),
        ):
            yield GaugeMetricFamily(f"kmeta_controller_{key}", doc, value=counts[key])
        alive = sum(1 for b in controller.state.brokers.values() if b.alive)
        yield GaugeMetricFamily("kmeta_controller_active_brokers", "ActiveBrokerCount", value=alive)
        yield GaugeMetricFamily(
            "kmeta_controller_fenced_brokers",
            "FencedBrokerCount",
            value=len(controller.state.brokers) - alive,
        )
        yield GaugeMetricFamily(
            "kmeta_controller_epoch", "Controller epoch", value=controller.epoch
        )
