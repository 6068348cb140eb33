"""A broker's state dir (``--state-dir``, kmeta.server.state_dir), with real processes: a
broker killed (-9) and started again on its dir registers at once, well inside its old
session; a second live process with the id and another dir is still refused
DUPLICATE_BROKER_REGISTRATION; a second process on a locked dir stops with one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kmeta.cli.cluster.cluster_config import cluster_id_of
from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

SESSION_MS = 30_000  # what a restart would wait out without its state dir


def _epoch(cluster: Cluster, broker_id: int) -> int | None:
    for b in cluster.controller_status()["brokers"]:
        if b["id"] == broker_id and b["state"] == "alive":
            return int(b["epoch"])
    return None


def _broker_argv(cluster: Cluster, broker_id: int, state_dir: Path) -> list[str]:
    cfg = cluster.config
    assert cluster.data_dir is not None
    return [
        sys.executable, "-m", "kmeta", "broker", "--broker-id", str(broker_id),
        "--listeners", f"PLAINTEXT://{cfg.host}:0,CONTROL://{cfg.host}:0",
        "--controller", cfg.controller_endpoints, "--cluster-id", cluster_id_of(cluster.data_dir),
        "--state-dir", str(state_dir), "--log-level", "INFO",
    ]  # fmt: skip


def test_a_killed_broker_restarted_on_its_dir_registers_at_once(tmp_path: Path) -> None:
    with Cluster(3, parent_dir=tmp_path, session_timeout_ms=SESSION_MS) as cluster:
        assert cluster.data_dir is not None
        state_dir = cluster.data_dir / "broker-2"
        record = json.loads((state_dir / "registration.json").read_text())
        before = _epoch(cluster, 2)
        assert record["brokerEpoch"] == before
        assert "node.id=2\n" in (state_dir / "meta.properties").read_text()
        cluster.create_topic("bounce", 6, 3)

        cluster.kill_broker(2)
        t0 = time.monotonic()
        cluster.start_broker(2, wait=False)
        while (now := _epoch(cluster, 2)) in (None, before):
            assert time.monotonic() - t0 < SESSION_MS / 3000, "not registered at once"
            time.sleep(0.05)
        assert now is not None
        assert before is not None
        assert now > before
        # the new process serves every broker and partition, and rejoined every ISR
        cluster.wait_converged(10)
        view = cluster.metadata(2)
        assert sorted(view.brokers) == [1, 2, 3]
        # (back in each ISR once it caught up with the leaders: an AlterPartition each)
        deadline = time.monotonic() + 20
        while not all(2 in st.isr for st in cluster.metadata(1).topics["bounce"].values()):
            assert time.monotonic() < deadline, cluster.metadata(1).topics["bounce"]
            time.sleep(0.1)
        assert json.loads((state_dir / "registration.json").read_text())["brokerEpoch"] == now


def test_a_second_process_is_refused_on_another_dir_and_on_a_locked_one(
    tmp_path: Path,
) -> None:
    with Cluster(2, parent_dir=tmp_path, session_timeout_ms=SESSION_MS) as cluster:
        assert cluster.data_dir is not None
        # the same dir, locked by the live broker 2: one line, non-zero exit, nothing touched
        locked = subprocess.run(
            _broker_argv(cluster, 2, cluster.data_dir / "broker-2"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert locked.returncode != 0
        lines = locked.stderr.strip().splitlines()
        assert len(lines) == 1, locked.stderr
        assert "is locked" in lines[0]
        # another broker's dir: one line too
        (tmp_path / "of-1").mkdir()
        (tmp_path / "of-1" / "meta.properties").write_text("version=1\nnode.id=1\n")
        wrong = subprocess.run(
            _broker_argv(cluster, 2, tmp_path / "of-1"), capture_output=True, text=True, timeout=60
        )
        assert wrong.returncode != 0
        assert wrong.stderr.strip().splitlines() == [
            f"Error: state dir {tmp_path / 'of-1'} belongs to broker 1, not broker 2"
        ]
        # a second live process with the id and a dir of its own: DUPLICATE until the
        # session of the live one ends (never, while it heartbeats); nothing changes
        epoch = _epoch(cluster, 2)
        log_path = tmp_path / "second.log"
        with log_path.open("wb") as log:
            second = subprocess.Popen(
                _broker_argv(cluster, 2, tmp_path / "second"), stdout=log, stderr=log
            )
        try:
            deadline = time.monotonic() + 20
            while "previous incarnation's session" not in log_path.read_text():
                assert second.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            time.sleep(1.0)  # (more attempts, all refused)
            assert _epoch(cluster, 2) == epoch
            assert sorted(cluster.metadata(1).brokers) == [1, 2]
            assert cluster.metadata(1).brokers[2][1] == cluster.address(2)[1]
        finally:
            second.kill()
            second.wait(10)
