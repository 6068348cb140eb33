"""A controller quorum on a real ZooKeeper with real processes: kill -9 of the active
controller during a stream of CreateTopics, SIGSTOP past the session timeout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kmeta.cli.zookeeper import LocalZooKeeper
from kmeta.controller.zk_election import active_controller

pytestmark = pytest.mark.e2e

#: short for a fast test, long enough for a loaded machine (kazoo reads time out at 2/3 of it)
ZK_SESSION_MS = 4000


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _wait(cond: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


class Quorum:
    """Three controllers (node ids 3001-3003) and two brokers, as processes."""

    def __init__(self, zk: LocalZooKeeper, tmp: Path) -> None:
        self.zk, self.tmp = zk, tmp
        self.ctl_ports = dict(zip((3001, 3002, 3003), _free_ports(3), strict=True))
        self.client_ports = dict(zip((1, 2), _free_ports(2), strict=True))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.cluster_id = "quorum-test-cluster"
        self.zkc = KazooClient(hosts=zk.connect_string)
        self.zkc.start(timeout=30)  # (a loaded machine: the JVM has only just started)

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.tmp / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "kmeta", *argv, "--log-level", "INFO"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def start_controller(self, node: int, zookeeper: str | None = None) -> None:
        self._spawn(f"controller-{node}", [
            "controller", "--zookeeper", zookeeper or self.zk.connect_string,
            "--node-id", str(node),
            "--listeners", f"CONTROLLER://127.0.0.1:{self.ctl_ports[node]}",
            "--data-dir", str(self.tmp / f"c{node}"), "--cluster-id", self.cluster_id,
            "--zookeeper-session-timeout-ms", str(ZK_SESSION_MS), "--session-timeout-ms", "6000",
        ])  # fmt: skip

    def start_broker(self, broker: int, *extra: str) -> None:
        control = _free_ports(1)[0]
        self._spawn(f"broker-{broker}", [
            "broker", "--broker-id", str(broker),
            "--listeners", f"PLAINTEXT://127.0.0.1:{self.client_ports[broker]},"
                           f"CONTROL://127.0.0.1:{control}",
            "--controller", ",".join(f"127.0.0.1:{p}" for p in self.ctl_ports.values()),
            "--heartbeat-interval-ms", "250", "--cluster-id", self.cluster_id, *extra,
        ])  # fmt: skip

    def active(self) -> tuple[int | None, int]:
        return active_controller(self.zkc)

    def admin(self) -> AdminClient:
        servers = ",".join(f"127.0.0.1:{p}" for p in self.client_ports.values())
        return AdminClient({"bootstrap.servers": servers, "retries": 50})

    def topics(self) -> dict[str, int]:
        md = self.admin().list_topics(timeout=10)
        return {name: len(t.partitions) for name, t in md.topics.items()}

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self.zkc.stop()
        self.zkc.close()


@pytest.fixture
def quorum(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(zookeeper, tmp_path)
    try:
        for node in q.ctl_ports:
            q.start_controller(node)
        _wait(lambda: q.active()[0] is not None, 30, "an active controller")
        for broker in q.client_ports:
            q.start_broker(broker)
        _wait(lambda: len(q.admin().list_topics(timeout=5).brokers) == 2, 30, "two brokers")
        yield q
    finally:
        q.close()


class CreateStream(threading.Thread):
    """Creates topics one after another through the brokers; remembers the acknowledged."""

    def __init__(self, quorum: Quorum) -> None:
        super().__init__(daemon=True)
        self.admin = quorum.admin()
        self.acked: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            name = f"t{n}"
            n += 1
            future = self.admin.create_topics(
                [NewTopic(name, 3, 2)], operation_timeout=10, request_timeout=15
            )[name]
            try:
                future.result(timeout=30)
            except Exception:
                continue  # not acknowledged: may or may not exist, never partial
            self.acked.append(name)


@pytest.mark.timeout(180)
def test_kill_9_of_the_active_controller_during_creations_loses_nothing(quorum: Quorum) -> None:
    stream = CreateStream(quorum)
    stream.start()
    try:
        for _round in range(3):
            node, epoch = quorum.active()
            assert node is not None
            acked_before = len(stream.acked)
            _wait(lambda n=acked_before: len(stream.acked) >= n + 2, 30, "creations acknowledged")
            os.kill(quorum.procs[f"controller-{node}"].pid, signal.SIGKILL)
            quorum.procs[f"controller-{node}"].wait(timeout=10)
            # a standby takes over once the dead one's session expires, with a higher epoch
            _wait(lambda old=node: quorum.active()[0] not in (None, old), 30, "a standby active")
            assert quorum.active()[1] == epoch + 1
            quorum.start_controller(node)  # back as a standby
            after = len(stream.acked)
            _wait(lambda n=after: len(stream.acked) >= n + 2, 30, "creations after the failover")
    finally:
        stream.stop.set()
        stream.join(timeout=60)
    topics = quorum.topics()
    missing = [t for t in stream.acked if t not in topics]
    assert not missing, f"acknowledged topics lost: {missing}"
    partial = {t: n for t, n in topics.items() if n != 3}
    assert not partial, f"partial topics: {partial}"

    # kmeta status names the active controller, the standbys (the killed ones came back as
    # standbys) and the epoch
    _wait(lambda: len(quorum.zkc.get_children("/kmeta/controllers")) == 3, 20, "3 members")
    active, epoch = quorum.active()
    out = subprocess.run(
        [sys.executable, "-m", "kmeta", "status", "--zookeeper", quorum.zk.connect_string,
         "--json"],
        capture_output=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    shown = json.loads(out)["quorum"]
    assert (shown["active"], shown["epoch"]) == (active, epoch)
    assert sorted(shown["standbys"]) == sorted(set(quorum.ctl_ports) - {active})
    text = subprocess.run(
        [sys.executable, "-m", "kmeta", "status", "--zookeeper", quorum.zk.connect_string],
        capture_output=True, timeout=60, check=True, text=True,
    ).stdout  # fmt: skip
    assert f"controller quorum: active {active}, epoch {epoch}, standbys" in text


@pytest.mark.timeout(120)
def test_sigstop_past_the_session_timeout_deposes_the_active_controller(quorum: Quorum) -> None:
    node, epoch = quorum.active()
    assert node is not None
    proc = quorum.procs[f"controller-{node}"]
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        _wait(lambda: quorum.active()[0] not in (None, node), 30, "a standby active")
        new_node, new_epoch = quorum.active()
        assert new_epoch == epoch + 1
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    log = quorum.tmp / f"controller-{node}.log"
    _wait(lambda: "resigning" in log.read_text(), 20, "the old controller resigning")
    # it never acts again: creations go through the new controller, which stays active
    admin = quorum.admin()
    deadline = time.monotonic() + 30
    while True:  # NOT_CONTROLLER while the brokers move on to the new controller: again
        try:
            admin.create_topics([NewTopic("after", 1, 1)])["after"].result(timeout=30)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
        assert time.monotonic() < deadline, "brokers never reached the new controller"
        time.sleep(0.2)
    assert quorum.topics().get("after") == 1
    assert quorum.active() == (new_node, new_epoch)
    # nothing was written by the old epoch after it: every partition state is the new one's
    state = quorum.zkc.get("/brokers/topics/after/partitions/0/state")[0]
    assert b'"controller_epoch":%d' % new_epoch in state


@pytest.mark.timeout(120)
def test_zookeeper_restarted_the_controllers_reconnect_and_the_cluster_carries_on(
    quorum: Quorum,
) -> None:
    admin = quorum.admin()
    admin.create_topics([NewTopic("before", 2, 2)])["before"].result(timeout=30)
    epoch = quorum.active()[1]
    quorum.zk.stop()  # (kill -9; its data dir stays)
    time.sleep(1.0)
    quorum.zk.start()  # same port, same data
    # the active controller resigned when its connection was suspended; one is elected again
    _wait(lambda: quorum.active()[0] is not None and quorum.active()[1] > epoch, 60, "re-election")
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic("after", 2, 2)])["after"].result(timeout=30)
            break
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT):
                raise
        assert time.monotonic() < deadline, "no creation acknowledged after the restart"
        time.sleep(0.2)
    topics = quorum.topics()
    assert (topics.get("before"), topics.get("after")) == (2, 2)
