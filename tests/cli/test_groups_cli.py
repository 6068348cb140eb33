"""``kmeta groups list|describe|reset-offsets|delete`` against a real cluster: a standalone
group made by a reset, a live confluent-kafka group member (its partitions, lag and the
refusals to reset or delete while it is there), the dry run, and one-line errors."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Consumer, Producer, TopicPartition

from kmeta.cli.admin.groups import table
from kmeta.cli.admin.groups_client import assignment_partitions
from kmeta.cli.main import cli
from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e
TOPIC = "ledger"


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3) as c:
        c.create_topic(TOPIC, partitions=3, rf=3)
        producer = Producer(c.client_config())
        for i in range(30):  # 10 records a partition
            producer.produce(TOPIC, value=b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        yield c


def kmeta(cluster: Cluster, *args: str) -> Result:
    return CliRunner().invoke(cli, ["groups", args[0], "--bootstrap-server", cluster.bootstrap_servers, *args[1:]])


def rows(output: str) -> list[list[str]]:
    lines = [line.split() for line in output.splitlines() if line.strip()]
    return [line for line in lines if line[0] not in ("GROUP", "Consumer", "TOPIC")]


def test_reset_is_a_dry_run_unless_executed_and_describe_shows_lag(cluster: Cluster) -> None:
    dry = kmeta(cluster, "reset-offsets", "--group", "g1", "--topic", f"{TOPIC}:0,1", "--to-offset", "4")
    assert dry.exit_code == 0, dry.output
    assert rows(dry.output) == [["g1", TOPIC, "0", "4"], ["g1", TOPIC, "1", "4"]]
    missing = kmeta(cluster, "describe", "--group", "g1")
    assert missing.exit_code == 1
    assert "does not exist" in missing.output
    done = kmeta(cluster, "reset-offsets", "--group", "g1", "--topic", TOPIC, "--to-offset", "4", "--execute")
    assert done.exit_code == 0, done.output
    shifted = kmeta(cluster, "reset-offsets", "--group", "g1", "--all-topics", "--shift-by", "100", "--execute")
    assert rows(shifted.output) == [["g1", TOPIC, str(p), "10"] for p in range(3)]  # (clamped to the log end)
    kmeta(cluster, "reset-offsets", "--group", "g1", "--topic", f"{TOPIC}:2", "--shift-by", "-7", "--execute")
    described = kmeta(cluster, "describe", "--group", "g1")
    assert described.exit_code == 0, described.output
    assert "has no active members" in described.output
    assert rows(described.output) == [
        ["g1", TOPIC, "0", "10", "10", "0", "-", "-", "-"],
        ["g1", TOPIC, "1", "10", "10", "0", "-", "-", "-"],
        ["g1", TOPIC, "2", "3", "10", "7", "-", "-", "-"],
    ]
    listed = kmeta(cluster, "list")
    assert "g1" in listed.output.split()


def test_earliest_latest_and_datetime(cluster: Cluster) -> None:
    assert rows(kmeta(cluster, "reset-offsets", "--group", "g2", "--topic", f"{TOPIC}:0", "--to-latest").output) == [
        ["g2", TOPIC, "0", "10"]
    ]
    assert rows(kmeta(cluster, "reset-offsets", "--group", "g2", "--topic", f"{TOPIC}:0", "--to-earliest").output) == [
        ["g2", TOPIC, "0", "0"]
    ]
    past = kmeta(cluster, "reset-offsets", "--group", "g2", "--topic", f"{TOPIC}:0", "--to-datetime", "2000-01-01T00:00:00")
    future = kmeta(cluster, "reset-offsets", "--group", "g2", "--topic", f"{TOPIC}:0", "--to-datetime", "2999-01-01T00:00:00")
    assert rows(past.output) == [["g2", TOPIC, "0", "0"]]
    assert rows(future.output) == [["g2", TOPIC, "0", "10"]]


def test_a_live_member_is_described_and_protected(cluster: Cluster) -> None:
    consumer = Consumer({**cluster.client_config(), "group.id": "live", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "ledger-reader"})  # fmt: skip
    try:
        consumer.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 60
        while got < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            got += msg is not None and msg.error() is None
        assert got == 30
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 6)], asynchronous=False)
        described = kmeta(cluster, "describe", "--group", "live", "--json")
        assert described.exit_code == 0, described.output
        view = json.loads(described.output)
        assert view["state"] == "Stable"
        by_partition = {r["partition"]: r for r in view["partitions"]}
        assert by_partition[0]["lag"] == 4
        assert by_partition[0]["client_id"] == "ledger-reader"
        assert by_partition[1]["current_offset"] is None
        assert by_partition[1]["consumer_id"]
        refused = kmeta(cluster, "reset-offsets", "--group", "live", "--all-topics", "--to-earliest", "--execute")
        assert refused.exit_code == 1
        assert "inactive, but the current state is Stable" in refused.output
        assert len(refused.output.splitlines()) == 1
        deleted = kmeta(cluster, "delete", "--group", "live")
        assert deleted.exit_code == 1
        assert "NON_EMPTY_GROUP" in deleted.output
        subscribed = kmeta(cluster, "delete", "--group", "live", "--topic", f"{TOPIC}:0")
        assert subscribed.exit_code == 1
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in subscribed.output
    finally:
        consumer.close()


def test_delete_offsets_then_the_group(cluster: Cluster) -> None:
    kmeta(cluster, "reset-offsets", "--group", "g3", "--topic", TOPIC, "--to-offset", "1", "--execute")
    partial = kmeta(cluster, "delete", "--group", "g3", "--topic", f"{TOPIC}:1")
    assert partial.exit_code == 0
    assert rows(partial.output) == [[TOPIC, "1", "Successful"]]
    assert [r[2] for r in rows(kmeta(cluster, "describe", "--group", "g3").output)] == ["0", "2"]
    gone = kmeta(cluster, "delete", "--group", "g3")
    assert gone.exit_code == 0
    assert "Deletion of requested consumer groups ('g3') was successful." in gone.output
    assert "g3" not in kmeta(cluster, "list").output.split()


def test_usage_errors_are_one_line(cluster: Cluster) -> None:
    for args in (
        ("reset-offsets", "--group", "g", "--topic", TOPIC),
        ("reset-offsets", "--group", "g", "--to-earliest"),
        ("reset-offsets", "--group", "g", "--topic", "x:a", "--to-earliest"),
        ("reset-offsets", "--group", "g", "--topic", TOPIC, "--to-datetime", "yesterday"),
    ):
        result = kmeta(cluster, *args)
        assert result.exit_code == 2, (args, result.output)
    unknown = kmeta(cluster, "reset-offsets", "--group", "g", "--topic", "nope", "--to-earliest")
    assert unknown.exit_code == 1
    assert "does not exist" in unknown.output


def test_table_and_assignment_parsing() -> None:
    assert table(("A", "BB"), [("xxx", 1)]) == ["A   BB", "xxx 1"]
    # ConsumerProtocolAssignment v0: topics [("t", [0, 2])], user data null
    data = bytes.fromhex("0000" "00000001" "0001" "74" "00000002" "00000000" "00000002" "ffffffff")
    assert assignment_partitions(data) == [("t", 0), ("t", 2)]
    assert assignment_partitions(b"\x00") == []


def test_the_broker_offsets_flags_default_to_kafkas() -> None:
    from kmeta.cli.daemons.broker import broker_command
    from kmeta.cli.daemons.offsets_options import offsets_fields
    from kmeta.server.config import BrokerConfig

    ctx = broker_command.make_context("broker", ["--broker-id", "1", "--listeners", "PLAINTEXT://127.0.0.1:0"])
    fields = offsets_fields(dict(ctx.params))
    defaults = {f: BrokerConfig.__dataclass_fields__[f].default for f in fields}
    assert fields == defaults == {
        "offsets_retention_ms": 7 * 24 * 3600 * 1000, "offsets_retention_check_interval_ms": 600_000,
        "offset_metadata_max_bytes": 4096,
    }  # fmt: skip
    short = broker_command.make_context("broker", ["--broker-id", "1", "--listeners", "PLAINTEXT://127.0.0.1:0",
                                                   "--offsets-retention-minutes", "0.05"])  # fmt: skip
    assert offsets_fields(dict(short.params))["offsets_retention_ms"] == 3_000
