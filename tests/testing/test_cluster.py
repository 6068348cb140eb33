"""kmeta.testing.Cluster: real daemons started, driven and torn down through the handle."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kmeta.cli.cluster.launch import DaemonExited
from kmeta.net.tls import TlsConfig
from kmeta.testing import Cluster, KafkaRequestError
from tests.hardening.certs import Authority
from tests.helpers import gone

pytestmark = pytest.mark.e2e


def _pids(cluster: Cluster) -> list[int]:
    return [p.pid for p in cluster._processes._procs.values()]


def test_starts_serves_and_leaves_nothing_behind(tmp_path: Path) -> None:
    with Cluster(3, parent_dir=tmp_path, racks=["a", "b"], partitions=4) as cluster:
        data_dir = cluster.data_dir
        assert data_dir is not None
        assert data_dir.parent == tmp_path
        pids = _pids(cluster)
        assert len(pids) == 4
        ports = [int(s.rsplit(":", 1)[1]) for s in cluster.bootstrap_servers.split(",")]
        assert len(set(ports)) == 3
        # served at once, to any Kafka client: every broker lists every broker with its rack
        md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=5)
        assert sorted(md.brokers) == [1, 2, 3]
        view = cluster.metadata(2)
        assert {i: rack for i, (_, _, rack) in view.brokers.items()} == {1: "a", 2: "b", 3: "a"}
        cluster.create_topic("defaults")  # the controller's num.partitions
        assert len(cluster.metadata(3).topics["defaults"]) == 4
    assert all(gone(pid) for pid in pids)
    assert not data_dir.exists()


def test_brokers_keep_their_records_in_their_state_dirs_and_auto_create_topics(tmp_path: Path) -> None:
    """Each broker's logs are in <data dir>/broker-<id>/logs: killed (-9) and started again, the
    broker serves the records it acknowledged. A producer's unknown topic is created with the
    cluster's ``partitions`` and ``replication_factor``; ``auto_create_topics=False`` leaves it
    unknown."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with Cluster(2, parent_dir=tmp_path, partitions=2, replication_factor=2) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(10):
            producer.produce("kept", b"%d" % i, partition=i % 2)
        assert producer.flush(20) == 0
        served = cluster.metadata(1).topics["kept"]  # auto-created: 2 partitions x 2 replicas
        assert sorted((p, len(s.replicas)) for p, s in served.items()) == [(0, 2), (1, 2)]
        assert cluster.data_dir is not None
        for leader in {s.leader for s in served.values()}:
            logs = cluster.data_dir / f"broker-{leader}" / "logs"
            assert {f"kept-{p}" for p, s in served.items() if s.leader == leader} <= {d.name for d in logs.iterdir()}
            cluster.restart_broker(leader, kill=True)
        for p, s in served.items():  # (back in the ISR once caught up: then it can lead again)
            _await_in_isr(cluster, "kept", p, s.replicas[0])
        cluster.elect_preferred("kept")  # (leaderships back on the restarted brokers' logs)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("kept", p, 0) for p in (0, 1)])
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                got += [m.value() for m in consumer.consume(10 - len(got), timeout=1) if m.error() is None]
        finally:
            consumer.close()
        assert sorted(got, key=int) == [b"%d" % i for i in range(10)]
    with Cluster(1, parent_dir=tmp_path, auto_create_topics=False) as cluster:
        md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic="nope", timeout=5)
        assert md.topics["nope"].error is not None
        assert md.topics["nope"].error.name() == "UNKNOWN_TOPIC_OR_PART"


def test_a_failing_body_still_stops_everything(tmp_path: Path) -> None:
    cluster = Cluster(1, parent_dir=tmp_path)
    with pytest.raises(ZeroDivisionError), cluster:
        1 / 0  # noqa: B018
    assert cluster.data_dir is not None
    assert all(gone(pid) for pid in _pids(cluster))
    assert not cluster.data_dir.exists()


async def test_async_with_and_a_cancelled_start_leave_no_daemon(tmp_path: Path) -> None:
    async with Cluster(1, parent_dir=tmp_path) as cluster:
        assert sorted(await asyncio.to_thread(lambda: cluster.metadata(1).brokers)) == [1]
        pids = _pids(cluster)
    assert all(gone(pid) for pid in pids)

    starting = Cluster(2, parent_dir=tmp_path)

    async def enter() -> None:
        async with starting:
            raise AssertionError("entered a cancelled start")

    task = asyncio.create_task(enter())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(gone(pid) for pid in _pids(starting))
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240


def test_a_failed_start_says_why_in_the_daemons_words(tmp_path: Path) -> None:
    cluster = Cluster(2, log_level="LOUD", parent_dir=tmp_path)  # no daemon takes that level
    with pytest.raises(DaemonExited, match="exited with 2 while the cluster was starting") as info:
        cluster.start()
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert f"kmeta cluster data dir: {cluster.data_dir} (removed)" in note
    assert "--- broker-1, last 20 lines:" in note
    assert "Invalid value for '--log-level'" in note  # the daemon's own error line
    assert all(gone(pid) for pid in _pids(cluster))
    assert not any(tmp_path.iterdir())


def test_bad_options_say_so() -> None:
    with pytest.raises(ValueError, match="at least one broker"):
        Cluster(0)


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    with kmeta_cluster_factory(3, session_timeout_ms=1500) as c:
        yield c


def test_topic_admin_through_the_handle(cluster: Cluster) -> None:
    cluster.create_topic("orders", 3, 2)
    cluster.create_topic("placed", assignment=[[3, 1], [1, 2]])
    with pytest.raises(KafkaRequestError, match="TOPIC_ALREADY_EXISTS") as info:
        cluster.create_topic("orders", 3, 2)
    assert info.value.code == 36
    for i in cluster.broker_ids:  # the barrier: every broker has them when the call returns
        view = cluster.metadata(i)
        assert len(view.topics["orders"]) == 3
        assert view.topics["placed"][0].replicas == (3, 1)
        assert view.leader("placed", 1) == 1
    cluster.add_partitions("orders", 5)
    assert len(cluster.metadata(1).topics["orders"]) == 5
    cluster.delete_topic("orders")
    cluster.delete_topic("placed")
    assert not {"orders", "placed"} & set(cluster.metadata(2).topics)
    with pytest.raises(KafkaRequestError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        cluster.delete_topic("orders")


def test_kill_stop_and_restart_brokers(cluster: Cluster) -> None:
    cluster.create_topic("bounce", 6, 3)
    led_by_2 = [p for p, st in cluster.metadata(1).topics["bounce"].items() if st.leader == 2]
    assert led_by_2
    cluster.kill_broker(2)
    assert cluster.live_brokers == [1, 3]
    cluster.wait_converged(10)  # after the session timeout, 2 is fenced and lost its leaderships
    view = cluster.metadata(3)
    assert sorted(view.brokers) == [1, 3]
    assert all(view.leader("bounce", p) in (1, 3) for p in led_by_2)
    cluster.start_broker(2)
    assert sorted(cluster.metadata(2).brokers) == [1, 2, 3]

    led_by_3 = [p for p, st in cluster.metadata(1).topics["bounce"].items() if st.leader == 3]
    cluster.stop_broker(3)  # controlled: leaderships moved before the process exits
    view = cluster.metadata(1)
    assert all(view.leader("bounce", p) in (1, 2) for p in led_by_3)
    assert all(3 not in view.topics["bounce"][p].isr for p in view.topics["bounce"])
    cluster.restart_broker(1, kill=True)
    cluster.start_broker(3)
    cluster.wait_converged(10)
    assert sorted(cluster.metadata(3).brokers) == [1, 2, 3]
    with pytest.raises(RuntimeError, match="running"):
        cluster.start_broker(3)
    with pytest.raises(ValueError, match="no broker 9"):
        cluster.kill_broker(9)


def test_a_failed_restart_says_why_in_the_brokers_words(cluster: Cluster) -> None:
    cluster.kill_broker(2)
    taken = socket.socket()  # (its client port taken meanwhile: the restart cannot bind it)
    try:
        taken.bind(cluster.address(2))
        taken.listen()
        with pytest.raises(DaemonExited, match="broker-2 exited") as info:
            cluster.start_broker(2)
    finally:
        taken.close()
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert "--- broker-2, last 20 lines:" in note
    assert "address already in use" in note.lower()  # the broker's own error line
    cluster.start_broker(2)
    assert sorted(cluster.metadata(2).brokers) == [1, 2, 3]


def test_controller_stop_and_failover(cluster: Cluster) -> None:
    epoch = cluster.controller_status()["controller"]["epoch"]
    cluster.stop_controller()
    with pytest.raises(KafkaRequestError, match="NOT_CONTROLLER"):
        cluster.create_topic("while-down", 1, 1)
    assert sorted(cluster.metadata(1).brokers) == [1, 2, 3]  # brokers keep serving
    cluster.start_controller()
    assert cluster.controller_status()["controller"]["epoch"] > epoch
    cluster.create_topic("after-failover", 1, 3)
    assert "after-failover" in cluster.metadata(3).topics


def test_faults_applied_and_cleared_on_the_running_controller(cluster: Cluster) -> None:
    cluster.fault(2, delay=0.3)
    cluster.fault(3, drop=True)
    assert cluster.controller_status()["faults"] == {"2": "delay=300ms", "3": "drop"}
    cluster.create_topic("under-faults", 2, 3)  # answers once 1 and (delayed) 2 acked
    assert "under-faults" in cluster.metadata(2).topics
    assert "under-faults" not in cluster.metadata(3).topics  # dropped: stale
    with pytest.raises(TimeoutError, match="not converged"):
        cluster.wait_converged(0.5)
    cluster.clear_faults(2)
    assert cluster.controller_status()["faults"] == {"3": "drop"}
    cluster.stop_controller()  # a failover under a fault: it is read from the file at start
    cluster.start_controller()  # returns once the brokers registered (3 stays stale)
    assert cluster.controller_status()["faults"] == {"3": "drop"}
    cluster.clear_faults()
    cluster.wait_converged(10)  # the dropped broker was resynchronized
    assert "under-faults" in cluster.metadata(3).topics
    with pytest.raises(ValueError, match="exactly one"):
        cluster.fault(2, delay=1, pause=True)


def test_a_paused_broker_holds_updates_and_the_barrier_until_the_pause_ends(
    cluster: Cluster,
) -> None:
    cluster.fault(2, pause=True)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        created = pool.submit(cluster.create_topic, "held", 1, 3)
        time.sleep(1.0)
        assert not created.done()  # the barrier waits for broker 2's acknowledgement
        assert "held" in cluster.metadata(1).topics
        assert "held" not in cluster.metadata(2).topics  # held, not delivered
        cluster.clear_faults()  # the held updates go out in order
        created.result(10)
    assert cluster.metadata(2).topics["held"] == cluster.metadata(1).topics["held"]
    cluster.wait_converged(10)


def test_a_bad_fault_file_changes_nothing(cluster: Cluster) -> None:
    cluster.fault(2, pause=True)
    assert cluster.config.fault_file is not None
    Path(cluster.config.fault_file).write_text("broker=two,drop\n")
    cluster._processes._procs["controller"].send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "fault file not applied" not in cluster.log_tail("controller", 50):
        assert time.monotonic() < deadline, cluster.log_tail("controller", 50)
        time.sleep(0.02)
    assert "broker=two,drop" in cluster.log_tail("controller", 50)
    assert cluster.controller_status()["faults"] == {"2": "pause"}
    cluster.clear_faults()  # rewrites the file whole and signals again: applied
    assert cluster.controller_status()["faults"] == {}


def test_tls_client_listeners(tmp_path: Path) -> None:
    ca = Authority(tmp_path)
    pem = ca.issue("broker")
    tls = TlsConfig(certfile=pem.certfile, keyfile=pem.keyfile, cafile=ca.cafile)
    with Cluster(2, ssl=tls, parent_dir=tmp_path) as cluster:
        cluster.create_topic("secure", 2, 2)
        admin = AdminClient(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "security.protocol": "SSL",
                "ssl.ca.location": ca.cafile,
            }
        )
        assert "secure" in admin.list_topics(timeout=10).topics
        assert sorted(cluster.metadata(2).brokers) == [1, 2]  # the handle speaks TLS too
        del admin  # before the brokers go, or librdkafka logs its reconnects


def _await_in_isr(cluster: Cluster, topic: str, partition: int, broker: int) -> None:
    """A restarted broker rejoins an ISR once its leader saw it caught up (AlterPartition,
    issue 29), not at registration: wait for that (a preferred election needs it)."""
    deadline = time.monotonic() + 15
    while broker not in cluster.metadata(broker).topics[topic][partition].isr:
        assert time.monotonic() < deadline, f"broker {broker} not back in {topic}-{partition}'s ISR"
        time.sleep(0.05)


def test_elect_preferred_moves_leaderships_back(cluster: Cluster) -> None:
    cluster.create_topic("prefer", assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    cluster.stop_broker(1)
    assert cluster.metadata(2).leader("prefer", 0) == 2
    cluster.start_broker(1)
    assert cluster.metadata(1).leader("prefer", 0) == 2  # no automatic rebalance
    _await_in_isr(cluster, "prefer", 0, 1)
    assert cluster.elect_preferred("prefer") == [("prefer", 0)]
    assert all(cluster.metadata(i).leader("prefer", 0) == 1 for i in cluster.broker_ids)
    assert cluster.elect_preferred("prefer") == []  # nothing left to elect
    cluster.elect_preferred()  # every topic's partitions
    view = cluster.metadata(3)
    assert all(st.leader == st.replicas[0] for t in view.topics.values() for st in t.values())

    cluster.stop_broker(3)
    with pytest.raises(KafkaRequestError, match="PREFERRED_LEADER_NOT_AVAILABLE"):
        cluster.elect_preferred("prefer", [2])
    cluster.start_broker(3)
    _await_in_isr(cluster, "prefer", 2, 3)
    assert cluster.elect_preferred("prefer", [2]) == [("prefer", 2)]


def test_move_leader_through_a_reassignment_and_a_preferred_election(cluster: Cluster) -> None:
    cluster.create_topic("moving", assignment=[[1, 2], [2, 3]])
    before = cluster.metadata(1).topics["moving"][0]
    cluster.move_leader("moving", 0, 2)  # a replica: the order changes, the set stays
    for i in cluster.broker_ids:
        st = cluster.metadata(i).topics["moving"][0]
        assert (st.leader, st.replicas) == (2, (2, 1))
        assert st.leader_epoch > before.leader_epoch
    cluster.move_leader("moving", 1, 1)  # not a replica: it replaces the last one (RF stays 2)
    st = cluster.metadata(3).topics["moving"][1]
    assert (st.leader, st.replicas, st.isr) == (1, (1, 2), (1, 2))
    cluster.move_leader("moving", 1, 1)  # already the leader: nothing to do
    for unknown in (lambda: cluster.move_leader("moving", 7, 1),
                    lambda: cluster.move_leader("no-such-topic", 0, 1),
                    lambda: cluster.elect_preferred("no-such-topic")):  # fmt: skip
        with pytest.raises(KafkaRequestError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            unknown()
    cluster.stop_broker(3)
    with pytest.raises(KafkaRequestError, match="INVALID_REPLICA_ASSIGNMENT"):
        cluster.move_leader("moving", 0, 3)  # a dead broker cannot lead
    cluster.start_broker(3)


INTERRUPTED = """
import json, os, sys, time
from kmeta.testing import Cluster
with Cluster(2, parent_dir=sys.argv[1]) as cluster:
    pids = [p.pid for p in cluster._processes._procs.values()]
    print(json.dumps({"pids": pids, "data_dir": str(cluster.data_dir)}), flush=True)
    time.sleep(60)
"""


def test_ctrl_c_in_the_test_process_stops_the_daemons_and_removes_the_dir(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert len(started["pids"]) == 3
        assert Path(started["data_dir"]).is_dir()
        proc.send_signal(signal.SIGINT)  # as a terminal's Ctrl-C reaches pytest
        proc.wait(30)
    finally:
        proc.kill()
    assert proc.returncode != 0  # KeyboardInterrupt
    assert all(gone(pid) for pid in started["pids"])
    assert not Path(started["data_dir"]).exists()
