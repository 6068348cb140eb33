"""The controller daemon: a KafkaController behind kmeta.net listeners, with ordered shutdown.

Startup: the data dir's identity is checked first (:mod:`kmeta.controller.store.data_dir`); a dir
that must not be started on, a store that cannot be opened or a listener that cannot bind
raise :class:`ControllerStartError`, one line for the operator.

Shutdown: stop accepting, let connections finish what they read (bounded by
shutdown_timeout_ms), then stop the controller (event task, then the channel senders last).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal

from kmeta.controller.apis.registry import build_registry
from kmeta.controller.channel.faults import configured_faults
from kmeta.controller.config import ControllerConfig
from kmeta.controller.controller import KafkaController
from kmeta.controller.status import ControllerCollector, controller_status
from kmeta.controller.store.cluster_store import ClusterStore
from kmeta.controller.store.data_dir import check_data_dir
from kmeta.metadata.addresses import parse_listener
from kmeta.net.inbound.memory_pool import RequestMemoryPool
from kmeta.net.inbound.serving import ConnectionLimits
from kmeta.net.listener import Listener
from kmeta.net.metrics import DaemonMetrics
from kmeta.net.metrics_http import MetricsServer
from kmeta.net.security.sasl import sasl_gate
from kmeta.net.security.ssl_principal import mtls_gate, parse_rules
from kmeta.net.tls import uses_sasl, uses_tls

log = logging.getLogger(__name__)


def controller_metrics(controller: KafkaController, listeners: list[Listener[KafkaController]]) -> MetricsServer:
    """Meter the listeners into the controller's registry; build /metrics + /status."""
    config = controller.config
    assert config.metrics_port is not None
    metrics = DaemonMetrics(controller.metrics.registry)
    metrics.instrument(listeners)
    metrics.registry.register(ControllerCollector(controller))
    return MetricsServer(
        metrics.registry,
        config.metrics_host,
        config.metrics_port,
        status=lambda: controller_status(controller),
    )


class ControllerStartError(Exception):
    """The controller cannot start (the message is one line for the operator)."""


class ControllerDaemon:
    def __init__(self, config: ControllerConfig, store: ClusterStore | None = None) -> None:
        if store is None:  # (a quorum's identity is /cluster/id: see kmeta.controller.quorum.standby)
            # the recorded cluster id when none is given (DataDirError: not this dir)
            cluster_id = check_data_dir(config.data_dir, config.cluster_id, config.node_id)
            if cluster_id != config.cluster_id:
                config = dataclasses.replace(config, cluster_id=cluster_id)
        self.config = config
        self.controller = KafkaController(config, store)
        registry = build_registry()
        pool = RequestMemoryPool(config.queued_max_request_bytes)  # all listeners together
        self.listeners = []
        for spec in config.listeners:
            name, host, port = parse_listener(spec)
            self.listeners.append(
                Listener(
                    name,
                    host,
                    port,
                    is_control=False,
                    registry=registry,
                    state=self.controller,
                    limits=ConnectionLimits(max_queued_requests=1024),
                    ssl=config.tls.server_context(name)
                    if uses_tls(config.security_protocol(name))
                    else None,
                    pool=pool,
                )
            )
            # a quorum's controller: an answer that claims a change leaves only while it holds
            # its lease, asked as it is written (ControllerEventManager.may_leave)
            self.listeners[-1].hooks = self.listeners[-1].hooks.with_may_answer(
                self.controller.events.may_leave
            )
            protocol = config.security_protocol(name)
            if uses_sasl(protocol):
                # the controller's listeners are the control plane: with a cluster credential
                # only the fixed credentials authenticate there (not client-made users)
                known = self.controller.credentials
                if config.cluster_credential is not None:
                    known = known.fixed_only()
                self.listeners[-1].hooks = self.listeners[-1].hooks.with_gate(
                    sasl_gate(config.sasl_enabled_mechanisms, known)
                )
            elif uses_tls(protocol):  # SSL: the client certificate's DN, mapped
                self.listeners[-1].hooks = self.listeners[-1].hooks.with_gate(
                    mtls_gate(parse_rules(config.ssl_principal_mapping_rules))
                )

        #: /metrics and /status (only with config.metrics_port)
        self.metrics_server: MetricsServer | None = None
        if config.metrics_port is not None:
            self.metrics_server = controller_metrics(self.controller, self.listeners)

    @property
    def port(self) -> int:
        return self.listeners[0].port

    async def start(self) -> None:
        await self.controller.start()
        for listener in self.listeners:
            await listener.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()

    async def resign(self) -> None:
        """Deposed (Kafka's onControllerResignation): the controller stops acting first
        (events, then the senders), then the listeners close, without waiting for clients."""
        await self.controller.stop()
        for listener in self.listeners:
            listener.stop_accepting()
        for listener in self.listeners:
            await listener.shutdown(0.0)
        if self.metrics_server is not None:
            await self.metrics_server.stop()

    async def stop(self) -> None:
        timeout_s = self.config.shutdown_timeout_ms / 1000.0
        for listener in self.listeners:
            listener.stop_accepting()
        for listener in self.listeners:
            await listener.shutdown(timeout_s)
        await self.controller.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()


def reload_faults(controller: KafkaController) -> None:
    """SIGHUP: the fault file's faults (over ``--fault``'s) replace those in force. A file
    that cannot be read whole changes nothing."""
    config = controller.config
    try:
        faults = configured_faults(config.faults, config.fault_file)
    except (OSError, ValueError) as exc:
        log.error("fault file not applied, the faults in force stay: %s", exc)
        return
    controller.faults.replace(faults)
    shown = ", ".join(f"broker={b},{f}" for b, f in sorted(faults.items())) or "none"
    log.warning("fault injection from %s: %s", config.fault_file, shown)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM/SIGINT (a second signal forces exit)."""
    stop = asyncio.Event()
    hits = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal hits
        hits += 1
        if hits > 1:
            log.warning("second %s: exiting now", sig.name)
            raise SystemExit(1)
        log.info("%s: shutting down", sig.name)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    return stop
