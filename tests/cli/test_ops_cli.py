"""Operations CLI: logging set-up, config sources (flag > env > file > default), `kmeta status`,
`kmeta config show`, and one real controller process configured from a file and env."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kmeta.cli.daemons.broker import broker_command
from kmeta.cli.daemons.config_sources import effective_config
from kmeta.cli.daemons.logging_setup import parse_levels, setup_logging
from kmeta.cli.main import cli
from kmeta.protocol.errors import ErrorCode
from tests.controller.observed_cluster import ObservedCluster
from tests.helpers import free_port


# -- logging ------------------------------------------------------------------------------------
def test_parse_levels() -> None:
    assert parse_levels("info") == (logging.INFO, {})
    assert parse_levels("kmeta.net=debug,warning") == (logging.WARNING, {"kmeta.net": logging.DEBUG})
    assert parse_levels("WARN,kmeta.controller=ERROR") == (
        logging.WARNING,
        {"kmeta.controller": logging.ERROR},
    )
    for bad in ("loud", "kmeta.net=chatty", "=debug"):
        with pytest.raises(ValueError, match=r"log level|logger name"):
            parse_levels(bad)


def test_json_logs_with_a_level_per_component(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging("kmeta.net=debug,warning", "json", stream=out)
    logging.getLogger("kmeta.net.server").debug("net detail %d", 1)
    logging.getLogger("kmeta.controller").info("hidden: below warning")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("kmeta.server").exception("failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["level"], r["logger"], r["message"]) for r in lines] == [
        ("debug", "kmeta.net.server", "net detail 1"),
        ("error", "kmeta.server", "failed"),
    ]
    assert "RuntimeError: boom" in lines[1]["exc"]
    assert lines[0]["ts"].endswith("Z")


def test_text_logs_are_readable(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging("info", "text", stream=out)
    logging.getLogger("kmeta.server").info("broker %d up", 1)
    assert out.getvalue().rstrip().endswith("INFO    kmeta.server: broker 1 up")


def test_bad_log_level_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["broker", "--broker-id", "1", "--listeners", "P://h:1", "--log-level", "x=y"])
    assert result.exit_code == 2
    assert "unknown log level" in result.output


# -- configuration sources ------------------------------------------------------------------------
def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_flag_beats_env_beats_file_beats_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = _write(
        tmp_path / "kmeta.toml",
        'log-level = "debug"\n'
        "[broker]\n"
        "broker_id = 7\n"
        'listeners = ["PLAINTEXT://127.0.0.1:9092", "CONTROL://127.0.0.1:9192"]\n'
        "metrics-port = 9300\n"
        'cluster-id = "from-file"\n'
        "zero-copy = false\n"
        "[controller]\n"
        'data_dir = "/nowhere"\n',
    )
    monkeypatch.setenv("KMETA_BROKER_CLUSTER_ID", "from-env")
    monkeypatch.setenv("KMETA_BROKER_METRICS_PORT", "9301")
    rows = {r["name"]: r for r in effective_config(broker_command, ["--config", conf, "--metrics-port", "9400"])}
    assert (rows["metrics_port"]["value"], rows["metrics_port"]["source"]) == (9400, "flag")
    assert (rows["cluster_id"]["value"], rows["cluster_id"]["source"]) == (
        "from-env",
        "env KMETA_BROKER_CLUSTER_ID",
    )
    assert (rows["broker_id"]["value"], rows["broker_id"]["source"]) == (7, f"file {conf}")
    assert rows["listeners"]["value"] == "PLAINTEXT://127.0.0.1:9092,CONTROL://127.0.0.1:9192"
    assert rows["log_level"]["value"] == "debug"  # a top-level key applies to every daemon
    assert (rows["max_frame_size"]["source"], rows["log_format"]["value"]) == ("default", "text")
    assert (rows["zero_copy"]["value"], rows["zero_copy"]["source"]) == (False, f"file {conf}")
    assert "data_dir" not in rows  # the [controller] table is not the broker's


def test_unknown_setting_in_the_file_is_refused(tmp_path: Path) -> None:
    conf = _write(tmp_path / "bad.toml", "[broker]\nbroker_idd = 1\n")
    result = CliRunner().invoke(cli, ["broker", "--config", conf])
    assert result.exit_code == 2
    assert "unknown setting 'broker_idd'" in result.output
    broken = _write(tmp_path / "broken.toml", "[broker\n")
    assert CliRunner().invoke(cli, ["broker", "--config", broken]).exit_code == 2


def test_config_show_command(tmp_path: Path) -> None:
    conf = _write(tmp_path / "c.toml", '[controller]\ndata-dir = "/var/lib/kmeta"\nnode_id = 3001\n')
    result = CliRunner().invoke(
        cli, ["config", "show", "controller", "--config", conf, "--json"], env={"KMETA_CONTROLLER_LOG_FORMAT": "json"}
    )
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["node_id"] == {"name": "node_id", "value": 3001, "source": f"file {conf}"}
    assert rows["log_format"]["source"] == "env KMETA_CONTROLLER_LOG_FORMAT"
    assert rows["metrics_port"] == {"name": "metrics_port", "value": None, "source": "default"}
    table = CliRunner().invoke(cli, ["config", "show", "broker"])
    assert table.exit_code == 0
    assert "missing" in table.output  # --broker-id and --listeners are required


# -- a real controller process, configured by file and env ------------------------------------------


def test_controller_process_from_file_and_env(tmp_path: Path) -> None:
    kafka_port, metrics_port = free_port(), free_port()
    conf = _write(
        tmp_path / "ctl.toml",
        f'[controller]\nlisteners = "CONTROLLER://127.0.0.1:{kafka_port}"\n'
        f'data-dir = "{tmp_path / "data"}"\nmetrics_port = {metrics_port}\n',
    )
    env = dict(os.environ, KMETA_CONTROLLER_LOG_FORMAT="json", KMETA_CONTROLLER_LOG_LEVEL="info")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "controller", "--config", conf],
        env=env,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        body = b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as r:
                    body = r.read()
                break
            except OSError:
                assert proc.poll() is None, "controller exited"
                time.sleep(0.1)
        assert b"kmeta_controller_event_queue_size" in body
        assert b"kmeta_controller_epoch 1.0" in body
        result = CliRunner().invoke(cli, ["status", "--controller", f"127.0.0.1:{metrics_port}", "--json"])
        assert result.exit_code == 0, result.output
        st = json.loads(result.output)
        assert (st["brokers"], st["topics"], st["controller"]["epoch"]) == ([], 0, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    assert lines, "no log lines"
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert any("controller listening" in line["message"] for line in lines)
    assert [line["message"] for line in lines][-2:] == ["SIGTERM: shutting down", "controller stopped"]
    assert proc.returncode == 0
    # the state-change log is its own file, not mixed into the main log
    assert (tmp_path / "data" / "state-change.log").exists()
    assert not any(line["message"].startswith("{") for line in lines)


# -- kmeta status against an in-process cluster ------------------------------------------------------
@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ObservedCluster]:
    c = await ObservedCluster(tmp_path, brokers=2).start()
    try:
        yield c
    finally:
        await c.stop()


async def test_status_from_controller_and_from_bootstrap(cluster: ObservedCluster) -> None:
    assert await cluster.create_topic("events", 4) == ErrorCode.NONE
    runner = CliRunner()
    ctl = f"127.0.0.1:{cluster.controller_metrics_port}"
    # the CLI blocks: run it in a thread so this loop keeps serving the cluster
    as_json = await asyncio.to_thread(runner.invoke, cli, ["status", "--controller", ctl, "--json"])
    assert as_json.exit_code == 0, as_json.output
    st = json.loads(as_json.output)
    assert [(b["id"], b["state"], b["lag_versions"], b["queue_size"]) for b in st["brokers"]] == [
        (1, "alive", 0, 0),
        (2, "alive", 0, 0),
    ]
    assert (st["topics"], st["partitions"], st["offline_partitions"]) == (1, 4, 0)

    table = await asyncio.to_thread(runner.invoke, cli, ["status", "--controller", ctl])
    assert table.exit_code == 0, table.output
    assert "topics 1  partitions 4  offline 0  under-replicated 0" in table.output
    assert "alive" in table.output

    boot = f"127.0.0.1:{cluster.brokers[1].port('PLAINTEXT')}"
    view = await asyncio.to_thread(runner.invoke, cli, ["status", "--bootstrap-server", boot, "--json"])
    assert view.exit_code == 0, view.output
    bv = json.loads(view.output)
    assert [b["id"] for b in bv["brokers"]] == [1, 2]
    assert (bv["topics"], bv["partitions"], bv["under_replicated_partitions"]) == (1, 4, 0)

    none = await asyncio.to_thread(runner.invoke, cli, ["status"])
    assert none.exit_code == 2
    down = await asyncio.to_thread(runner.invoke, cli, ["status", "--controller", f"127.0.0.1:{free_port()}"])
    assert down.exit_code == 1
    assert "cannot get the status" in down.output


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_status_watch_piped_prints_a_view_per_interval_and_ctrl_c_ends_it(cluster: ObservedCluster) -> None:
    """Piped, a live view would draw nothing: each refresh is printed instead; Ctrl-C (SIGINT)
    ends both forms with status 0."""
    ctl = f"127.0.0.1:{cluster.controller_metrics_port}"
    for extra in ((), ("--json",)):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kmeta", "status", "--controller", ctl, "--watch", "--interval", "0.2", *extra,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            # as a terminal's Ctrl-C finds it: a suite started in the background by a
            # non-interactive shell has SIGINT ignored, and Python keeps an inherited SIG_IGN
            preexec_fn=_sigint_default,
        )  # fmt: skip
        # Ctrl-C once the watch is under way: its first view printed (a loaded box can take
        # seconds to start Python, and an interrupt during start-up is not what this tests)
        assert proc.stdout is not None
        first = await asyncio.wait_for(proc.stdout.readline(), 30)
        await asyncio.sleep(1.0)  # several refreshes
        proc.send_signal(signal.SIGINT)
        rest, err = await asyncio.wait_for(proc.communicate(), 30)
        out = first + rest
        assert proc.returncode == 0, err.decode()[-2000:]
        assert b"Aborted" not in out + err
        if extra:
            views = [json.loads(line) for line in out.decode().splitlines()]
            assert all(v["brokers"][0]["state"] == "alive" for v in views)
        else:
            views = [line for line in out.decode().splitlines() if line.startswith("topics ")]
        assert len(views) >= 2, out.decode()
