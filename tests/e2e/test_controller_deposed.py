"""A quorum controller deposed behind its back, on a real ZooKeeper with real processes:
fenced by another controller's election (its next write fails the /controller_epoch check),
or cut off from ZooKeeper (a TCP proxy between them, SIGSTOPped)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.cli.zookeeper import LocalZooKeeper
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct
from tests.e2e.test_controller_quorum import Quorum, _wait

pytestmark = pytest.mark.e2e


def _refuses(port: int) -> bool:
    """Nothing listens on the port (a standby or resigned controller)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return True
    return False


async def _create_topic_at(port: int, name: str) -> int:
    """A CreateTopics sent straight to the controller at ``port``: its error code."""
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5.0)
    try:
        request = ct.CreateTopicsRequest(
            version=7,
            topics=(ct.CreatableTopic(name=name, num_partitions=2, replication_factor=1),),
            timeout_ms=5000,
        )
        answer = await conn.request(request, 10.0)
        return int(answer.topics[0].error_code)
    finally:
        conn.close()


@pytest.fixture
def one_controller(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[Quorum]:
    """Controller 3001 alone (active) and broker 1."""
    q = Quorum(zookeeper, tmp_path)
    try:
        q.start_controller(3001)
        _wait(lambda: q.active()[0] == 3001, 30, "controller 3001 active")
        q.start_broker(1)
        _wait(lambda: len(q.admin().list_topics(timeout=5).brokers) == 1, 30, "broker 1")
        yield q
    finally:
        q.close()


def _elect_another(q: Quorum, node: int) -> int:
    """What another controller's election does (one multi-op): /controller taken over by
    ``node``, /controller_epoch raised with a versioned write. The new epoch."""
    data, stat = q.zkc.get("/controller_epoch")
    epoch = int(data) + 1
    tx = q.zkc.transaction()
    tx.delete("/controller")
    tx.create("/controller", json.dumps({"version": 1, "brokerid": node}).encode(), ephemeral=True)
    tx.set_data("/controller_epoch", str(epoch).encode(), version=stat.version)
    assert not any(isinstance(r, Exception) for r in tx.commit())
    return epoch


@pytest.mark.timeout(90)
async def test_a_fenced_write_is_answered_not_controller_and_the_controller_resigns(
    one_controller: Quorum,
) -> None:
    q = one_controller
    port = q.ctl_ports[3001]
    assert await _create_topic_at(port, "before") == ErrorCode.NONE
    new_epoch = _elect_another(q, 99)

    # its next write fails the /controller_epoch check: NOT_CONTROLLER (Kafka's
    # ControllerMovedException), not KAFKA_STORAGE_ERROR; nothing of it is in ZooKeeper
    assert await _create_topic_at(port, "fenced") == ErrorCode.NOT_CONTROLLER
    assert q.zkc.exists("/brokers/topics/fenced") is None
    # it resigns at once: its listener closes, and it stands by (another holds /controller)
    started = time.monotonic()
    await asyncio.to_thread(_wait, lambda: _refuses(port), 5, "the fenced controller's port")
    assert time.monotonic() - started < 5
    log = (q.tmp / "controller-3001.log").read_text()
    assert "resigning" in log
    assert "fenced (/controller_epoch changed)" in log
    assert q.active() == (99, new_epoch)

    # it pushes nothing more: broker 2 cannot register anywhere, and broker 1 never hears of
    # it (an active controller would send broker 1 an UpdateMetadata naming broker 2)
    q.start_broker(2)
    await asyncio.sleep(3.0)
    md = await asyncio.to_thread(q.admin().list_topics, timeout=10)
    assert sorted(md.brokers) == [1]
    assert "fenced" not in md.topics
    assert "before" in md.topics
    assert q.zkc.exists("/brokers/ids/2") is None
    assert q.active() == (99, new_epoch)
