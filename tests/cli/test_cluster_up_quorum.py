"""`kmeta cluster up --controllers 3`: a controller quorum on a ZooKeeper server the command
runs itself; kill -9 of the active controller leaves a cluster that still creates topics, and
the killed controller is started again as a standby."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kmeta.cli.cluster.cluster_quorum import RestartPolicy
from kmeta.cli.cluster.zookeeper import ZOOKEEPER_JAR
from kmeta.controller.quorum.election import active_controller
from kmeta.controller.store import zk_auth
from kmeta.controller.store.zk_auth import read_zk_credential
from tests.cli.helpers import free_base_port, wait_ready_file
from tests.helpers import gone

pytestmark = pytest.mark.e2e


def _create(admin: AdminClient, name: str, timeout_s: float = 20) -> None:
    """Create ``name``, again while the brokers answer NOT_CONTROLLER (they have not yet
    heard of the new active controller), as Kafka's admin client retries it. A retry may find
    the topic there: a controller that lost its ZooKeeper connection during the write cannot
    tell whether it was applied (NOT_CONTROLLER, as Kafka's), and it was."""
    deadline = time.monotonic() + timeout_s
    retried = False
    while True:
        future = admin.create_topics([NewTopic(name, 2, 2)], request_timeout=15)[name]
        try:
            future.result(timeout=20)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if retried and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if error.code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                raise
        retried = True
        time.sleep(0.1)


def _quorum_status(zookeeper: str, credential: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "kmeta", "status", "--zookeeper", zookeeper, "--json",
         "--zookeeper-credential-file", credential],
        capture_output=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return dict(json.loads(out)["quorum"])


def _member_session(zk: KazooClient, node: int) -> int | None:
    """The ZooKeeper session of controller ``node``'s process (its quorum membership)."""
    stat = zk.exists(f"/kmeta/controllers/{node}")
    return None if stat is None else int(stat.ephemeralOwner)


def _back(
    ready: Path, zk: KazooClient, node: int, old_pid: int, old_session: int | None
) -> dict[int, int]:
    """Wait for controller ``node`` restarted: another pid in the ready file, and a member
    of the quorum on another session. The controllers' pids now."""
    deadline = time.monotonic() + 30
    while True:
        now = {c["node_id"]: c["pid"] for c in json.loads(ready.read_text())["controllers"]}
        session = _member_session(zk, node)
        if now[node] != old_pid and session not in (None, old_session):
            return now
        assert time.monotonic() < deadline, f"controller {node} not back"
        time.sleep(0.1)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not ZOOKEEPER_JAR.exists(), reason="ZooKeeper is not installed")
def test_quorum_survives_kill_9_of_the_active_controller(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--controllers", "3", "--brokers", "2",
         "--base-port", str(free_base_port(2, 3)), "--data-dir", str(tmp_path / "data"),
         "--zookeeper-session-timeout-ms", "2000", "--ready-file", str(ready),
         "--exit-after", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = wait_ready_file(ready, proc, 30)
        pids = {c["node_id"]: c["pid"] for c in info["controllers"]}
        assert sorted(pids) == [3001, 3002, 3003]
        zk = zk_auth.client(info["zookeeper"], read_zk_credential(info["zookeeper_credential_file"]))
        zk.start(timeout=10)
        try:
            admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"], "retries": 50})
            _create(admin, "before")
            node, epoch = active_controller(zk)
            assert node in pids
            sessions = {n: _member_session(zk, n) for n in pids}
            os.kill(pids[node], signal.SIGKILL)
            # another election (a standby, or the killed one restarted by cluster up)
            deadline = time.monotonic() + 20
            while active_controller(zk)[0] is None or active_controller(zk)[1] == epoch:
                assert time.monotonic() < deadline, "no controller took over"
                time.sleep(0.05)
            assert active_controller(zk)[1] > epoch
            _create(admin, "after")
            assert {"before", "after"} <= set(admin.list_topics(timeout=10).topics)
            # cluster up started the killed controller again (a new pid in the ready file, a
            # new ZooKeeper session): it is back in the quorum
            now = _back(ready, zk, node, pids[node], sessions[node])
            # a standby killed comes back as a standby: the active one stays
            active, epoch = active_controller(zk)
            standby = next(n for n in pids if n != active)
            sessions = {n: _member_session(zk, n) for n in pids}
            os.kill(now[standby], signal.SIGKILL)
            now = _back(ready, zk, standby, now[standby], sessions[standby])
            status = _quorum_status(info["zookeeper"], info["zookeeper_credential_file"])
            assert (status["active"], status["epoch"]) == (active, epoch)
            assert standby in status["standbys"]  # type: ignore[operator]
            assert not gone(now[standby])
        finally:
            zk.stop()
            zk.close()
        proc.send_signal(signal.SIGTERM)  # as Ctrl-C: it stops its daemons and ZooKeeper
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # SIGTERM: it stops its daemons (own sessions) and ZooKeeper
            proc.terminate()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"controller {node} (pid {pids[node]}) exited with -9" in err
    assert "the controller quorum carries on with 2 of 3" in out
    assert f"restarting controller {node} in 1 s" in err
    assert f"controller {node} restarted (pid {now[node]})" in err
    assert f"controller {standby} restarted (pid {now[standby]})" in err
    # a quorum's status comes from ZooKeeper (the active controller moves)
    assert f"status: kmeta status --zookeeper {info['zookeeper']}" in out
    assert "kmeta status --controller" not in out
    assert "cluster stopped" in out
    # nothing left behind: no controller, no broker, no ZooKeeper (each names the data dir)
    assert not [pid for pid in [*pids.values(), *now.values()] if not gone(pid)]
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


def test_restarts_back_off_and_stop_for_a_controller_that_keeps_dying() -> None:
    policy = RestartPolicy(max_restarts=3, window_s=60.0, first_backoff_s=1.0, max_backoff_s=3.0)
    assert [policy.backoff(1, t) for t in (0.0, 1.0, 2.0)] == [1.0, 2.0, 3.0]
    assert policy.backoff(1, 3.0) is None  # a 4th death within the window: it stays down
    assert policy.backoff(2, 3.0) == 1.0  # another controller has its own count
    assert policy.backoff(1, 61.0) == 2.0  # the window moved on: only the death at 2.0 counts
