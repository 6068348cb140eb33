"""A controller of a quorum (``kmeta controller --zookeeper ...``): standby until elected,
then active with its state in ZooKeeper, standby again once deposed.

Each term is a fresh :class:`ControllerDaemon` on a fresh :class:`ZooKeeperStore`: elected,
it loads the state from ZooKeeper and runs Kafka's failover (the Startup event: full
UpdateMetadata and LeaderAndIsr to every live broker, pending deletions resumed). A standby
does not listen on the controller port, so brokers move on to the active controller.

Deposition: the ZooKeeper session suspended or lost, ``/controller`` no longer ours, or a
write refused by the ``/controller_epoch`` fence. Before that is known, the term's controller
sends no request and gives no admin answer unless it holds its lease (see
:mod:`kmeta.controller.quorum.election`): a controller stopped (SIGSTOP) until a successor was
elected sends nothing when it resumes. The daemon resigns at once (events and senders first, then the
listeners), so it acts no more before another controller can be elected; nothing it did not
commit was acknowledged. Then it stands by again on the same process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import signal
import uuid
from pathlib import Path
from typing import Any

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import (
    ControllerDaemon,
    ControllerStartError,
    reload_faults,
    stop_on_signals,
)
from kmeta.controller.quorum.election import ControllerElection, quorum_status
from kmeta.controller.store.errors import StorageError
from kmeta.controller.store.zk_store import ZooKeeperStore
from kmeta.net.metrics_http import MetricsServer

log = logging.getLogger(__name__)

#: a controller that cannot reach ZooKeeper at start says so instead of waiting forever
CONNECT_TIMEOUT_S = 30.0


async def _first(*aws: asyncio.Future[Any]) -> None:
    """Wait until one of the futures is done; cancel the others."""
    _, pending = await asyncio.wait(aws, return_when=asyncio.FIRST_COMPLETED)
    for future in pending:
        future.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await future


async def _open_store(
    config: ControllerConfig, election: ControllerElection, deposed: asyncio.Event
) -> tuple[ControllerConfig, ZooKeeperStore]:
    """The elected controller's store, and its config with the quorum's cluster id."""
    loop = asyncio.get_running_loop()
    # (the state-change log's directory)
    await asyncio.to_thread(Path(config.data_dir).mkdir, mode=0o700, parents=True, exist_ok=True)

    def fenced(why: str) -> None:  # (called from the commit's thread)
        loop.call_soon_threadsafe(deposed.set)

    store = await asyncio.to_thread(
        ZooKeeperStore, election.client, election.epoch, election.epoch_zk_version, fenced
    )
    recorded = store.cluster_id()
    if recorded is None:
        recorded = config.cluster_id or str(uuid.uuid4())
        await asyncio.to_thread(store.set_cluster_id, recorded)
    elif config.cluster_id is not None and config.cluster_id != recorded:
        raise ControllerStartError(
            f"cluster id {config.cluster_id!r} given, but ZooKeeper's /cluster/id is {recorded!r}"
        )
    return dataclasses.replace(config, cluster_id=recorded), store


def _member_data(config: ControllerConfig) -> bytes:
    """What this controller's member znode says: where it serves /status (a standby too), so
    ``kmeta status`` can find the active controller's full view from any member."""
    if config.metrics_port is None:
        return b""
    return json.dumps({"metrics": f"{config.metrics_host}:{config.metrics_port}"}).encode()


def standby_status(config: ControllerConfig, election: ControllerElection) -> dict[str, Any]:
    """A standby's /status: its role and the quorum as ZooKeeper has it (who is active and
    where that one serves the full view)."""
    quorum: dict[str, Any] = {"active": None, "epoch": election.epoch, "standbys": [], "metrics": {}}
    if election.client.connected:
        with contextlib.suppress(Exception):  # (ZooKeeper gone meanwhile: what we know)
            quorum = quorum_status(election.client)
    return {"role": "standby", "node_id": config.node_id, "quorum": quorum}


def _standby_metrics(config: ControllerConfig, election: ControllerElection) -> MetricsServer | None:
    """/metrics (kmeta_controller_standby 1) and /status while standing by, on the port the
    active term's daemon takes over when elected."""
    if config.metrics_port is None:
        return None
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    standby = Gauge("kmeta_controller_standby", "1: this controller of a quorum stands by",
                    registry=registry)  # fmt: skip
    standby.set(1)
    return MetricsServer(registry, config.metrics_host, config.metrics_port,
                         status=lambda: standby_status(config, election))  # fmt: skip


async def serve_quorum(config: ControllerConfig, ready: asyncio.Event | None = None) -> None:
    assert config.zookeeper is not None
    election = ControllerElection(
        config.zookeeper, config.node_id, config.zookeeper_session_timeout_ms / 1000.0,
        member_data=_member_data(config), credential=config.zookeeper_credential,
    )  # fmt: skip
    try:
        await asyncio.wait_for(election.connect(CONNECT_TIMEOUT_S), CONNECT_TIMEOUT_S + 5)
    except Exception as exc:
        await election.close()
        raise ControllerStartError(f"cannot reach ZooKeeper at {config.zookeeper}: {exc}") from exc
    stop = stop_on_signals()
    if ready is not None:
        ready.set()
    log.info("controller %d standing by (ZooKeeper %s)", config.node_id, config.zookeeper)
    loop = asyncio.get_running_loop()
    #: the active term's daemon: SIGHUP re-reads the fault file into it (a standby reads the
    #: file when elected), as a single controller does
    active: list[ControllerDaemon] = []

    def on_sighup() -> None:
        if active:
            reload_faults(active[0].controller)

    if config.fault_file is not None:
        loop.add_signal_handler(signal.SIGHUP, on_sighup)
    standby_server = _standby_metrics(config, election)
    try:
        while not stop.is_set():
            if standby_server is not None:
                try:
                    await standby_server.start()
                except OSError as exc:
                    raise ControllerStartError(f"metrics port: {exc}") from exc
            elected = loop.create_task(election.elect())
            stopping = loop.create_task(stop.wait())
            await _first(elected, stopping)
            if standby_server is not None:  # the active term's daemon serves this port
                await standby_server.stop()
            if stop.is_set():
                break
            deposed = asyncio.Event()
            election.on_deposed = lambda why, deposed=deposed: deposed.set()
            lease = loop.create_task(election.keep_lease(), name="controller-lease")
            try:
                term_config, store = await _open_store(config, election, deposed)
                daemon = ControllerDaemon(term_config, store)
                daemon.controller.act_while(election.holds_lease)
                await daemon.start()
            except (StorageError, OSError) as exc:
                lease.cancel()
                raise ControllerStartError(str(exc)) from exc
            active[:] = [daemon]
            log.info(
                "controller %d active on %s (epoch %d)",
                config.node_id, ", ".join(config.listeners), election.epoch,
            )  # fmt: skip
            await _first(loop.create_task(deposed.wait()), loop.create_task(stop.wait()))
            active.clear()
            lease.cancel()
            if deposed.is_set():
                election.active = False
                log.error("controller %d deposed (epoch %d): resigning", config.node_id,
                          election.epoch)  # fmt: skip
                await daemon.resign()
            else:
                await daemon.stop()
    finally:
        if standby_server is not None:
            await standby_server.stop()
        await election.close()
    log.info("controller stopped")
