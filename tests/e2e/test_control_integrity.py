"""Control-plane integrity with real processes (kmeta.testing.Cluster): a broker's rejection
is never an ack, registrations and liveness as KRaft's controller checks them.

Each test attacks the cluster from outside as the issue's reproduction did: a forged control
request raising a broker's controller epoch, a second registration of a live id from another
address, ControlledShutdown with broker epoch -1, heartbeats forged for a kill -9'd broker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Any

import pytest

from kmeta.cli.cluster.cluster import cluster_id_of
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import stop_replica as sr
from kmeta.testing import Cluster
from tests.helpers import free_ports, wait

pytestmark = pytest.mark.e2e

STALE_EPOCH_LINE = "refused controller epoch"
DUPLICATE_LINE = "still holds a previous incarnation's session"


def _request(port: int, request: Any, client_id: str = "attacker") -> Any:
    async def run() -> Any:
        conn = await KafkaConnection.open("127.0.0.1", port, client_id=client_id, timeout_s=10)
        try:
            return await conn.request(request, 10.0)
        finally:
            conn.close()

    return asyncio.run(run())


def _create(name: str, timeout_ms: int, assignment: tuple[tuple[int, ...], ...] = ()) -> Any:
    topic = ct.CreatableTopic(
        name=name,
        num_partitions=-1 if assignment else 1,
        replication_factor=-1 if assignment else 1,
        assignments=tuple(
            ct.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
            for p, r in enumerate(assignment)
        ),
    )
    return ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=timeout_ms)


def _brokers(cluster: Cluster) -> dict[int, dict[str, Any]]:
    return {b["id"]: b for b in cluster.controller_status()["brokers"]}


def test_a_broker_that_refuses_updates_holds_the_barrier_and_shows_as_rejecting(tmp_path):
    with Cluster(2, parent_dir=tmp_path) as cluster:
        cfg = cluster.config
        # the attacker raises broker 2's controller epoch (an empty StopReplica changes nothing
        # else); from now on it refuses our controller's requests as stale
        forged = sr.StopReplicaRequest(
            version=4, controller_id=3000, controller_epoch=1_000_000, broker_epoch=-1
        )
        assert _request(cfg.control_port(2), forged).error_code == 0
        for name in ("t1", "t2"):
            answer = _request(cfg.client_port(1), _create(name, timeout_ms=1000)).topics[0]
            # not acknowledged by broker 2: the barrier holds until the request's timeout
            assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
            assert "rejected by broker 2 (STALE_CONTROLLER_EPOCH)" in answer.error_message
        rows = _brokers(cluster)
        assert rows[2]["state"] == "alive"
        assert rows[2]["rejecting"]["UPDATE_METADATA"] == "STALE_CONTROLLER_EPOCH"
        assert rows[2]["lag_versions"] >= 2  # it does not count as caught up
        assert (rows[1]["rejecting"], rows[1]["lag_versions"]) == ({}, 0)
        metrics_url = f"http://127.0.0.1:{cfg.controller_metrics_port}/metrics"
        with urllib.request.urlopen(metrics_url, timeout=5) as resp:
            metrics = resp.read().decode()
        assert (
            'kmeta_controller_channel_rejections_total{api="UPDATE_METADATA",broker_id="2",'
            'error="STALE_CONTROLLER_EPOCH"}'
        ) in metrics
        # kmeta status, as JSON and as the table
        status = [sys.executable, "-m", "kmeta", "status", "--controller", f"127.0.0.1:{cfg.controller_metrics_port}"]  # fmt: skip
        out = subprocess.run([*status, "--json"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        view = {b["id"]: b for b in json.loads(out.stdout)["brokers"]}
        assert view[2]["rejecting"]["UPDATE_METADATA"] == "STALE_CONTROLLER_EPOCH"
        table = subprocess.run(status, capture_output=True, text=True, timeout=30)
        assert table.returncode == 0, table.stderr
        assert "rejecting" in table.stdout
        assert "broker 2 rejects" in table.stdout
        assert "STALE_CONTROLLER_EPOCH" in table.stdout
        # said loudly at ERROR, once for this broker and epoch (not once per request)
        said = cluster.log_path("controller").read_text().count(STALE_EPOCH_LINE)
        assert said == 1
        # a restart of the broker (its epoch view starts again) brings it back: caught up
        cluster.restart_broker(2)
        cluster.wait_converged(15)
        assert _brokers(cluster)[2]["rejecting"] == {}
        # a controller failover resends LeaderAndIsr with the leader epochs the brokers hold,
        # which they answer STALE_CONTROLLER_EPOCH per partition (as Kafka's): not a rejection
        cluster.stop_controller()
        cluster.start_controller()
        assert all(b["rejecting"] == {} for b in _brokers(cluster).values())


def _identity(rows: dict[int, dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    return {b: (r["epoch"], r["endpoint"], r["state"]) for b, r in rows.items()}


def test_registration_and_liveness_as_kraft(tmp_path):
    with Cluster(2, parent_dir=tmp_path, session_timeout_ms=1500) as cluster:
        cfg = cluster.config
        cluster_id = cluster_id_of(cluster.data_dir)
        answer = _request(cfg.client_port(1), _create("t", 5000, assignment=((1, 2),)))
        assert answer.topics[0].error_code == 0
        before = _identity(_brokers(cluster))
        served = cluster.metadata(2)

        def register(broker_id: int, cluster_id: str) -> int:
            listener = br.Listener(name="CONTROL", host="127.0.0.2", port=9, security_protocol=0)
            request = br.BrokerRegistrationRequest(
                version=4,
                broker_id=broker_id,
                cluster_id=cluster_id,
                incarnation_id=uuid.uuid4(),
                listeners=(listener,),
            )
            return int(_request(cfg.controller_port, request).error_code)

        assert register(9, "") == ErrorCode.INCONSISTENT_CLUSTER_ID
        assert register(9, "another-cluster") == ErrorCode.INCONSISTENT_CLUSTER_ID
        assert register(2, cluster_id) == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        # ControlledShutdown with broker epoch -1 would move broker 1's leaders: refused; so
        # is its own epoch from another connection than its session's
        for epoch in (-1, before[1][0]):
            down = cs.ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=epoch)
            assert _request(cfg.controller_port, down).error_code == ErrorCode.STALE_BROKER_EPOCH

        # a second broker process with broker 1's id, on other ports, while broker 1 lives
        client, control = free_ports(2)
        second_log = tmp_path / "second-broker-1.log"
        argv = [
            sys.executable, "-m", "kmeta", "broker", "--broker-id", "1",
            "--listeners", f"PLAINTEXT://127.0.0.1:{client},CONTROL://127.0.0.1:{control}",
            "--controller", f"127.0.0.1:{cfg.controller_port}", "--cluster-id", cluster_id,
            "--heartbeat-interval-ms", "250", "--log-level", "INFO",
        ]  # fmt: skip
        with second_log.open("wb") as out:
            second = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait(lambda: DUPLICATE_LINE in second_log.read_text(), 20)
            time.sleep(1.0)  # it keeps retrying, quietly: still one line
            assert second_log.read_text().count(DUPLICATE_LINE) == 1
            assert _identity(_brokers(cluster)) == before  # nothing changed
            now = cluster.metadata(2)
            assert now.brokers == served.brokers  # broker 1's address is still its own
            assert now.topics == served.topics  # and it still leads t-0

            # kill -9 broker 1; heartbeats forged with any epoch (its own one too: /status
            # shows it) do not keep it alive
            epoch = before[1][0]
            cluster.kill_broker(1)
            killed = time.monotonic()
            while _brokers(cluster)[1]["endpoint"] == before[1][1]:
                assert time.monotonic() - killed < 15, "broker 1 was never fenced"
                for forged in (-1, 0, epoch - 1, epoch + 1, epoch):
                    beat = bh.BrokerHeartbeatRequest(version=1, broker_id=1, broker_epoch=forged)
                    error = _request(cfg.controller_port, beat).error_code
                    assert error == ErrorCode.STALE_BROKER_EPOCH
                time.sleep(0.05)
            # once the old session ended, the waiting process registered: a new epoch
            assert time.monotonic() - killed >= 1.0
            row = _brokers(cluster)[1]
            assert row["endpoint"] == f"127.0.0.1:{client}"  # (its first listener)
            assert row["epoch"] > epoch
            assert row["state"] == "alive"
        finally:
            second.terminate()
            second.wait(15)
