"""A broker's link to a controller quorum, on a real ZooKeeper with real processes: a deposed
controller that still listens answers NOT_CONTROLLER, and the broker moves on to the active
one at once (registration, and a forwarded admin request); a controller that does not answer
a forwarded request in time gets the client REQUEST_TIMED_OUT (Kafka's ForwardingManager),
not NOT_CONTROLLER (it may still apply the change)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.controller.store.zk_layout import PERSISTENT_PATHS
from kmeta.controller.store.zk_store import ZooKeeperStore
from kmeta.protocol.errors import ErrorCode
from tests.e2e.quorum import Quorum, create_topic_at
from tests.helpers import refuses, wait

pytestmark = pytest.mark.e2e


@pytest.fixture
def quorum(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(zookeeper, tmp_path)
    try:
        yield q
    finally:
        q.close()


async def _in_process_controller(
    q: Quorum, node: int, epoch: int, epoch_version: int
) -> ControllerDaemon:
    """Controller ``node`` in this process, on its quorum port, with the fence given. Nothing
    resigns it when that fence fails: it stays listening and answers NOT_CONTROLLER, as a
    deposed controller does until it resigns."""
    store = await asyncio.to_thread(ZooKeeperStore, q.zkc, epoch, epoch_version)
    config = ControllerConfig(
        data_dir=str(q.tmp / f"c{node}"),
        listeners=(f"CONTROLLER://127.0.0.1:{q.ctl_ports[node]}",),
        node_id=node,
        cluster_id=q.cluster_id,
        session_timeout_ms=6000,
    )
    os.makedirs(config.data_dir, exist_ok=True)
    daemon = ControllerDaemon(config, store)
    await daemon.start()
    return daemon


@pytest.mark.timeout(60)
async def test_a_deposed_controller_answering_not_controller_does_not_hold_a_broker(
    quorum: Quorum,
) -> None:
    q = quorum
    q.start_controller(3002)
    await asyncio.to_thread(wait, lambda: q.active()[0] == 3002, 30, "controller 3002 active")
    # 3001, first in the broker's list: its fence is not /controller_epoch's version, so its
    # every write fails and is answered NOT_CONTROLLER
    data, stat = await asyncio.to_thread(q.zkc.get, "/controller_epoch")
    deposed = await _in_process_controller(q, 3001, int(data) - 1, stat.version + 1000)
    try:
        q.start_broker(1)
        started = time.monotonic()
        await asyncio.to_thread(
            wait, lambda: q.zkc.exists("/brokers/ids/1") is not None, 15, "broker 1 registered"
        )
        took = time.monotonic() - started
        log = (q.tmp / "broker-1.log").read_text()
        assert "answered NOT_CONTROLLER; moving on" in log
        assert "refused the registration" not in log  # not a configuration error
        assert not refuses(q.ctl_ports[3001])  # 3001 still listens: it did not hold broker 1
        assert took < 10, took
        # and the broker serves: a topic created through it, by 3002
        assert await create_topic_at(q.client_ports[1], "after") == ErrorCode.NONE
        assert await asyncio.to_thread(q.zkc.exists, "/brokers/topics/after") is not None
    finally:
        await deposed.stop()


@pytest.mark.timeout(60)
async def test_a_forwarded_request_answered_not_controller_is_sent_to_the_new_controller(
    quorum: Quorum,
) -> None:
    q = quorum
    # 3001 (in this process) elected as a controller's election does: /controller and a
    # versioned raise of /controller_epoch
    for path in (*PERSISTENT_PATHS, "/admin", "/config", "/controller_epoch"):
        await asyncio.to_thread(q.zkc.ensure_path, path)
    epoch, epoch_version = await asyncio.to_thread(q.elect, 3001)
    controller = await _in_process_controller(q, 3001, epoch, epoch_version)
    try:
        q.start_broker(1)
        await asyncio.to_thread(
            wait, lambda: q.zkc.exists("/brokers/ids/1") is not None, 15, "broker 1 registered"
        )
        assert await create_topic_at(q.client_ports[1], "before") == ErrorCode.NONE
        # 3002 stands by, then takes over once /controller goes (as at 3001's session expiry);
        # 3001 is deposed but still listens, and the broker's forwarding is still to it
        q.start_controller(3002)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(q.zkc.delete, "/controller")
        await asyncio.to_thread(wait, lambda: q.active()[0] == 3002, 15, "3002 active")
        # 3001 answers NOT_CONTROLLER; the broker sends it again to 3002, which applies it
        assert await create_topic_at(q.client_ports[1], "after") == ErrorCode.NONE
        assert await asyncio.to_thread(q.zkc.exists, "/brokers/topics/after") is not None
        assert not refuses(q.ctl_ports[3001])  # (3001 was there to answer NOT_CONTROLLER)
        # a controlled shutdown answered NOT_CONTROLLER there is made at 3002
        q.procs["broker-1"].send_signal(signal.SIGTERM)
        await asyncio.to_thread(q.procs["broker-1"].wait, 20)
        log = (q.tmp / "broker-1.log").read_text()
        assert "controlled shutdown: NONE" in log, log[-3000:]
    finally:
        await controller.stop()


@pytest.mark.timeout(60)
async def test_a_forward_unanswered_in_time_is_request_timed_out(quorum: Quorum) -> None:
    q = quorum
    q.start_controller(3001)
    await asyncio.to_thread(wait, lambda: q.active()[0] == 3001, 30, "controller 3001 active")
    q.start_broker(1)
    await asyncio.to_thread(
        wait, lambda: q.zkc.exists("/brokers/ids/1") is not None, 15, "broker 1 registered"
    )
    assert await create_topic_at(q.client_ports[1], "before") == ErrorCode.NONE
    pid = q.procs["controller-3001"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        # the broker waits timeout_ms + its 5 s margin, then answers REQUEST_TIMED_OUT: the
        # controller may still apply the change, so NOT_CONTROLLER would mislead the client
        code = await create_topic_at(q.client_ports[1], "stalled", timeout_ms=1000)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert code == ErrorCode.REQUEST_TIMED_OUT
    assert 5.5 < took < 15, took
