"""A controller quorum on a real ZooKeeper with real processes: kill -9 of the active
controller during a stream of CreateTopics, SIGSTOP past the session timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from tests.e2e.quorum import Quorum, create_once_answered
from tests.helpers import wait

pytestmark = pytest.mark.e2e


@pytest.fixture
def quorum(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(zookeeper, tmp_path)
    try:
        for node in q.ctl_ports:
            q.start_controller(node)
        wait(lambda: q.active()[0] is not None, 30, "an active controller")
        for broker in q.client_ports:
            q.start_broker(broker)
        wait(lambda: len(q.admin().list_topics(timeout=5).brokers) == 2, 30, "two brokers")
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
            wait(lambda n=acked_before: len(stream.acked) >= n + 2, 30, "creations acknowledged")
            os.kill(quorum.procs[f"controller-{node}"].pid, signal.SIGKILL)
            quorum.procs[f"controller-{node}"].wait(timeout=10)
            # a standby takes over once the dead one's session expires, with a higher epoch
            wait(lambda old=node: quorum.active()[0] not in (None, old), 30, "a standby active")
            assert quorum.active()[1] == epoch + 1
            quorum.start_controller(node)  # back as a standby
            after = len(stream.acked)
            wait(lambda n=after: len(stream.acked) >= n + 2, 30, "creations after the failover")
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
    wait(lambda: len(quorum.zkc.get_children("/kmeta/controllers")) == 3, 20, "3 members")
    active, epoch = quorum.active()
    out = subprocess.run(
        [sys.executable, "-m", "kmeta", "status", "--zookeeper", quorum.zk.connect_string,
         "--zookeeper-credential-file", str(quorum.zk.credential_file), "--json"],
        capture_output=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    shown = json.loads(out)["quorum"]
    assert (shown["active"], shown["epoch"]) == (active, epoch)
    assert sorted(shown["standbys"]) == sorted(set(quorum.ctl_ports) - {active})
    text = subprocess.run(
        [sys.executable, "-m", "kmeta", "status", "--zookeeper", quorum.zk.connect_string,
         "--zookeeper-credential-file", str(quorum.zk.credential_file)],
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
        wait(lambda: quorum.active()[0] not in (None, node), 30, "a standby active")
        new_node, new_epoch = quorum.active()
        assert new_epoch == epoch + 1
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    log = quorum.tmp / f"controller-{node}.log"
    wait(lambda: "resigning" in log.read_text(), 20, "the old controller resigning")
    # it never acts again: creations go through the new controller, which stays active
    # (NOT_CONTROLLER while the brokers move on to the new controller: again)
    create_once_answered(quorum.admin(), NewTopic("after", 1, 1))
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
    wait(lambda: quorum.active()[0] is not None and quorum.active()[1] > epoch, 60, "re-election")
    create_once_answered(
        admin,
        NewTopic("after", 2, 2),
        60,
        (KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT),
        "no creation acknowledged after the restart",
    )
    topics = quorum.topics()
    assert (topics.get("before"), topics.get("after")) == (2, 2)
