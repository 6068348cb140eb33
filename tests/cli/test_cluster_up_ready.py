"""`kmeta cluster up --ready-file F --exit-after S`: what a CI job in any language relies on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.cli.helpers import free_base_port, wait_ready_file

pytestmark = pytest.mark.e2e


def test_ready_file_describes_a_serving_cluster_and_goes_with_it(tmp_path: Path) -> None:
    base = free_base_port(3)
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--base-port", str(base),
         "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready), "--exit-after", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = wait_ready_file(ready, proc, 30)
        assert info["bootstrap_servers"] == f"127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}"
        assert info["controller"] == f"127.0.0.1:{base + 1000}"
        assert [b["metrics_port"] for b in info["brokers"]] == [base + 200, base + 201, base + 202]
        assert info["data_dir"] == str(tmp_path / "data")
        assert info["cluster_id"] == (tmp_path / "data" / "cluster.id").read_text().strip()
        assert info["accept_produce"] is False
        # already serving when the file appears: any client sees the whole cluster at once
        md = AdminClient({"bootstrap.servers": info["bootstrap_servers"]}).list_topics(timeout=5)
        assert sorted(md.brokers) == [1, 2, 3]
        assert md.cluster_id == info["cluster_id"]
        url = f"http://127.0.0.1:{info['controller_metrics_port']}/status"
        with urllib.request.urlopen(url, timeout=5) as answer:
            status = json.loads(answer.read())
        assert [b["state"] for b in status["brokers"]] == ["alive"] * 3
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "ready in" in out
    assert not ready.exists()  # a stopped cluster leaves no ready file behind


def test_exit_after_bounds_the_cluster_life(tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--brokers", "1", "--no-metrics",
         "--base-port", str(free_base_port(1)), "--data-dir", str(tmp_path), "--exit-after", "1.5"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "--exit-after 1.5 s: stopping the cluster" in proc.stdout
    assert "cluster stopped" in proc.stdout
    assert time.monotonic() - t0 < 20
    bad = subprocess.run(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--exit-after", "0"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--exit-after" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_accept_produce_lets_a_producer_deliver(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--brokers", "1", "--accept-produce",
         "--base-port", str(free_base_port(1)), "--data-dir", str(tmp_path / "data"),
         "--ready-file", str(ready), "--exit-after", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = wait_ready_file(ready, proc, 30)
        assert info["accept_produce"] is True
        admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"]})
        admin.create_topics([NewTopic("events", 1, 1)])["events"].result(timeout=15)
        reports: list[tuple[object, int]] = []
        producer = Producer({"bootstrap.servers": info["bootstrap_servers"], "acks": "all"})
        for i in range(5):
            producer.produce("events", b"e-%d" % i, on_delivery=lambda e, m: reports.append((e, m.offset())))
        assert producer.flush(15) == 0
        assert reports == [(None, i) for i in range(5)]
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
