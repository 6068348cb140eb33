"""`kmeta cluster up --controllers 3`: a controller quorum on a ZooKeeper server the command
runs itself; kill -9 of the active controller leaves a cluster that still creates topics."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kmeta.cli.zookeeper import ZOOKEEPER_JAR
from kmeta.controller.zk_election import active_controller
from tests.cli.test_cluster_up_ready import _wait_file

pytestmark = pytest.mark.e2e


def _free_base_port(brokers: int, controllers: int) -> int:
    """A base port whose whole plan is free now (brokers from +0/+100/+200, controllers from
    +300/+1000)."""
    for _ in range(50):
        base = random.randrange(20_000, 40_000)
        wanted = [base + off + i for off in (0, 100, 200) for i in range(brokers)]
        wanted += [base + off + j for off in (300, 1000) for j in range(controllers)]
        socks: list[socket.socket] = []
        try:
            for port in wanted:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port range")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _create(admin: AdminClient, name: str, timeout_s: float = 20) -> None:
    """Create ``name``, again while the brokers answer NOT_CONTROLLER (they have not yet
    heard of the new active controller), as Kafka's admin client retries it."""
    deadline = time.monotonic() + timeout_s
    while True:
        future = admin.create_topics([NewTopic(name, 2, 2)], request_timeout=15)[name]
        try:
            future.result(timeout=20)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@pytest.mark.timeout(90)
@pytest.mark.skipif(not ZOOKEEPER_JAR.exists(), reason="ZooKeeper is not installed")
def test_quorum_survives_kill_9_of_the_active_controller(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--controllers", "3", "--brokers", "2",
         "--base-port", str(_free_base_port(2, 3)), "--data-dir", str(tmp_path / "data"),
         "--zookeeper-session-timeout-ms", "2000", "--ready-file", str(ready),
         "--exit-after", "15"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = _wait_file(ready, proc, 30)
        pids = {c["node_id"]: c["pid"] for c in info["controllers"]}
        assert sorted(pids) == [3001, 3002, 3003]
        zk = KazooClient(hosts=info["zookeeper"])
        zk.start(timeout=10)
        try:
            admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"], "retries": 50})
            _create(admin, "before")
            node, epoch = active_controller(zk)
            assert node in pids
            os.kill(pids[node], signal.SIGKILL)
            deadline = time.monotonic() + 20
            while active_controller(zk)[0] in (None, node):
                assert time.monotonic() < deadline, "no standby took over"
                time.sleep(0.05)
            assert active_controller(zk)[1] > epoch
            _create(admin, "after")
            assert {"before", "after"} <= set(admin.list_topics(timeout=10).topics)
        finally:
            zk.stop()
            zk.close()
        out, err = proc.communicate(timeout=60)  # --exit-after stops it by itself
    finally:
        if proc.poll() is None:  # SIGTERM: it stops its daemons (own sessions) and ZooKeeper
            proc.terminate()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"controller {node} (pid {pids[node]}) exited with -9" in err
    assert "the controller quorum carries on with 2 of 3" in out
    assert "cluster stopped" in out
    # nothing left behind: no controller, no broker, no ZooKeeper (each names the data dir)
    assert not [pid for pid in pids.values() if _alive(pid)]
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "data")], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
    assert not ready.exists()


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--zookeeper", "127.0.0.1:2181"], "--zookeeper"),  # one controller: no quorum to join
        (["--controllers", "0"], "--controllers"),
        (["--controllers", "3", "--zookeeper-session-timeout-ms", "0"], "--zookeeper-session"),
    ],
)
def test_bad_quorum_flags_are_one_line_errors(args: list[str], hint: str) -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "kmeta", "cluster", "up", *args],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert bad.returncode == 2, bad.stderr
    assert hint in bad.stderr
    assert "Traceback" not in bad.stderr
