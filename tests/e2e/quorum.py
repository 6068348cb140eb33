"""A controller quorum on a real ZooKeeper, as processes, for the quorum tests: controllers
3001-3003 and brokers 1-2 (:class:`Quorum`), an election made behind the controllers' backs,
CreateTopics straight to a listener, and a creation retried while the brokers move on to a
new controller."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from kmeta.controller.quorum.election import active_controller
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_topics as ct
from tests.helpers import free_ports, refuses, wait

#: short for a fast test, long enough for a loaded machine (kazoo reads time out at 2/3 of it)
ZK_SESSION_MS = 4000


class Quorum:
    """Three controllers (node ids 3001-3003) and two brokers, as processes."""

    def __init__(self, zk: LocalZooKeeper, tmp: Path) -> None:
        self.zk, self.tmp = zk, tmp
        self.ctl_ports = dict(zip((3001, 3002, 3003), free_ports(3), strict=True))
        self.client_ports = dict(zip((1, 2), free_ports(2), strict=True))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.cluster_id = "quorum-test-cluster"
        self.zkc = zk.client()
        self.zkc.start(timeout=30)  # (a loaded machine: the JVM has only just started)

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.tmp / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "kmeta", *argv, "--log-level", "INFO"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def start_controller(self, node: int, zookeeper: str | None = None, *extra: str) -> None:
        self._spawn(f"controller-{node}", [
            "controller", "--zookeeper", zookeeper or self.zk.connect_string,
            "--node-id", str(node),
            "--listeners", f"CONTROLLER://127.0.0.1:{self.ctl_ports[node]}",
            "--data-dir", str(self.tmp / f"c{node}"), "--cluster-id", self.cluster_id,
            "--zookeeper-session-timeout-ms", str(ZK_SESSION_MS), "--session-timeout-ms", "6000",
            "--zookeeper-credential-file", str(self.zk.credential_file),
            *extra,
        ])  # fmt: skip

    def start_broker(self, broker: int, *extra: str) -> None:
        control = free_ports(1)[0]
        self._spawn(f"broker-{broker}", [
            "broker", "--broker-id", str(broker),
            "--listeners", f"PLAINTEXT://127.0.0.1:{self.client_ports[broker]},"
                           f"CONTROL://127.0.0.1:{control}",
            "--controller", ",".join(f"127.0.0.1:{p}" for p in self.ctl_ports.values()),
            "--heartbeat-interval-ms", "250", "--cluster-id", self.cluster_id, *extra,
        ])  # fmt: skip

    def active(self) -> tuple[int | None, int]:
        return active_controller(self.zkc)

    def elect(self, node: int) -> tuple[int, int]:
        """What a controller's election does (one multi-op), behind the controllers' backs:
        /controller taken (over) by ``node``, /controller_epoch raised with a versioned
        write. The new epoch and /controller_epoch's new version (the new fence)."""
        data, stat = self.zkc.get("/controller_epoch")
        epoch = int(data or b"0") + 1
        tx = self.zkc.transaction()
        if self.zkc.exists("/controller") is not None:
            tx.delete("/controller")
        tx.create("/controller", json.dumps({"version": 1, "brokerid": node}).encode(),
                  ephemeral=True)  # fmt: skip
        tx.set_data("/controller_epoch", str(epoch).encode(), version=stat.version)
        assert not any(isinstance(r, Exception) for r in tx.commit())
        return epoch, stat.version + 1

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


async def create_topic_at(port: int, name: str, partitions: int = 1, timeout_ms: int = 5000) -> int:
    """CreateTopics sent straight to the listener on ``port`` (a controller's, or a broker's
    that forwards it), once it listens: the topic's error code."""
    await asyncio.to_thread(wait, lambda: not refuses(port), 15, f"a listener on {port}")
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5.0)
    try:
        request = ct.CreateTopicsRequest(
            version=7,
            topics=(ct.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1),),
            timeout_ms=timeout_ms,
        )
        answer = await conn.request(request, 30.0)
        return int(answer.topics[0].error_code)
    finally:
        conn.close()


def create_once_answered(
    admin: AdminClient,
    topic: NewTopic,
    timeout_s: float = 30,
    passing: tuple[int, ...] = (KafkaError.NOT_CONTROLLER,),
    what: str = "brokers never reached the new controller",
) -> None:
    """Create ``topic`` through the brokers, again while they answer one of ``passing``
    (NOT_CONTROLLER while they move on to a new controller); any other error is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.create_topics([topic])[topic.topic].result(timeout=30)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in passing:
                raise
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
