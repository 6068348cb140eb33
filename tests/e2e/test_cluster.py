"""A real cluster (controller + 3 broker processes) driven by real Kafka admin clients.

Each test starts its own processes on OS-picked free ports with a 1500 ms session timeout.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

from kmeta.protocol.messages import update_metadata as um
from tests.helpers import free_ports

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

SESSION_TIMEOUT_MS = 1500


class Cluster:
    def __init__(self, data_dir: Path, brokers: int = 3) -> None:
        self.data_dir = data_dir
        ports = free_ports(1 + 2 * brokers)
        self.controller_port = ports[0]
        self.client_ports = {i: ports[i] for i in range(1, brokers + 1)}
        self.control_ports = {i: ports[brokers + i] for i in range(1, brokers + 1)}
        self.controller: subprocess.Popen[bytes] | None = None
        self.brokers: dict[int, subprocess.Popen[bytes]] = {}

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "kmeta", *args, "--log-level", "WARNING"],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )

    def start_controller(self) -> None:
        self.controller = self._spawn(
            "controller",
            "--listeners", f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "--data-dir", str(self.data_dir / "controller"),
            "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
        )  # fmt: skip

    def start_broker(self, i: int) -> None:
        self.brokers[i] = self._spawn(
            "broker",
            "--broker-id", str(i),
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{self.client_ports[i]},CONTROL://127.0.0.1:{self.control_ports[i]}",
            "--controller", f"127.0.0.1:{self.controller_port}",
            "--heartbeat-interval-ms", "250",
            "--state-change-log", str(self.data_dir / f"broker-{i}.log"),
        )  # fmt: skip

    def start(self) -> None:
        self.start_controller()
        for i in self.client_ports:
            self.start_broker(i)
        for i in self.client_ports:
            wait_for(
                lambda i=i: len(metadata(self.client_ports[i]).brokers) == len(self.client_ports),
                20,
            )

    def stop(self) -> None:
        procs = [*self.brokers.values(), self.controller]
        for p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            if p is not None:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def bootstrap(self, i: int = 1) -> str:
        return f"127.0.0.1:{self.client_ports[i]}"

    def db(self, sql: str) -> list[tuple]:
        conn = sqlite3.connect(self.data_dir / "controller" / "controller.db")
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()


def metadata(port: int, timeout: float = 5.0):
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=timeout)


def wait_for(cond, timeout_s: float, interval_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except Exception as exc:  # not up yet
            last_exc = exc
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s} s (last error: {last_exc!r})")


def leaders(md, topic: str) -> dict[int, int]:
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_admin_clients_create_then_every_broker_serves_it_at_once(cluster):
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(2), request_timeout_ms=10000)
    try:
        kadmin.create_topics(
            [KNewTopic("from-kafka-python", num_partitions=10, replication_factor=3)]
        )
        for port in cluster.client_ports.values():  # right after the call returned
            md = metadata(port)
            assert md.topics["from-kafka-python"].error is None
            assert sorted(leaders(md, "from-kafka-python")) == list(range(10))
            assert all(
                leader in cluster.client_ports
                for leader in leaders(md, "from-kafka-python").values()
            )
            assert md.controller_id in cluster.client_ports  # a live broker

        cadmin = AdminClient({"bootstrap.servers": cluster.bootstrap(3)})
        cadmin.create_topics([NewTopic("from-confluent", 10, 3)])["from-confluent"].result(10)
        for port in cluster.client_ports.values():
            md = metadata(port)
            assert len(md.topics["from-confluent"].partitions) == 10
            assert all(
                len(p.isrs) == 3 and p.leader > 0
                for p in md.topics["from-confluent"].partitions.values()
            )

        kadmin.delete_topics(["from-kafka-python"])
        cadmin.delete_topics(["from-confluent"])["from-confluent"].result(10)
        for port in cluster.client_ports.values():
            md = metadata(port)
            assert "from-kafka-python" not in md.topics
            assert "from-confluent" not in md.topics
    finally:
        kadmin.close()


def test_dead_broker_loses_leaderships_then_rejoins_with_new_epoch(cluster):
    cadmin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    cadmin.create_topics([NewTopic("t", 10, 3)])["t"].result(10)
    before = leaders(metadata(cluster.client_ports[1]), "t")
    led_by_2 = [p for p, leader in before.items() if leader == 2]
    assert led_by_2
    (old_epoch,) = cluster.db("SELECT epoch FROM brokers WHERE broker_id = 2")[0]

    cluster.brokers[2].send_signal(signal.SIGKILL)
    cluster.brokers[2].wait()
    killed = time.monotonic()

    def moved() -> bool:
        for i in (1, 3):
            md = metadata(cluster.client_ports[i])
            for p in led_by_2:
                part = md.topics["t"].partitions[p]
                if part.leader not in (1, 3) or 2 in part.isrs:
                    return False
        return True

    wait_for(moved, SESSION_TIMEOUT_MS / 1000 + 1.0)
    assert time.monotonic() - killed <= SESSION_TIMEOUT_MS / 1000 + 1.0
    md = metadata(cluster.client_ports[3])
    assert 2 not in md.brokers
    for p in led_by_2:  # new leader came from the ISR, and 2 is listed offline
        assert md.topics["t"].partitions[p].leader in md.topics["t"].partitions[p].isrs

    cluster.start_broker(2)

    def same_view() -> bool:
        views = []
        for port in cluster.client_ports.values():
            m = metadata(port)
            views.append(
                (
                    sorted(m.brokers),
                    {p.id: (p.leader, tuple(p.isrs)) for p in m.topics["t"].partitions.values()},
                )
            )
        return len(m.brokers) == 3 and views[0] == views[1] == views[2]

    wait_for(same_view, 10)
    (new_epoch,) = cluster.db("SELECT epoch FROM brokers WHERE broker_id = 2")[0]
    assert new_epoch > old_epoch


def test_controller_kill9_loses_nothing_and_old_epoch_is_fenced(cluster):
    cadmin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    names = [f"durable-{i}" for i in range(5)]
    for f in cadmin.create_topics([NewTopic(n, 3, 2) for n in names]).values():
        f.result(10)
    (old_epoch,) = cluster.db("SELECT value FROM meta WHERE key = 'controller_epoch'")[0]
    assert cluster.controller is not None
    cluster.controller.send_signal(signal.SIGKILL)
    cluster.controller.wait()

    cluster.start_controller()
    wait_for(
        lambda: (
            cluster.db("SELECT value FROM meta WHERE key = 'controller_epoch'")[0][0] > old_epoch
        ),
        10,
    )
    assert {r[0] for r in cluster.db("SELECT name FROM topics")} >= set(names)

    def applied_new_epoch(i: int) -> bool:
        lines = (cluster.data_dir / f"broker-{i}.log").read_text().splitlines()
        return any(json.loads(line)["controller_epoch"] > old_epoch for line in lines)

    for i in cluster.client_ports:
        wait_for(lambda i=i: applied_new_epoch(i), 10)
        md = metadata(cluster.client_ports[i])
        assert set(names) <= set(md.topics)

    # a request stamped with the old controller epoch is refused
    import asyncio

    from kmeta.net.connection import KafkaConnection

    async def stale() -> int:
        conn = await KafkaConnection.open("127.0.0.1", cluster.control_ports[1])
        try:
            request = um.UpdateMetadataRequest(
                version=8, controller_id=3000, controller_epoch=old_epoch
            )
            return (await conn.request(request, 5)).error_code
        finally:
            conn.close()

    assert asyncio.run(stale()) == 11  # STALE_CONTROLLER_EPOCH

    # and the restarted controller keeps working
    cadmin.create_topics([NewTopic("after-restart", 2, 3)])["after-restart"].result(10)
    for port in cluster.client_ports.values():
        assert "after-restart" in metadata(port).topics
    assert os.path.exists(cluster.data_dir / "controller" / "state-change.log")
