"""The broker's own metrics and /status, on top of the request metrics of kmeta.net.metrics.

Read at scrape time from the current snapshot (nothing is counted on the request path):

* ``kmeta_broker_snapshot_version``: the MetadataCache snapshot version (+1 per applied update);
* ``kmeta_broker_topics`` / ``kmeta_broker_partitions``: what the cache holds;
* ``kmeta_broker_alive_brokers``, ``kmeta_broker_epoch``, ``kmeta_broker_controller_epoch``;
* ``kmeta_broker_update_apply_seconds``: time to apply one UpdateMetadata to the cache;
* ``kmeta_broker_loop_lag_seconds``: how late the event loop woke a 20 ms timer (the time it
  was held; :mod:`kmeta.server.loop_lag`); /status has its maximum and the recent stalls.
* ``kmeta_broker_produce_partitions_total{error}``: the partitions of Produce requests
  answered, by error (NONE: acknowledged), as Kafka's ErrorsPerSec.
* ``kmeta_broker_bytes_in_total`` / ``kmeta_broker_messages_in_total`` /
  ``kmeta_broker_bytes_out_total``: record bytes appended, records appended, record bytes
  fetched (Kafka's BytesInPerSec, MessagesInPerSec, BytesOutPerSec, broker-wide only);
* ``kmeta_broker_logs`` / ``kmeta_broker_log_size_bytes`` / ``kmeta_broker_log_memory_bytes``:
  the partition logs held, their bytes, the bytes held in memory (broker-wide totals: a
  series per partition would cost a series per partition);
* ``kmeta_broker_delayed_fetches`` / ``kmeta_broker_delayed_produces``: fetches and acks=-1
  produces waiting in their purgatories;
* replication (issue 29), over the partitions this broker leads whose log was made here:
  ``kmeta_broker_under_replicated_partitions`` (ISR smaller than the replicas, Kafka's
  UnderReplicatedPartitions), ``kmeta_broker_under_min_isr_partitions`` (ISR smaller than
  min.insync.replicas, UnderMinIsrPartitionCount), ``kmeta_broker_isr_shrinks_total`` /
  ``kmeta_broker_isr_expands_total`` (ISR changes the controller accepted from this leader,
  IsrShrinksPerSec / IsrExpandsPerSec); ``kmeta_broker_followed_partitions`` and
  ``kmeta_broker_replica_fetchers`` (one per leader broker followed).
* consumer lag (issue 31) of the groups this broker coordinates, per group / topic / partition:
  ``kmeta_broker_group_committed_offset`` and ``kmeta_broker_group_lag`` (the local replica's
  high watermark minus the committed offset, :mod:`kmeta.server.group.offsets.offsets_lag` says why),
  and ``kmeta_broker_group_lag_unknown_partitions`` (committed partitions with no replica here).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kmeta.net.metrics import DaemonMetrics, plain_histogram_family
from kmeta.net.metrics_http import MetricsServer
from kmeta.server.group.offsets.offsets_lag import group_lags

if TYPE_CHECKING:
    from kmeta.net.listener import Listener
    from kmeta.server.loop_lag import LoopLagProbe
    from kmeta.server.replica.replica_manager import ReplicaManager
    from kmeta.server.state import BrokerState


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def broker_status(state: BrokerState, loop_lag: LoopLagProbe | None = None) -> dict[str, Any]:
    """This broker's view (its cache), for GET /status."""
    snap = state.cache.snapshot
    controller = state.config.controller
    return {
        "broker_id": state.broker_id,
        "broker_epoch": state.broker_epoch,
        "controller_epoch": state.controller_epoch,
        "controller": f"{controller[0]}:{controller[1]}" if controller else None,
        "snapshot_version": snap.version,
        "topics": len(snap.partition_states),
        "partitions": sum(len(parts) for parts in snap.partition_states.values()),
        "alive_brokers": sorted(snap.alive_brokers),
        # the controller's first full UpdateMetadata since start was applied (with a
        # controller, client listeners open then or at --initial-metadata-timeout-ms)
        "holds_full_metadata": state.holds_full_metadata,
        "loop_lag": None if loop_lag is None else loop_lag.status(),
        "replication": _replication_status(state),
    }


def under_replicated(rm: ReplicaManager) -> tuple[int, int]:
    """(led partitions whose ISR is smaller than their replicas, those whose ISR is smaller
    than their min.insync.replicas): over the partitions made here."""
    under = under_min = 0
    configs = rm.cache.snapshot.topic_configs
    for partition in rm.led_partitions():
        state = partition.state
        if state is None:
            continue
        under += len(state.isr) < len(state.replicas)
        try:
            min_isr = int(configs.get(partition.topic, {}).get("min.insync.replicas", 1))
        except ValueError:
            min_isr = 1
        under_min += len(state.isr) < min_isr
    return under, under_min


def log_totals(rm: ReplicaManager) -> tuple[int, int, int]:
    """(logs held, their bytes, bytes held in memory): broker-wide."""
    count = size = 0
    for plog in rm.log_manager.logs():
        count += 1
        size += plog.size_in_bytes
    return count, size, rm.log_manager.memory_bytes


def _replication_status(state: BrokerState) -> dict[str, Any]:
    rm = state.replica_manager
    under, under_min = under_replicated(rm)
    return {
        "under_replicated_partitions": under,
        "under_min_isr_partitions": under_min,
        "isr_shrinks": rm.isr.shrinks,
        "isr_expands": rm.isr.expands,
        "followed_partitions": rm.fetchers.following(),
        "fetching_from": sorted(rm.fetchers.fetchers),
        "delayed_produces": rm.delayed_produce.watched(),
    }


class BrokerCollector(Collector):
    def __init__(self, state: BrokerState, loop_lag: LoopLagProbe | None = None) -> None:
        self.state = state
        self.loop_lag = loop_lag

    def collect(self) -> Iterator[Metric]:
        state = self.state
        snap = state.cache.snapshot
        yield _gauge("kmeta_broker_snapshot_version", "Metadata snapshot version", snap.version)
        yield _gauge(
            "kmeta_broker_topics", "Topics in the metadata cache", len(snap.partition_states)
        )
        yield _gauge(
            "kmeta_broker_partitions",
            "Partitions in the metadata cache",
            sum(len(parts) for parts in snap.partition_states.values()),
        )
        yield _gauge("kmeta_broker_alive_brokers", "Alive brokers known", len(snap.alive_brokers))
        yield _gauge(
            "kmeta_broker_epoch", "This broker's epoch (-1: not registered)", state.broker_epoch
        )
        yield _gauge(
            "kmeta_broker_controller_epoch", "Highest controller epoch seen", state.controller_epoch
        )
        produced = CounterMetricFamily(
            "kmeta_broker_produce_partitions",
            "Partitions of Produce requests answered, by error",
            labels=["error"],
        )
        for error, count in sorted(state.produce_results.items()):
            produced.add_metric([error], count)
        yield produced
        rm = state.replica_manager
        for name, doc, value in (
            ("bytes_in", "Record bytes appended to partition logs", rm.bytes_in),
            ("messages_in", "Records appended to partition logs", rm.messages_in),
            ("bytes_out", "Record bytes answered to fetches", rm.bytes_out),
        ):
            yield CounterMetricFamily(f"kmeta_broker_{name}", doc, value=value)
        logs, size, memory = log_totals(rm)
        yield _gauge("kmeta_broker_logs", "Partition logs held", logs)
        yield _gauge("kmeta_broker_log_size_bytes", "Bytes of all partition logs", size)
        yield _gauge("kmeta_broker_log_memory_bytes", "Partition log bytes held in memory", memory)
        yield _gauge(
            "kmeta_broker_delayed_fetches", "Fetches waiting in the purgatory", rm.delayed_fetch.watched()
        )
        yield _gauge(
            "kmeta_broker_delayed_produces", "acks=-1 produces waiting in the purgatory",
            rm.delayed_produce.watched(),
        )  # fmt: skip
        under, under_min = under_replicated(rm)
        yield _gauge("kmeta_broker_under_replicated_partitions", "Led partitions whose ISR is smaller than their replicas", under)
        yield _gauge("kmeta_broker_under_min_isr_partitions", "Led partitions whose ISR is smaller than min.insync.replicas", under_min)
        yield CounterMetricFamily("kmeta_broker_isr_shrinks", "ISR shrinks the controller accepted", value=rm.isr.shrinks)
        yield CounterMetricFamily("kmeta_broker_isr_expands", "ISR expansions the controller accepted", value=rm.isr.expands)
        yield _gauge("kmeta_broker_followed_partitions", "Partitions fetched from their leader", rm.fetchers.following())
        yield _gauge("kmeta_broker_replica_fetchers", "Fetchers (one per leader broker)", len(rm.fetchers.fetchers))
        yield from _group_lag(state)
        yield plain_histogram_family(
            "kmeta_broker_update_apply_seconds",
            "Time to apply one UpdateMetadata to the cache",
            [([], state.update_apply)],
            [],
        )
        if self.loop_lag is not None:
            yield plain_histogram_family(
                "kmeta_broker_loop_lag_seconds",
                "How late the event loop woke a 20 ms timer (time it was held)",
                [([], self.loop_lag.lag)],
                [],
            )


def _group_lag(state: BrokerState) -> Iterator[Metric]:
    labels = ["group", "topic", "partition"]
    committed = GaugeMetricFamily("kmeta_broker_group_committed_offset", "Committed offset of a group coordinated here", labels=labels)
    lag = GaugeMetricFamily("kmeta_broker_group_lag", "High watermark minus the committed offset (local replica)", labels=labels)
    lags, unknown = group_lags(state)
    for g in lags:
        key = [g.group, g.topic, str(g.partition)]
        committed.add_metric(key, g.committed)
        lag.add_metric(key, g.lag)
    yield committed
    yield lag
    yield _gauge("kmeta_broker_group_lag_unknown_partitions", "Committed partitions with no replica here to read the log end of", unknown)


def broker_metrics(
    state: BrokerState, listeners: Iterable[Listener[BrokerState]], loop_lag: LoopLagProbe
) -> tuple[DaemonMetrics, MetricsServer]:
    """Meter the broker's listeners and build its /metrics + /status server (not started)."""
    config = state.config
    assert config.metrics_port is not None
    metrics = DaemonMetrics()
    metrics.instrument(listeners)
    metrics.registry.register(BrokerCollector(state, loop_lag))
    server = MetricsServer(
        metrics.registry,
        config.metrics_host,
        config.metrics_port,
        status=lambda: broker_status(state, loop_lag),
    )
    return metrics, server
