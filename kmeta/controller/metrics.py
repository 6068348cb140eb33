"""Controller metrics on a per-controller prometheus CollectorRegistry (no global state).

Names follow Kafka's controller metrics: EventQueueSize / EventQueueTimeMs
(ControllerEventManager) and QueueSize / TotalQueueSize / RequestRateAndQueueTimeMs per broker
(ControllerChannelManager), UncleanLeaderElectionsPerSec as a counter, and the ISR changes the
leaders' AlterPartition requests made (the brokers count theirs as IsrShrinksPerSec /
IsrExpandsPerSec; these are what the controller committed). Beyond Kafka, :class:`PropagationTracker` follows each broker's
lag (exposed, with the cluster-state gauges, by :mod:`kmeta.controller.status`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kmeta.controller.propagation import PropagationTracker

_MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000)


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.event_queue_size = Gauge(
            "kmeta_controller_event_queue_size", "Events waiting", registry=r
        )
        self.event_queue_time_ms = Histogram(
            "kmeta_controller_event_queue_time_ms",
            "Time an event waited in the queue",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.event_process_time_ms = Histogram(
            "kmeta_controller_event_process_time_ms",
            "Time to process an event",
            ["event"],
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.broker_queue_size = Gauge(
            "kmeta_controller_channel_queue_size",
            "Requests queued per broker",
            ["broker_id"],
            registry=r,
        )
        self.total_queue_size = Gauge(
            "kmeta_controller_channel_total_queue_size",
            "Requests queued for all brokers",
            registry=r,
        )
        self.request_queue_time_ms = Histogram(
            "kmeta_controller_channel_request_queue_time_ms",
            "Time a request waited before it was sent",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.request_rate_and_queue_time_ms = Histogram(
            "kmeta_controller_channel_request_rate_and_queue_time_ms",
            "Kafka's RequestRateAndQueueTimeMs: queue time of each request sent, per broker",
            ["broker_id"],
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.propagation = PropagationTracker()
        self.send_failures = Counter(
            "kmeta_controller_channel_send_failures",
            "Failed send attempts (retried)",
            ["broker_id"],
            registry=r,
        )
        self.rejections = Counter(
            "kmeta_controller_channel_rejections",
            "Control requests a broker answered with an error (not acknowledgements)",
            ["broker_id", "api", "error"],
            registry=r,
        )

        self.isr_changes = Counter(
            "kmeta_controller_isr_changes",
            "ISR changes committed from the leaders' AlterPartition, per partition",
            ["change"],  # shrink / expand (a partition whose ISR lost and gained: both)
            registry=r,
        )
        self.alter_partition_errors = Counter(
            "kmeta_controller_alter_partition_errors",
            "AlterPartition partitions (or whole requests) refused, per error",
            ["error"],
            registry=r,
        )
        self.unclean_leader_elections = Counter(
            "kmeta_controller_unclean_leader_elections",
            "Leaders elected from outside the ISR (unclean.leader.election.enable: data loss "
            "possible)",
            registry=r,
        )

    def unclean_elections(self, count: int) -> None:
        if count:
            self.unclean_leader_elections.inc(count)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        v = self.registry.get_sample_value(name, labels or {})
        return 0.0 if v is None else v
