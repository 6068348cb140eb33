"""The broker daemon's lifecycle: start listeners, serve, shut down in a fixed order.

Start: the partition logs are recovered from ``--log-dir`` (before anything is served); every
listener binds; the control listener accepts at once. A broker with a controller
opens its client listeners only once it holds the controller's state — its first full
UpdateMetadata since start — as a KRaft broker unfences only once caught up with the metadata
log: until then a client connecting is refused and tries its next bootstrap server, instead
of being told the cluster is empty (or half there). ``initial_metadata_timeout_ms`` bounds the
wait; after it the broker serves what it has and says so at WARN. A broker without a
controller serves at once.

Shutdown order (SIGTERM or SIGINT): 1. every listener stops accepting; 2. each connection
finishes the requests it has already read and closes; 3. wait up to
``shutdown_timeout_ms``, then abort the stragglers (waiting fetches are answered at once
from step 1); 4. stop services (the controller link) last, so the controller keeps hearing
from us while clients drain; 5. flush and close the partition logs, close the state-change
log. A second SIGINT exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Sequence
from typing import Protocol

from kmeta.metadata.cache import MetadataCache
from kmeta.net.inbound.memory_pool import RequestMemoryPool
from kmeta.net.inbound.serving import ConnectionLimits
from kmeta.net.listener import Listener
from kmeta.net.metrics import DaemonMetrics
from kmeta.net.metrics_http import MetricsServer
from kmeta.net.security.sasl import sasl_gate
from kmeta.net.security.ssl_principal import mtls_gate, parse_rules
from kmeta.net.tls import uses_sasl, uses_tls
from kmeta.server.config import BrokerConfig
from kmeta.server.handlers import build_registry
from kmeta.server.loop_lag import LoopLagProbe
from kmeta.server.metrics import broker_metrics
from kmeta.server.state import BrokerState

log = logging.getLogger("kmeta.server")


class Service(Protocol):
    """Something that runs beside the listeners (the controller link)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


ServiceFactory = Callable[["Broker"], Service]


class Broker:
    def __init__(self, config: BrokerConfig, services: Sequence[ServiceFactory] = ()) -> None:
        self.config = config
        self.state = BrokerState(config)
        self.registry = build_registry()
        limits = ConnectionLimits(
            max_frame_size=config.max_frame_size,
            idle_timeout_s=config.idle_timeout_s,
            max_queued_requests=config.max_queued_requests,
            request_timeout_s=config.request_timeout_ms / 1000.0,
            write_timeout_s=config.write_timeout_ms / 1000.0,
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
        )
        #: request bytes buffered by every connection of every listener together
        self.request_memory = RequestMemoryPool(config.queued_max_request_bytes)
        self.listeners = [
            Listener(
                spec.name,
                spec.host,
                spec.port,
                is_control=spec.name == config.control_listener_name,
                registry=self.registry,
                state=self.state,
                limits=limits,
                # one context per SSL listener: client auth may differ (mTLS on CONTROL)
                ssl=config.tls.server_context(spec.name)
                if uses_tls(config.security_protocol(spec.name))
                else None,
                zero_copy=config.zero_copy,
                pool=self.request_memory,
            )
            for spec in config.listeners
        ]
        rules = parse_rules(config.ssl_principal_mapping_rules)
        for lst in self.listeners:
            protocol = config.security_protocol(lst.name)
            if uses_sasl(protocol):
                # the CONTROL listener knows only the cluster credential (the controller's)
                known = self.state.credentials
                if lst.info.is_control and config.cluster_credential is not None:
                    known = known.fixed_only()
                lst.hooks = lst.hooks.with_gate(sasl_gate(config.sasl_enabled_mechanisms, known))
            elif uses_tls(protocol):  # SSL: the client certificate's DN, mapped
                lst.hooks = lst.hooks.with_gate(mtls_gate(rules))
        #: /metrics and /status (only with config.metrics_port; off: nothing is counted)
        self.metrics: DaemonMetrics | None = None
        self.metrics_server: MetricsServer | None = None
        #: how long the event loop is held (run with /metrics; see kmeta.server.loop_lag)
        self.loop_lag: LoopLagProbe | None = None
        if config.metrics_port is not None:
            self.loop_lag = LoopLagProbe()
            self.metrics, self.metrics_server = broker_metrics(self.state, self.listeners, self.loop_lag)
        self._service_factories = tuple(services)
        self.services: list[Service] = []
        self._stopped = asyncio.Event()
        #: set once the client listeners accept (at once without a controller)
        self.serving_clients = asyncio.Event()
        self._metadata_timer: asyncio.TimerHandle | None = None
        self._started_at = 0.0

    @property
    def cache(self) -> MetadataCache:
        return self.state.cache

    def port(self, listener: str) -> int:
        """The bound port of ``listener`` (useful when configured with port 0)."""
        for lst in self.listeners:
            if lst.name == listener:
                return lst.port
        raise KeyError(listener)

    @property
    def _client_listeners(self) -> list[Listener[BrokerState]]:
        return [lst for lst in self.listeners if not lst.info.is_control]

    async def start(self) -> None:
        started: list[Listener[BrokerState]] = []
        wait = self.config.controller is not None  # clients wait for the controller's state
        recovered = self.state.replica_manager.startup()
        if recovered:
            log.info("broker %d: %d partition logs recovered from %s",
                     self.config.broker_id, recovered, self.config.log_dir)  # fmt: skip
        try:
            for lst in self.listeners:
                await lst.start(serve=not wait or lst.info.is_control)
                started.append(lst)
            if self.metrics_server is not None:
                await self.metrics_server.start()
        except BaseException:
            for lst in started:
                await lst.shutdown(0.1)
            self.state.replica_manager.shutdown()  # (its retention timer, its open files)
            raise
        if self.loop_lag is not None:
            self.loop_lag.start()
        if wait:
            self._await_initial_metadata()
        else:
            self.serving_clients.set()
        for factory in self._service_factories:
            service = factory(self)
            await service.start()
            self.services.append(service)
        log.info(
            "broker %d up: %s",
            self.config.broker_id,
            ", ".join(f"{lst.name}://{lst.host}:{lst.port}" for lst in self.listeners),
        )

    def _await_initial_metadata(self) -> None:
        loop = asyncio.get_running_loop()
        self._started_at = loop.time()
        self._metadata_timer = loop.call_later(
            self.config.initial_metadata_timeout_ms / 1000.0, self._open_client_listeners, True
        )
        self.state.on_full_metadata = self._open_client_listeners
        if self.state.holds_full_metadata:
            self._open_client_listeners()

    def _open_client_listeners(self, timed_out: bool = False) -> None:
        """Accept clients: the first full UpdateMetadata was applied, or the wait timed out."""
        if self.serving_clients.is_set() or self._stopped.is_set():
            return
        if self._metadata_timer is not None:
            self._metadata_timer.cancel()
        snap = self.state.cache.snapshot
        partitions = sum(map(len, snap.partition_states.values()))
        waited_s = asyncio.get_running_loop().time() - self._started_at
        if timed_out:
            log.warning(
                "broker %d: no full metadata from the controller within %d ms "
                "(--initial-metadata-timeout-ms); serving clients with what it holds: "
                "%d brokers, %d partitions",
                self.config.broker_id, self.config.initial_metadata_timeout_ms,
                len(snap.alive_brokers), partitions,
            )  # fmt: skip
        else:
            log.info(
                "broker %d holds the controller's metadata after %.2f s (%d brokers, %d "
                "partitions): accepting clients",
                self.config.broker_id, waited_s, len(snap.alive_brokers), partitions,
            )  # fmt: skip
        for lst in self._client_listeners:
            lst.open()
        self.serving_clients.set()

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.state.on_full_metadata = None
        if self._metadata_timer is not None:
            self._metadata_timer.cancel()
        for lst in self.listeners:
            lst.stop_accepting()
        self.state.replica_manager.delayed_fetch.close()  # (waiting fetches answer now)
        timeout_s = self.config.shutdown_timeout_ms / 1000.0
        await asyncio.gather(*(lst.shutdown(timeout_s) for lst in self.listeners))
        for service in reversed(self.services):
            try:
                await service.stop()
            except Exception:
                log.exception("service %r failed to stop", service)
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.loop_lag is not None:
            await self.loop_lag.stop()
        self.state.coordinators.close()  # (shards unload while their logs are open)
        self.state.replica_manager.shutdown()
        self.state.close()
        log.info("broker %d stopped", self.config.broker_id)


async def serve(config: BrokerConfig, services: Sequence[ServiceFactory] = ()) -> None:
    """Run a broker until SIGTERM/SIGINT, then shut it down in order."""
    loop = asyncio.get_running_loop()
    broker = Broker(config, services)
    stop = asyncio.Event()
    signals = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal signals
        signals += 1
        if signals > 1 and sig == signal.SIGINT:
            log.warning("second SIGINT: exiting now")
            os._exit(130)
        log.info("%s: shutting down", sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await broker.start()
        await stop.wait()
    finally:
        await broker.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run(config: BrokerConfig, services: Sequence[ServiceFactory] = ()) -> None:
    """Blocking entry point: on uvloop when it is installed, plain asyncio otherwise."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(config, services))
    else:
        uvloop.run(serve(config, services))
