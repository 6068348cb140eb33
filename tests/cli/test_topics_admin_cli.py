"""``kmeta topics elect-leaders`` and ``kmeta topics reassign`` against a real (subprocess)
cluster of three brokers; the controller reads a fault file (SIGHUP), so a test can keep its
requests from broker 3: a reassignment adding a replica there then stays in progress (the
replica never fetches, so its leader never adds it to the ISR) and can be verified and
cancelled."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from kmeta.cli.main import cli
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import metadata as md
from tests.e2e.test_cluster import Cluster, leaders, metadata, wait_for

pytestmark = pytest.mark.e2e


class FaultFileCluster(Cluster):
    def start_controller(self) -> None:
        self.fault_file = self.data_dir / "faults"
        self.fault_file.write_text("")
        self.controller = self._spawn(
            "controller",
            "--listeners", f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "--data-dir", str(self.data_dir / "controller"),
            "--fault-file", str(self.fault_file),
        )  # fmt: skip

    @contextmanager
    def dropping(self, broker: int) -> Iterator[None]:
        """The controller's requests to ``broker`` are dropped meanwhile (it is resynced
        after)."""
        assert self.controller is not None
        self.fault_file.write_text(f"broker={broker},drop\n")
        self.controller.send_signal(signal.SIGHUP)
        time.sleep(1.0)  # (the controller applies it at once: a signal, a small file)
        try:
            yield
        finally:
            self.fault_file.write_text("")
            self.controller.send_signal(signal.SIGHUP)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = FaultFileCluster(tmp_path_factory.mktemp("topics-admin-cli"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def topics(cluster: Cluster, *args: str):
    return CliRunner().invoke(cli, ["topics", *args, "--bootstrap-server", cluster.bootstrap(2)])


def test_elect_leaders_as_kafka_leader_election_sh(cluster, tmp_path: Path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    new = NewTopic("pref", 3, replica_assignment=[[1, 2], [2, 3], [3, 1]])
    admin.create_topics([new])["pref"].result(10)
    # broker 1 goes and comes back: pref-0 stays led by 2 (no auto rebalance by default)
    cluster.brokers[1].send_signal(signal.SIGTERM)
    cluster.brokers[1].wait(10)
    wait_for(lambda: leaders(metadata(cluster.client_ports[2]), "pref")[0] == 2, 10)
    cluster.start_broker(1)
    wait_for(lambda: 1 in metadata(cluster.client_ports[1]).topics["pref"].partitions[0].isrs, 15)

    result = topics(cluster, "elect-leaders", "--election-type", "preferred", "--topic", "pref")
    assert result.exit_code == 0, result.output
    assert (
        "Successfully completed leader election (PREFERRED) for partitions pref-0" in result.output
    )
    assert "Valid replica already elected for partitions pref-1, pref-2" in result.output
    for port in cluster.client_ports.values():
        assert leaders(metadata(port), "pref") == {0: 1, 1: 2, 2: 3}

    file = tmp_path / "election.json"
    file.write_text(json.dumps({"partitions": [{"topic": "pref", "partition": 7}]}))
    result = topics(
        cluster, "elect-leaders", "--election-type", "UNCLEAN", "--path-to-json-file", str(file)
    )
    assert result.exit_code == 1
    assert (
        "Error completing leader election (UNCLEAN) for partition: pref-7: UNKNOWN_TOPIC_OR_PARTITION"
        in result.output
    )
    assert "1 replica(s) could not be elected" in result.output

    result = topics(
        cluster, "elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions"
    )
    assert result.exit_code == 0, result.output
    assert result.output == ""  # nothing needed an election: Kafka lists none

    for bad in (
        ["--election-type", "PREFERRED"],
        ["--election-type", "PREFERRED", "--topic", "pref", "--all-topic-partitions"],
        ["--election-type", "PREFERRED", "--partition", "0", "--all-topic-partitions"],
        ["--election-type", "SOMETIMES", "--topic", "pref"],
    ):
        result = topics(cluster, "elect-leaders", *bad)
        assert result.exit_code == 2, (bad, result.output)
    file.write_text("{not json")
    result = topics(
        cluster, "elect-leaders", "--election-type", "PREFERRED", "--path-to-json-file", str(file)
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def write_plan(plan_dir: Path, rows: list[tuple[str, int, list[int]]]) -> None:
    """A `kmeta pipeline plan` output's partitions/ table (the columns plan_reader reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (plan_dir / "partitions").mkdir(parents=True)
    table = pa.table(
        {
            "topic": [r[0] for r in rows],
            "partition": pa.array([r[1] for r in rows], pa.int32()),
            "replicas": pa.array([r[2] for r in rows], pa.list_(pa.int32())),
        }
    )
    pq.write_table(table, plan_dir / "partitions" / "part-0.parquet")


def test_reassign_as_kafka_reassign_partitions_sh(cluster, tmp_path: Path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.create_topics([NewTopic("mv", 2, replica_assignment=[[1, 2], [2, 3]])])["mv"].result(10)
    plan = tmp_path / "plan"
    write_plan(plan, [("mv", 0, [3, 2]), ("mv", 1, [3, 2])])

    with cluster.dropping(3):  # (3 never hears it is a replica: it does not catch up)
        _reassign_in_progress(cluster, plan, tmp_path)


def replicas_on(port: int, topic: str, partition: int) -> list[int]:
    """A partition's replicas as the broker on ``port`` itself answers them. (An AdminClient
    asks whichever broker it picks: broker 3 here, whose requests are dropped, answers the
    replicas from before the reassignment.)"""

    async def ask() -> md.MetadataResponse:
        conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5.0)
        try:
            response: md.MetadataResponse = await conn.request(
                md.MetadataRequest(version=12, topics=None), 10.0
            )
            return response
        finally:
            conn.close()

    (found,) = (t for t in asyncio.run(ask()).topics if t.name == topic)
    return next(list(p.replica_nodes) for p in found.partitions if p.partition_index == partition)


def replicas_become(port: int, topic: str, partition: int, expected: list[int]) -> None:
    """As the broker gets it: the controller answers once its change is durable, and pushes it
    to the brokers after."""
    deadline = time.monotonic() + 20
    while (replicas := replicas_on(port, topic, partition)) != expected:
        assert time.monotonic() < deadline, replicas
        time.sleep(0.1)


def _reassign_in_progress(cluster, plan: Path, tmp_path: Path) -> None:
    result = topics(cluster, "reassign", "--plan", str(plan))
    assert result.exit_code == 0, result.output
    current = (
        '{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"mv","partition":1,"replicas":[2,3],'
        '"log_dirs":["any","any"]}]}'
    )
    assert result.output.splitlines() == [
        "Current partition replica assignment",
        "",
        current,
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignments for mv-0,mv-1",
    ]
    for port in (cluster.client_ports[1], cluster.client_ports[2]):  # RS = TRS + ORS meanwhile
        replicas_become(port, "mv", 0, [3, 2, 1])
        replicas_become(port, "mv", 1, [3, 2])

    result = topics(cluster, "reassign", "--plan", str(plan), "--verify")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition mv-0 is still in progress.",
        "Reassignment of partition mv-1 is completed.",  # a reorder: done at once
    ]
    result = topics(cluster, "reassign", "--plan", str(plan), "--cancel")
    assert result.exit_code == 0, result.output
    assert result.output == "Successfully cancelled partition reassignment for: mv-0\n"
    # the original replicas, in TRS + ORS order: Kafka cannot restore the original order either
    replicas_become(cluster.client_ports[1], "mv", 0, [2, 1])
    result = topics(cluster, "reassign", "--plan", str(plan), "--verify")
    assert (
        "There is no active reassignment of partition mv-0, but replica set is 2,1 rather than 3,2."
        in result.output
    )
    result = topics(cluster, "reassign", "--plan", str(plan), "--cancel")
    assert result.output == "None of the specified partition reassignments are active.\n"

    rollback = tmp_path / "rollback.json"
    rollback.write_text(current)
    result = topics(cluster, "reassign", "--reassignment-json-file", str(rollback))
    assert result.exit_code == 0, result.output
    replicas_become(cluster.client_ports[1], "mv", 1, [2, 3])

    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "ghost", "partition": 0, "replicas": [1]},
                    {"topic": "mv", "partition": 0, "replicas": [9]},
                ],
            }
        )
    )
    result = topics(cluster, "reassign", "--reassignment-json-file", str(bad))
    assert result.exit_code == 1
    assert (
        "Error reassigning partition(s):\nghost-0: UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.\nmv-0: INVALID_REPLICA_ASSIGNMENT: Replica assignment has brokers that are not alive"
        in result.output
    )
    for args in (
        ["--plan", str(plan), "--reassignment-json-file", str(bad)],
        [],
        ["--plan", str(tmp_path / "nowhere")],
    ):
        result = topics(cluster, "reassign", *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
    bad.write_text('{"version": 1, "partitions": [{"topic": "mv"}]}')
    result = topics(cluster, "reassign", "--reassignment-json-file", str(bad))
    assert result.exit_code == 2
