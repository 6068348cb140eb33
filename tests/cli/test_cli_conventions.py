"""CLI conventions a new user relies on, against real processes: Kafka's ``--bootstrap-server``
everywhere, one-line errors with a non-zero exit (never a traceback), kafka-topics.sh's checks
and output shape, and ``cluster up`` / standalone daemons on busy ports."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.testing import Cluster
from tests.helpers import BASE_PORTS, free_port

KMETA = [sys.executable, "-m", "kmeta"]


def kmeta(
    *args: str, timeout: float = 30, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KMETA, *args], capture_output=True, text=True, timeout=timeout, env=env)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a refused command: exactly one line, no traceback, non-zero exit."""
    assert proc.returncode != 0, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base(brokers: int = 2) -> int:
    """A --base-port whose cluster ports (no metrics) are all free, below the ephemeral range
    so that other tests' connections do not take them meanwhile."""
    for base in random.Random().sample(BASE_PORTS, 200):
        ports = [base + 1000] + [base + d + i for i in range(brokers) for d in (0, 100)]
        if all(_free(p) for p in ports):
            return base
    raise RuntimeError("no free base port")


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A port held by someone else."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(2, parent_dir=tmp_path_factory.mktemp("conventions")) as c:
        c.create_topic("orders", 3, 2)
        yield c


# -- kafka-topics.sh's checks -------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-1", "0", "-5"])
def test_create_refuses_partitions_below_one_like_kafka_topics(value: str) -> None:
    # kafka-topics.sh: any given --partitions < 1, -1 included (leaving it out is the default)
    proc = kmeta("topics", "create", "--bootstrap-server", f"127.0.0.1:{free_port()}",
                 "--topic", "t", "--partitions", value)  # fmt: skip
    assert one_line_error(proc) == "Error: The partitions must be greater than 0"
    assert proc.returncode == 1


@pytest.mark.parametrize("value", ["-1", "0", "40000"])
def test_create_refuses_replication_factor_out_of_range(value: str) -> None:
    proc = kmeta("topics", "create", "--bootstrap-server", f"127.0.0.1:{free_port()}",
                 "--topic", "t", "--replication-factor", value)  # fmt: skip
    assert one_line_error(proc) == (
        "Error: The replication factor must be between 1 and 32767 inclusive"
    )


def test_usage_mistakes_are_one_line() -> None:
    line = one_line_error(kmeta("topics", "create", "--bootstrap-server", "127.0.0.1:1"))
    assert line.startswith("Error: Missing option '--topic'.")
    line = one_line_error(kmeta("metadata"))
    assert line.startswith("Error: Missing option '--bootstrap-server'.")
    assert one_line_error(kmeta("no-such-command")).startswith("Error: No such command")


# -- a stopped cluster: fail fast, in one line ---------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["metadata", "--bootstrap-server"],
        ["metadata", "-b"],
        ["watch", "--bootstrap-server"],
        ["topics", "list", "--bootstrap-server"],
        ["topics", "describe", "--bootstrap-server"],
        ["configs", "describe", "--entity-type", "topics", "-b"],
        ["topics", "elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", "-b"],
    ],
)
def test_a_stopped_cluster_fails_fast(args: list[str]) -> None:
    server = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    proc = kmeta(*args, server, timeout=20)
    line = one_line_error(proc)
    assert line.startswith(f"Error: no broker of {server} is reachable: "), line
    assert time.monotonic() - started < 5  # `metadata` took 10 s, `watch` never ended


# -- against a real cluster ----------------------------------------------------------------------
def test_metadata_and_watch_take_bootstrap_server(cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    for flag in ("--bootstrap-server", "-b", "--bootstrap-servers"):  # the last one hidden
        proc = kmeta("metadata", flag, servers, "--json")
        assert proc.returncode == 0, proc.stderr
        assert [t["name"] for t in json.loads(proc.stdout)["topics"]] == ["orders"]
    helptext = kmeta("metadata", "-h").stdout
    assert "--bootstrap-server " in helptext
    assert "--bootstrap-servers" not in helptext
    proc = subprocess.Popen(
        [*KMETA, "watch", "--bootstrap-server", servers, "--json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "snapshot"
    finally:
        proc.kill()
        proc.wait()


def test_metadata_into_a_pipe_is_kcat_lines(cluster: Cluster) -> None:
    proc = kmeta("metadata", "--bootstrap-server", cluster.bootstrap_servers)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == " 2 brokers:"
    assert " 1 topics:" in lines
    assert '  topic "orders" with 3 partitions:' in lines
    parts = [line for line in lines if line.startswith("    partition ")]
    assert len(parts) == 3
    assert all(", replicas: " in p and ", isrs: " in p for p in parts)
    assert not any(ch in proc.stdout for ch in "┃━│─")  # no box drawing


def test_topics_describe_into_a_pipe_is_kafka_topics_lines_and_json(cluster: Cluster) -> None:
    proc = kmeta("topics", "describe", "--bootstrap-server", cluster.bootstrap_servers,
                 "--topic", "orders")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    head, *parts = proc.stdout.splitlines()
    assert head.startswith("Topic: orders\tTopicId: ")
    assert head.endswith("\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: ")
    assert len(parts) == 3
    for p, line in enumerate(parts):
        fields = line.split("\t")
        assert fields[0] == ""
        assert fields[1:3] == ["Topic: orders", f"Partition: {p}"]
        assert [f.split(": ")[0] for f in fields[3:]] == ["Leader", "Replicas", "Isr"]
    proc = kmeta("topics", "describe", "-b", cluster.bootstrap_servers, "--json")
    data = json.loads(proc.stdout)
    assert [(t["name"], t["partition_count"], t["replication_factor"]) for t in data] == [
        ("orders", 3, 2)
    ]
    assert [p["partition"] for p in data[0]["partitions"]] == [0, 1, 2]
    assert all(
        len(p["replicas"]) == 2 and p["leader"] in p["replicas"] for p in data[0]["partitions"]
    )
    listed = kmeta("topics", "list", "--bootstrap-server", cluster.bootstrap_servers, "--json")
    assert json.loads(listed.stdout) == ["orders"]


# -- busy ports ----------------------------------------------------------------------------------
def test_standalone_daemons_on_a_busy_port_are_one_line(
    listening: socket.socket, tmp_path: Path
) -> None:
    port = listening.getsockname()[1]
    expected = f"Error: Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
    broker = kmeta("broker", "--broker-id", "1", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
                   "--log-level", "ERROR")  # fmt: skip
    assert broker.returncode == 1
    assert one_line_error(broker) == expected
    controller = kmeta("controller", "--listeners", f"CONTROLLER://127.0.0.1:{port}",
                       "--data-dir", str(tmp_path / "c"), "--log-level", "ERROR")  # fmt: skip
    assert controller.returncode == 1
    assert one_line_error(controller) == expected


def _kmeta_temp_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("kmeta-cluster-*"))


def test_cluster_up_on_a_busy_port_creates_nothing(tmp_path: Path) -> None:
    base = free_base()
    port = base + 1  # broker 2's client port is the busy one
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        proc = kmeta("cluster", "up", "--brokers", "2", "--base-port", str(base),
                     "--no-metrics", env=env)  # fmt: skip
    assert proc.returncode == 1
    line = one_line_error(proc)
    busy = re.fullmatch(
        r"Error: port 127\.0\.0\.1:(\d+) \((.+)\) is not free: Address already in use; "
        r"stop what uses it or choose another --base-port",
        line,
    )
    assert busy is not None, line
    assert busy.groups() == (str(port), "broker 2")
    assert proc.stdout == ""
    assert _kmeta_temp_dirs(tmp_path) == []


def test_cluster_up_stops_the_rest_when_a_daemon_fails_to_start(tmp_path: Path) -> None:
    """Every broker refuses a setting from its environment (cluster up checks its own flags
    before it starts anything, not a daemon's KMETA_* variables) and exits: cluster up
    reports it, stops whatever still runs and removes the temp data dir it made; exit 1."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "KMETA_BROKER_MAX_CONNECTIONS": "-1"}
    base = free_base()
    proc = kmeta("cluster", "up", "--brokers", "2", "--base-port", str(base), "--no-metrics",
                 env=env, timeout=60)  # fmt: skip
    assert proc.returncode == 1, proc
    assert "exited with 2 while the cluster was starting" in proc.stderr.splitlines()[-1]
    assert "cluster stopped" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert _kmeta_temp_dirs(tmp_path) == []
    with socket.socket() as s:  # nothing left listening on the cluster's ports
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", base + 1000))
