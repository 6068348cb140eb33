"""Per-daemon request metrics, counted in plain ints and exposed by a prometheus collector.

Every daemon (broker, controller) owns one :class:`DaemonMetrics` with its own
``CollectorRegistry`` (no global state: tests run several daemons in one process). When a
daemon runs with metrics on, its listeners accept :class:`MeteredServerConnection`\\ s instead
of plain ``ServerConnection``\\ s; with metrics off nothing on the request path changes.

Why not ``Counter.labels(...).inc()`` per request: that takes a lock and a label lookup, about
2 us a request; here a request costs two ``perf_counter()`` calls, one dict lookup and a few
int additions, and the prometheus families are built only when /metrics is scraped.

Exposed (label ``listener`` on each):

* ``kmeta_requests_total{api_key, api, version}``, ``kmeta_request_latency_seconds{api}``
  (until the answer is ready; for asynchronous handlers, until their result is);
* ``kmeta_bytes_in_total``, ``kmeta_bytes_out_total``;
* ``kmeta_connections_open``, ``kmeta_connections_accepted_total``;
* ``kmeta_connection_errors_total{class}``: connections closed for a fault, by class
  (the ProtocolError subclass, ``InternalError``, ``IdleTimeout``, ``FrameError``, ...).
"""

from __future__ import annotations

import bisect
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from time import perf_counter
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kmeta.net.listener import Listener
from kmeta.net.server_connection import ServerConnection, ServingInfo, _AsyncSlot
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ProtocolError

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
        #: api_key << 8 | api_version -> stats
        self.by_key: dict[int, _ApiStats] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.accepted = 0
        self.errors: dict[str, int] = {}

    def stats(self, frame: bytes) -> _ApiStats:
        """The stats of the (served) request in ``frame``, created on first use."""
        key = frame[1] << 8 | frame[3]
        stats = self.by_key.get(key)
        if stats is None:
            stats = self.by_key[key] = _ApiStats(frame[1], frame[3])
        return stats

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


class MeteredServerConnection(ServerConnection):
    """A ServerConnection that counts requests, latency, bytes and faults into ListenerMetrics."""

    def __init__(
        self, metrics: ListenerMetrics, info: ServingInfo, *args: Any, **kwargs: Any
    ) -> None:
        super().__init__(info, *args, **kwargs)
        self._metrics = metrics
        self._fault_counted = False
        self._read_at = 0.0  # perf_counter() of the read that delivered the current frames
        self._done: list[PlainHistogram] = []  # latency of each request answered since then
        metrics.accepted += 1

    # Latency is measured from the read that delivered a request to the moment its answer is
    # ready: the synchronous answers of one read leave in one write at the end of it, so the
    # clock is read twice per read, not per request (and a pipelining client sees just that).
    def data_received(self, data: bytes) -> None:
        self._metrics.bytes_in += len(data)
        self._read_at = perf_counter()
        super().data_received(data)
        if self._done:
            self._flush_latency()

    def resume_writing(self) -> None:
        super().resume_writing()  # may handle frames held while the peer was not reading
        if self._done:
            self._flush_latency()

    def _flush_latency(self) -> None:
        done, self._done = self._done, []
        took = perf_counter() - self._read_at
        i = bisect_left(LATENCY_BUCKETS_S, took)
        for latency in done:
            latency.counts[i] += 1
            latency.total += took

    def _handle_frame(self, frame: bytes, out: Any) -> None:
        pending = self._pending
        before = len(pending)
        try:
            super()._handle_frame(frame, out)
        except ProtocolError as exc:
            self._fault(type(exc).__name__)
            raise
        except Exception:
            self._fault("InternalError")
            raise
        # served api keys and versions are < 256 (the registry accepted the frame), so the
        # low bytes of the two header fields name them: no slice, no bytes hashing
        stats = self._metrics.by_key.get(frame[1] << 8 | frame[3]) or self._metrics.stats(frame)
        stats.count += 1
        if len(pending) > before and isinstance(pending[-1], _AsyncSlot):
            start, latency = self._read_at, stats.latency
            pending[-1].future.add_done_callback(lambda _f: latency.observe(perf_counter() - start))
        else:
            self._done.append(stats.latency)

    def _write(self, out: Any) -> None:
        if out:
            self._metrics.bytes_out += sum(map(len, out))
        super()._write(out)

    def _fault(self, kind: str) -> None:
        if not self._fault_counted:
            self._fault_counted = True
            self._metrics.error(kind)

    def _drop(self, reason: str, **kwargs: Any) -> None:
        if reason.startswith("idle"):
            self._fault("IdleTimeout")
        elif reason.startswith("not reading"):
            self._fault("WriteTimeout")
        elif reason.startswith("request incomplete"):
            self._fault("RequestTimeout")
        elif reason == "internal error":
            self._fault("InternalError")
        elif reason == "request cancelled":
            self._fault("RequestCancelled")
        else:  # the frame splitter refused the stream (size prefix), or an async ProtocolError
            self._fault("FrameError")
        super()._drop(reason, **kwargs)


def connection_factory(metrics: ListenerMetrics) -> Callable[..., ServerConnection]:
    """What a Listener's ``connection_class`` becomes when its daemon runs with metrics."""

    def make(info: ServingInfo, *args: Any, **kwargs: Any) -> ServerConnection:
        return MeteredServerConnection(metrics, info, *args, **kwargs)

    return make


class RequestCollector(Collector):
    """Builds the request families from every listener's plain counters, at scrape time."""

    def __init__(self) -> None:
        self.listeners: list[ListenerMetrics] = []

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
            for stats in list(lm.by_key.values()):
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

    def instrument(self, listeners: Iterable[Listener]) -> None:
        """Meter every connection these listeners accept from now on."""
        for lst in listeners:
            lm = self.listener(lst.name, lambda lst=lst: len(lst.connections))  # type: ignore[misc]
            lst.connection_class = connection_factory(lm)

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
