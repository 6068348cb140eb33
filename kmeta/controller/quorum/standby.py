"""A controller of a quorum (``kmeta controller --zookeeper ...``): standby until elected,
then active with its state in ZooKeeper, standby again once deposed.

Each term is a fresh :class:`ControllerDaemon` on a fresh :class:`ZooKeeperStore`: elected,
it loads the state from ZooKeeper and runs Kafka's failover (the Startup event: full
UpdateMetadata and LeaderAndIsr to every live broker, pending deletions resumed). A standby
does not listen on the controller port, so brokers move on to the active controller.

Deposition: the ZooKeeper session suspended or lost, or a write refused by the
``/controller_epoch`` fence. The daemon resigns at once (events and senders first, then the
listeners), so it acts no more before another controller can be elected; nothing it did not
commit was acknowledged. Then it stands by again on the same process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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
from kmeta.controller.quorum.election import ControllerElection
from kmeta.controller.store.errors import StorageError
from kmeta.controller.store.zk_store import ZooKeeperStore

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


async def serve_quorum(config: ControllerConfig, ready: asyncio.Event | None = None) -> None:
    assert config.zookeeper is not None
    election = ControllerElection(
        config.zookeeper,
        config.node_id,
        config.zookeeper_session_timeout_ms / 1000.0,
        config.zookeeper_credential,
    )
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
    try:
        while not stop.is_set():
            elected = loop.create_task(election.elect())
            stopping = loop.create_task(stop.wait())
            await _first(elected, stopping)
            if stop.is_set():
                break
            deposed = asyncio.Event()
            election.on_deposed = lambda why, deposed=deposed: deposed.set()
            try:
                term_config, store = await _open_store(config, election, deposed)
                daemon = ControllerDaemon(term_config, store)
                await daemon.start()
            except (StorageError, OSError) as exc:
                raise ControllerStartError(str(exc)) from exc
            active[:] = [daemon]
            log.info(
                "controller %d active on %s (epoch %d)",
                config.node_id, ", ".join(config.listeners), election.epoch,
            )  # fmt: skip
            await _first(loop.create_task(deposed.wait()), loop.create_task(stop.wait()))
            active.clear()
            if deposed.is_set():
                election.active = False
                log.error("controller %d deposed (epoch %d): resigning", config.node_id,
                          election.epoch)  # fmt: skip
                await daemon.resign()
            else:
                await daemon.stop()
    finally:
        await election.close()
    log.info("controller stopped")
