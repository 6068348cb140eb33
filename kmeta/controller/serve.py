"""The controller process (``kmeta controller``): one controller on its own data dir, or a
controller of a quorum (``--zookeeper``: :mod:`kmeta.controller.quorum.standby`), until
SIGTERM/SIGINT.

Above both :mod:`kmeta.controller.daemon` (a ControllerDaemon's start and stop) and the
quorum's standby (which runs one daemon per term), as Kafka's ``Kafka.main`` is above the
server it starts.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import (
    ControllerDaemon,
    ControllerStartError,
    reload_faults,
    stop_on_signals,
)
from kmeta.controller.gc_schedule import SCHEDULE
from kmeta.controller.store.data_dir import DataDirError
from kmeta.controller.store.errors import StorageError

log = logging.getLogger(__name__)


async def serve(config: ControllerConfig, ready: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (a second signal forces exit). The process's full collections
    are paced by their cost (:mod:`kmeta.controller.gc_schedule`: at 2M partitions the
    default pace made creating them quadratic)."""
    SCHEDULE.install()
    try:
        await _serve(config, ready)
    finally:
        SCHEDULE.uninstall()


async def _serve(config: ControllerConfig, ready: asyncio.Event | None) -> None:
    if config.zookeeper is not None:
        from kmeta.controller.quorum.standby import serve_quorum  # (kazoo only for a quorum)

        await serve_quorum(config, ready)
        return
    try:
        daemon = ControllerDaemon(config)
        await daemon.start()
    except (DataDirError, StorageError, OSError) as exc:
        raise ControllerStartError(str(exc)) from exc
    log.info(
        "controller listening on %s (epoch %d)",
        ", ".join(config.listeners),
        daemon.controller.epoch,
    )
    for spec in config.faults:
        log.warning("fault injection on: %s", spec)
    stop = stop_on_signals()
    if config.fault_file is not None:
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGHUP, reload_faults, daemon.controller
        )
    if ready is not None:
        ready.set()
    # (a store older than what the brokers hold: kmeta.controller.brokers.stale_store)
    refused = asyncio.ensure_future(daemon.controller.refused.wait())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait((refused, stopped), return_when=asyncio.FIRST_COMPLETED)
    refused.cancel()
    stopped.cancel()
    await daemon.stop()
    if daemon.controller.store_guard.refusal is not None:
        raise ControllerStartError(daemon.controller.store_guard.refusal)
    log.info("controller stopped")
