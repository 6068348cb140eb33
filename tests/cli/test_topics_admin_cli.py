"""``kmeta topics elect-leaders`` against a real (subprocess) cluster of three brokers."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from kmeta.cli.main import cli
from tests.e2e.test_cluster import Cluster, leaders, metadata, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("topics-admin-cli"))
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
