"""Per-daemon request metrics, counted in plain ints and exposed by a prometheus collector.

Every daemon (broker, controller) owns one :class:`DaemonMetrics` with its own
``CollectorRegistry`` (no global state: tests run several daemons in one process). When a
daemon runs with metrics on, its listeners attach a :class:`ConnectionMetrics` observer to each
connection (:class:`kmeta.net.hooks.ConnectionHooks`); with metrics off nothing is counted.

Why not ``Counter.labels(...).inc()`` per request: that takes a lock and a label lookup, about
2 us a request; here a request costs two ``perf_counter()`` calls, one dict lookup and a few
int additions, and the prometheus families are built only when /metrics is scraped.

Exposed (label ``listener`` on each):

* ``kmeta_requests_total{api_key, api, version}``, ``kmeta_request_latency_seconds{api}``
  (until the answer is ready; for asynchronous handlers, until their result is);
* ``kmeta_bytes_in_total``, ``kmeta_bytes_out_total``;
* ``kmeta_connections_open``, ``kmeta_connections_accepted_total``;
* ``kmeta_connection_errors_total{class}``: connections closed for a fault, by class (the
  value of its :class:`kmeta.net.hooks.FaultKind`: ``FrameTooLargeError``, ``IdleTimeout``, ...).
* ``kmeta_request_memory_used_bytes``, ``kmeta_request_memory_capacity_bytes``,
  ``kmeta_request_memory_pauses_total``: the queued.max.request.bytes pool (no listener label:
  one per daemon).
"""

from __future__ import annotations

import asyncio
import bisect
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from time import perf_counter

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kmeta.net.dispatch import S
from kmeta.net.hooks import FaultKind, HookedConnection
from kmeta.net.inbound.memory_pool import RequestMemoryPool
from kmeta.net.listener import Listener
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.registry import api_for

#: request latency buckets (seconds): 50 us .. 10 s
LATENCY_BUCKETS_S = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 10.0,
)  # fmt: skip


class PlainHistogram:
    """A histogram in plain ints: ``observe`` is one bisect and two additions."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Iterable[float] = LATENCY_BUCKETS_S) -> None:
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)  # last: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merge(self, other: PlainHistogram) -> None:
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.total += other.total

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs as prometheus wants them."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((repr(float(bound)), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


#: lookup keys (not series) kept for versions above the served ones
_MAX_KEYS = 4096


class _ApiStats:
    __slots__ = ("api_key", "count", "latency", "version")

    def __init__(self, api_key: int, version: int) -> None:
        self.api_key = api_key
        self.version = version
        self.count = 0
        self.latency = PlainHistogram()


def api_name(api_key: int) -> str:
    try:
        return "".join(part.title() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


class ListenerMetrics:
    """The counters of one listener (written by its connections, read by the collector)."""

    __slots__ = ("accepted", "by_key", "bytes_in", "bytes_out", "errors", "listener", "open")

    def __init__(self, listener: str, open_connections: Callable[[], int] = lambda: 0) -> None:
        self.listener = listener
        self.open = open_connections
        #: api_key << 16 | api_version -> stats (several keys may share one: see ``stats``)
        self.by_key: dict[int, _ApiStats] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.accepted = 0
        self.errors: dict[str, int] = {}

    def stats(self, api_key: int, api_version: int) -> _ApiStats:
        """The stats of a served request, created on first use.

        A version above every served one (ApiVersions answers any, KIP-511) is counted as
        the first unserved version: a peer cannot grow the series without bound.
        """
        key = api_key << 16 | api_version
        stats = self.by_key.get(key)
        if stats is None:
            label = min(api_version, api_for(api_key).max_version + 1)
            stats = self.by_key.get(api_key << 16 | label)
            if stats is None:
                stats = self.by_key[api_key << 16 | label] = _ApiStats(api_key, label)
            if len(self.by_key) < _MAX_KEYS:
                self.by_key[key] = stats  # the next lookup finds it at once
        return stats

    def observer(self, _conn: HookedConnection) -> ConnectionMetrics:
        """The ConnectionHooks observer factory of this listener's connections."""
        return ConnectionMetrics(self)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


class ConnectionMetrics:
    """The :class:`~kmeta.net.hooks.ConnectionObserver` of one connection: counts into its
    listener's :class:`ListenerMetrics`.

    Latency is measured from the read that delivered a request to the moment its answer is
    ready: the synchronous answers of one read leave in one write at the end of it, so the
    clock is read twice per read, not per request (and a pipelining client sees just that).
    """

    __slots__ = ("_done", "_metrics", "_read_at")

    def __init__(self, metrics: ListenerMetrics) -> None:
        self._metrics = metrics
        self._read_at = 0.0  # perf_counter() of the read that delivered the current frames
        self._done: list[PlainHistogram] = []  # latency of each request answered since then
        metrics.accepted += 1

    def on_read(self, nbytes: int) -> None:
        self._metrics.bytes_in += nbytes
        self._read_at = perf_counter()

    def on_request(
        self, api_key: int, api_version: int, answer: asyncio.Future[object] | None
    ) -> None:
        by_key = self._metrics.by_key
        stats = by_key.get(api_key << 16 | api_version) or self._metrics.stats(api_key, api_version)
        stats.count += 1
        if answer is None:
            self._done.append(stats.latency)
        else:
            start, latency = self._read_at, stats.latency
            answer.add_done_callback(lambda _f: latency.observe(perf_counter() - start))

    def on_answers_ready(self) -> None:
        if not self._done:
            return
        done, self._done = self._done, []
        took = perf_counter() - self._read_at
        i = bisect_left(LATENCY_BUCKETS_S, took)
        for latency in done:
            latency.counts[i] += 1
            latency.total += took

    def on_write(self, nbytes: int) -> None:
        self._metrics.bytes_out += nbytes

    def on_fault(self, kind: FaultKind, detail: str) -> None:
        self._metrics.error(kind.value)

    def on_close(self) -> None:
        pass


class RequestCollector(Collector):
    """Builds the request families from every listener's plain counters, at scrape time."""

    def __init__(self) -> None:
        self.listeners: list[ListenerMetrics] = []
        #: the daemon's request memory pool (queued.max.request.bytes), once instrumented
        self.pool: RequestMemoryPool | None = None

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kmeta_requests", "Requests handled", labels=["listener", "api_key", "api", "version"]
        )
        latency = HistogramMetricFamily(
            "kmeta_request_latency_seconds",
            "Time from a request's frame to its answer being ready",
            labels=["listener", "api"],
        )
        bytes_in = CounterMetricFamily("kmeta_bytes_in", "Bytes received", labels=["listener"])
        bytes_out = CounterMetricFamily("kmeta_bytes_out", "Bytes sent", labels=["listener"])
        open_ = GaugeMetricFamily("kmeta_connections_open", "Open connections", labels=["listener"])
        accepted = CounterMetricFamily(
            "kmeta_connections_accepted", "Connections accepted", labels=["listener"]
        )
        errors = CounterMetricFamily(
            "kmeta_connection_errors",
            "Connections closed for a fault, by class",
            labels=["listener", "class"],
        )
        for lm in self.listeners:
            name = lm.listener
            per_api: dict[int, PlainHistogram] = {}
            for stats in {id(s): s for s in list(lm.by_key.values())}.values():
                requests.add_metric(
                    [name, str(stats.api_key), api_name(stats.api_key), str(stats.version)],
                    stats.count,
                )
                per_api.setdefault(stats.api_key, PlainHistogram()).merge(stats.latency)
            for key, hist in sorted(per_api.items()):
                latency.add_metric([name, api_name(key)], hist.buckets(), hist.total)
            bytes_in.add_metric([name], lm.bytes_in)
            bytes_out.add_metric([name], lm.bytes_out)
            open_.add_metric([name], lm.open())
            accepted.add_metric([name], lm.accepted)
            for kind, n in sorted(lm.errors.items()):
                errors.add_metric([name, kind], n)
        yield from (requests, latency, bytes_in, bytes_out, open_, accepted, errors)
        if self.pool is not None:
            # Kafka's MemoryPoolUsed / MemoryPoolAvailable
            yield GaugeMetricFamily(
                "kmeta_request_memory_used_bytes",
                "Request bytes buffered by all connections (queued.max.request.bytes pool)",
                value=self.pool.used,
            )
            yield GaugeMetricFamily(
                "kmeta_request_memory_capacity_bytes",
                "queued.max.request.bytes",
                value=self.pool.capacity,
            )
            yield CounterMetricFamily(
                "kmeta_request_memory_pauses",
                "Connections paused because the request memory pool was full",
                value=self.pool.pauses,
            )


class DaemonMetrics:
    """One daemon's registry plus the request counters of its listeners."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = RequestCollector()
        self.registry.register(self.requests)

    def listener(self, name: str, open_connections: Callable[[], int]) -> ListenerMetrics:
        lm = ListenerMetrics(name, open_connections)
        self.requests.listeners.append(lm)
        return lm

    def instrument(self, listeners: Iterable[Listener[S]]) -> None:
        """Meter every connection these listeners accept from now on."""
        for lst in listeners:
            if lst.info.pool is not None:
                self.requests.pool = lst.info.pool  # one per daemon, shared by its listeners
            lm = self.listener(lst.name, lambda lst=lst: len(lst.connections))  # type: ignore[misc]
            lst.hooks = lst.hooks.with_observer(lm.observer)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """One sample's value (0 when absent): for tests and ``kmeta status``."""
        v = self.registry.get_sample_value(name, labels or {})
        return 0.0 if v is None else v


def plain_histogram_family(
    name: str, doc: str, labelled: Iterable[tuple[list[str], PlainHistogram]], labels: list[str]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, hist in labelled:
        family.add_metric(values, hist.buckets(), hist.total)
    return family
