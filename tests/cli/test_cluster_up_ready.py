"""`kmeta cluster up --ready-file F --exit-after S`: what a CI job in any language relies on."""

from __future__ import annotations

import json
import os
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


def _read_back(bootstrap: str, topic: str, partitions: int, n: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the first ``n`` records, partitions assigned from 0."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            got += [(m.partition(), m.offset(), m.value()) for m in consumer.consume(10, timeout=1) if m.error() is None]
        return sorted(got)
    finally:
        consumer.close()


def test_up_brokers_auto_create_and_keep_their_logs_in_their_state_dirs(tmp_path: Path) -> None:
    """A producer's first record creates its topic (auto.create.topics.enable, --num-partitions);
    the broker keeps the records in <data dir>/broker-1/logs and, restarted on the same data
    dir, serves them again."""
    from confluent_kafka import Producer

    ready, data = tmp_path / "ready.json", tmp_path / "data"
    argv = [sys.executable, "-m", "kmeta", "cluster", "up", "--brokers", "1", "--num-partitions", "2",
            "--log-memory-max-bytes", str(64 << 20), "--base-port", str(free_base_port(1)),
            "--data-dir", str(data), "--ready-file", str(ready), "--exit-after", "60"]  # fmt: skip
    sent = [(i % 2, i // 2, b"e-%d" % i) for i in range(6)]
    reports: list[tuple[object, int, int]] = []
    for run in (1, 2):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            info = wait_ready_file(ready, proc, 30)
            bootstrap = str(info["bootstrap_servers"])
            if run == 1:
                producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
                for partition, _, value in sent:
                    producer.produce("events", value, partition=partition,
                                     on_delivery=lambda e, m: reports.append((e, m.partition(), m.offset())))  # fmt: skip
                assert producer.flush(20) == 0
                assert sorted(reports) == [(None, p, o) for p, o, _ in sorted(sent)]
                assert {"events-0", "events-1"} <= set(os.listdir(data / "broker-1" / "logs"))
            assert _read_back(bootstrap, "events", 2, len(sent)) == sorted(sent)
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
