"""One line, never a traceback, never a hang (issue 33, point 4): each case a newcomer met,
against real daemons (a kmeta.testing.Cluster, a port that accepts and never answers) through
the real `kmeta` command."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.testing import Cluster
from tests.cli.test_cli_conventions import free_base, kmeta, one_line_error

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(2, parent_dir=tmp_path_factory.mktemp("one-line")) as c:
        yield c


@pytest.fixture
def silent() -> Iterator[str]:
    """host:port of a server that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_a_port_that_never_answers_is_bounded_by_timeout(silent: str) -> None:
    for command in (["topics", "list"], ["metadata"], ["status"], ["configs", "describe", "--entity-type", "topics"]):
        start = time.monotonic()
        done = kmeta(*command, "--bootstrap-server", silent, "--timeout", "1")
        assert time.monotonic() - start < 15, command
        assert done.returncode == 1
        line = one_line_error(done)
        assert line == f"Error: no answer from {silent} within 1 s (--timeout)"
        assert "Future exception was never retrieved" not in done.stderr


def test_a_controller_or_control_port_as_bootstrap_server(cluster: Cluster) -> None:
    controller = cluster.controller_address
    for command in (["topics", "list"], ["metadata"], ["topics", "create", "--topic", "x"]):
        done = kmeta(*command, "--bootstrap-server", controller)
        assert done.returncode == 1
        assert one_line_error(done) == (
            f"Error: {controller} is not a client listener (it serves no Metadata: a "
            "controller's or a broker's CONTROL port?); give a broker's client listener"
        )
    # a broker's CONTROL listener (open here: no SASL on the control plane) serves Metadata,
    # as a Kafka broker's inter-broker listener does, but closes on admin requests
    control = f"{cluster.config.host}:{cluster.config.control_port(1)}"
    done = kmeta("topics", "create", "--topic", "x", "--bootstrap-server", control)
    assert done.returncode == 1
    line = one_line_error(done)
    assert line.startswith(f"Error: {control} closed the connection ("), line
    assert "CONTROL port serves no clients" in line


def test_status_names_the_wrong_port_and_the_reason(cluster: Cluster) -> None:
    cfg = cluster.config
    assert cfg.metrics
    broker_metrics = f"{cfg.host}:{cfg.metrics_port(1)}"
    done = kmeta("status", "--controller", broker_metrics)
    assert done.returncode == 1
    assert one_line_error(done) == (
        f"Error: {broker_metrics} is a broker's metrics port: --controller takes the "
        "controller's --metrics-port"
    )
    with socket.socket() as s:  # nothing listens there
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    refused = one_line_error(kmeta("status", "--bootstrap-server", closed))
    assert refused.startswith(f"Error: no broker of {closed} is reachable: ")
    assert refused.endswith("Connect call failed ('127.0.0.1', " + closed.split(":")[1] + ")"), refused


def test_out_of_range_counts_are_usage_errors(cluster: Cluster) -> None:
    bs = cluster.bootstrap_servers
    for command in (
        ["topics", "create", "--topic", "big", "--partitions", "99999999999"],
        ["topics", "create", "--topic", "big", "--replica-assignment", "1:99999999999"],
        ["topics", "add-partitions", "--topic", "big", "--partitions", "99999999999"],
    ):
        done = kmeta(*command, "--bootstrap-server", bs)
        assert done.returncode == 2, done.stderr
        assert "99999999999" in one_line_error(done)


def test_config_show_of_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    done = kmeta("config", "show", "broker", "--config", str(missing))
    assert done.returncode == 2
    assert str(missing) in one_line_error(done)
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--session-timeout-ms", "-5"], "--session-timeout-ms"),
        (["--fault", "broker=9,drop"], "there is no broker 9"),
        (["--log-level", "chatty"], "--log-level"),
        (["--heartbeat-interval-ms", "20000"], "--heartbeat-interval-ms"),
    ],
)
def test_cluster_up_refuses_a_bad_flag_before_it_starts_anything(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    data = tmp_path / "data"
    done = kmeta("cluster", "up", "--brokers", "2", "--base-port", str(free_base()),
                 "--no-metrics", "--data-dir", str(data), *flags)  # fmt: skip
    assert done.returncode == 2
    line = one_line_error(done)
    assert named in line, line
    assert "cluster up -h" in line  # the command's own help, not a daemon's
    assert not data.exists()  # nothing started
    assert done.stdout == ""


def _interrupted(args: list[str], after_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    proc = subprocess.Popen([sys.executable, "-m", "kmeta", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(after_s)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(args, proc.returncode, out, err), time.monotonic() - sent


def test_ctrl_c_in_a_client_command_is_one_line(silent: str) -> None:
    done, took = _interrupted(["topics", "list", "--bootstrap-server", silent, "--timeout", "60"], 3)
    assert took < 10
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line] == ["Aborted!"]


@pytest.mark.spark
def test_ctrl_c_in_pipeline_plan_is_one_line(tmp_path: Path) -> None:
    plan = tmp_path / "assignment.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    args = ["pipeline", "plan", "--input", str(plan), "--broker", "1", "--broker", "2",
            "--out", str(tmp_path / "out")]  # fmt: skip
    done, took = _interrupted(args, 8)  # the JVM is starting or the job running
    assert took < 10
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "py4j" not in done.stderr
    # ours, or (while PySpark's handler is the installed one, as SparkContext starts) click's
    last = done.stderr.splitlines()[-1]
    assert last in ("Aborted! (the output directory may hold a partial result)", "Aborted!"), last
