"""Fault injection: the controller's updates to one broker delayed, dropped or paused.

An in-process cluster (real controller, three real brokers with controller links, loopback);
admin requests go straight to the controller's listener. The other brokers must stay current
while the faulted one serves stale metadata, exactly as the fault says.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kmeta.cli.cluster.cluster import ClusterConfig, controller_argv
from kmeta.cli.main import cli
from kmeta.controller.channel.faults import Fault, FaultInjector, parse_fault
from kmeta.controller.config import ControllerConfig
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from tests.controller.helpers import (
    InProcessCluster,
    start_cluster,
    start_controller,
    wait_until,
)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    c = await start_cluster(tmp_path / "controller", state_change_logs=tmp_path)
    try:
        yield c
    finally:
        c.controller.controller.faults.clear()
        await c.stop()


async def admin(c: InProcessCluster, request: Any) -> Any:
    conn = await KafkaConnection.open("127.0.0.1", c.controller.port)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


def create(name: str, partitions: int = 1, timeout_ms: int = 5000) -> Any:
    topic = ct.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    return ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=timeout_ms)


def has(c: InProcessCluster, broker_id: int, name: str, partitions: int = 1) -> bool:
    return c.brokers[broker_id].cache.snapshot.partition_count(name) == partitions


# -- parsing --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("broker=2,delay=500ms", (2, Fault(delay_s=0.5))),
        ("broker=7,delay=2s", (7, Fault(delay_s=2.0))),
        ("delay=250, broker=1", (1, Fault(delay_s=0.25))),
        ("broker=3,drop", (3, Fault(drop=True))),
        ("broker=3,pause", (3, Fault(pause=True))),
    ],
)
def test_fault_specs_parse(spec: str, expected: tuple[int, Fault]) -> None:
    assert parse_fault(spec) == expected


@pytest.mark.parametrize(
    "spec",
    ["", "broker=2", "drop", "broker=x,drop", "broker=2,delay=fast", "broker=2,drop,pause",
     "broker=2,delay=-5ms", "broker=2,drop=1", "broker=2,wobble"],
)  # fmt: skip
def test_bad_fault_specs_are_refused(spec: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fault"):
        parse_fault(spec)
    with pytest.raises(ValueError, match="fault"):
        ControllerConfig(data_dir=str(tmp_path), faults=(spec,))


def test_the_cli_passes_faults_to_the_controller(tmp_path: Path, restore_logging: None) -> None:
    cfg = ClusterConfig(faults=("broker=2,delay=500ms", "broker=3,drop"))
    argv = controller_argv(cfg, tmp_path)
    faults = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--fault"]
    assert faults == ["broker=2,delay=500ms", "broker=3,drop"]
    runner = CliRunner()
    bad = runner.invoke(cli, ["cluster", "up", "--fault", "broker=2,sometimes"])
    assert bad.exit_code == 2
    assert "--fault" in bad.output
    bad = runner.invoke(cli, ["controller", "--data-dir", str(tmp_path), "--fault", "nonsense"])
    assert bad.exit_code == 2


async def test_faults_from_the_config_are_in_force_at_start(tmp_path: Path) -> None:
    daemon = await start_controller(tmp_path, faults=("broker=2,delay=300ms", "broker=3,pause"))
    try:
        assert daemon.controller.faults.active() == {
            2: Fault(delay_s=0.3),
            3: Fault(pause=True),
        }
    finally:
        await daemon.stop()


async def test_a_delay_is_latency_not_a_throttle() -> None:
    """A burst enqueued together leaves together, one delay later (the sender admits in order)."""
    faults = FaultInjector()
    faults.set(1, Fault(delay_s=0.2))
    enqueued = time.monotonic()
    admitted = [await faults.admit(1, enqueued) for _ in range(5)]
    elapsed = time.monotonic() - enqueued
    assert admitted == [True] * 5
    assert 0.2 <= elapsed < 0.6
    assert await faults.admit(2, time.monotonic())  # other brokers are untouched


async def test_changing_a_fault_wakes_a_waiting_sender() -> None:
    faults = FaultInjector()
    faults.set(1, Fault(pause=True))
    waiting = asyncio.ensure_future(faults.admit(1, time.monotonic()))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    faults.set(1, Fault(drop=True))
    assert await asyncio.wait_for(waiting, 1.0) is False
    faults.clear()
    assert await faults.admit(1, time.monotonic())
    assert faults.counts == {(1, "paused"): 1, (1, "dropped"): 1}


# -- behaviour ------------------------------------------------------------------------------------
async def test_a_delayed_broker_sees_a_new_topic_after_the_others(
    cluster: InProcessCluster,
) -> None:
    cluster.controller.controller.faults.set(2, Fault(delay_s=0.6))
    started = time.monotonic()
    answer = asyncio.ensure_future(admin(cluster, create("slow")))
    await wait_until(lambda: has(cluster, 1, "slow") and has(cluster, 3, "slow"), 5.0)
    assert not has(cluster, 2, "slow")  # stale while 1 and 3 are current
    response = await answer
    # the propagation barrier waited for the delayed broker: the answer means "everywhere"
    assert response.topics[0].error_code == 0
    assert has(cluster, 2, "slow")
    assert time.monotonic() - started >= 0.6
    assert cluster.controller.controller.faults.counts[2, "delayed"] >= 1


async def test_a_dropped_broker_stays_stale_until_cleared(cluster: InProcessCluster) -> None:
    faults = cluster.controller.controller.faults
    faults.set(2, Fault(drop=True))
    started = time.monotonic()
    response = await admin(cluster, create("lost", partitions=2))
    # the barrier does not wait for a broker whose updates are dropped
    assert response.topics[0].error_code == 0
    assert time.monotonic() - started < 3.0
    assert has(cluster, 1, "lost", 2)
    assert has(cluster, 3, "lost", 2)
    await asyncio.sleep(0.5)  # several heartbeats: broker 2 is alive, and still stale
    assert not has(cluster, 2, "lost", 2)
    assert cluster.controller.controller.state.is_alive(2)
    assert faults.counts[2, "dropped"] >= 1
    faults.clear(2)  # resync: broker 2 gets the full state
    await wait_until(lambda: has(cluster, 2, "lost", 2), 5.0)
    snap = cluster.brokers[2].cache.snapshot
    assert snap.topic_id("lost") == cluster.brokers[1].cache.snapshot.topic_id("lost")


async def test_a_paused_broker_gets_everything_in_order_on_resume(
    cluster: InProcessCluster, tmp_path: Path
) -> None:
    faults = cluster.controller.controller.faults
    faults.set(2, Fault(pause=True))
    # timeout_ms=0: answered without waiting for the barrier (a pause would hold it)
    for name in ("first", "second"):
        assert (await admin(cluster, create(name, timeout_ms=0))).topics[0].error_code == 0
    grow = cp.CreatePartitionsRequest(
        version=3,
        topics=(cp.CreatePartitionsTopic(name="first", count=3, assignments=None),),
        timeout_ms=0,
    )
    assert (await admin(cluster, grow)).results[0].error_code == 0
    await wait_until(lambda: has(cluster, 1, "first", 3) and has(cluster, 3, "second"), 5.0)
    await asyncio.sleep(0.3)
    assert not has(cluster, 2, "first")
    assert not has(cluster, 2, "second")
    resumed_ms = time.time() * 1000.0
    faults.clear(2)
    await wait_until(lambda: has(cluster, 2, "first", 3) and has(cluster, 2, "second"), 5.0)
    applied = [
        json.loads(line)
        for line in (tmp_path / "broker-2.log").read_text().splitlines()
        if line.strip()
    ]
    after = [e for e in applied if e["ts_ms"] >= resumed_ms and e["api_key"] == 6]
    topics = [t for e in after for t in e["topics"] if t in ("first", "second")]
    # first (1 partition), second, then first again (the 2 added partitions): enqueue order
    assert topics == ["first", "second", "first"]
    ids = [e["correlation_id"] for e in after]
    assert ids == sorted(ids)


async def test_a_pause_holds_the_barrier_until_resumed(cluster: InProcessCluster) -> None:
    faults = cluster.controller.controller.faults
    faults.set(3, Fault(pause=True))
    answer = asyncio.ensure_future(admin(cluster, create("held", timeout_ms=5000)))
    await wait_until(lambda: has(cluster, 1, "held") and has(cluster, 2, "held"), 5.0)
    await asyncio.sleep(0.2)
    assert not answer.done()
    faults.set(3, Fault(drop=True))  # switching to drop releases the barrier at once
    assert (await asyncio.wait_for(answer, 3.0)).topics[0].error_code == 0
    assert not has(cluster, 3, "held")
