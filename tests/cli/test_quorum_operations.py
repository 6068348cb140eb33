"""Operating a quorum (issue 33, point 6) with `kmeta cluster up --controllers 3`: standby
controllers serve /metrics and /status as standbys; after the active controller dies,
`kmeta status` through ZooKeeper or any controller shows the whole picture (the active
controller, the brokers, the lag); the banner and the ready file give every controller; a
killed broker is started again as a killed controller is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kmeta.cli.cluster.zookeeper import ZOOKEEPER_JAR
from tests.cli.helpers import free_base_port, wait_ready_file

pytestmark = pytest.mark.e2e


def _status(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "kmeta", "status", *args, "--json"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return str(resp.read().decode())


def _until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if value := check():
                return value
        except (OSError, AssertionError, KeyError):
            pass
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.timeout(180)
@pytest.mark.skipif(not ZOOKEEPER_JAR.exists(), reason="ZooKeeper is not installed")
def test_status_from_any_member_after_the_active_dies_and_brokers_come_back(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--controllers", "3", "--brokers", "2",
         "--base-port", str(free_base_port(2, 3)), "--data-dir", str(tmp_path / "data"),
         "--zookeeper-session-timeout-ms", "2000", "--session-timeout-ms", "3000",
         "--ready-file", str(ready), "--exit-after", "150"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        info = wait_ready_file(ready, proc, 40)
        controllers = {c["node_id"]: c for c in info["controllers"]}
        assert all(c["address"] and c["metrics_port"] for c in controllers.values())
        zookeeper = info["zookeeper"]
        # (the quorum's ZooKeeper is closed: its readers authenticate)
        zk = ("--zookeeper", zookeeper, "--zookeeper-credential-file", info["zookeeper_credential_file"])
        first = _status(*zk)
        active = first["quorum"]["active"]
        assert [b["id"] for b in first["brokers"]] == [1, 2]  # the active one's full view
        assert first["source"].startswith(f"active controller {active} at 127.0.0.1:")
        # every standby serves /status and /metrics as a standby
        standbys = sorted(set(controllers) - {active})
        for node in standbys:
            own = json.loads(_get(controllers[node]["metrics_port"], "/status"))
            assert (own["role"], own["node_id"], own["quorum"]["active"]) == ("standby", node, active)
            assert "kmeta_controller_standby 1.0" in _get(controllers[node]["metrics_port"], "/metrics")
        # the active controller dies: any member (and ZooKeeper) leads to the new one's view
        # (a new epoch: cluster up restarts the killed one within a second, and it races the
        # standbys for /controller when its old session ends, so it may win it back)
        os.kill(controllers[active]["pid"], signal.SIGKILL)
        after = _until(
            lambda: (s := _status(*zk))["quorum"]["active"] is not None
            and s["quorum"]["epoch"] > first["quorum"]["epoch"] and "brokers" in s and s,
            60, "a new active controller's full view",
        )  # fmt: skip
        new = after["quorum"]["active"]
        assert {b["id"] for b in after["brokers"]} == {1, 2}
        assert all("lag_versions" in b for b in after["brokers"])
        asked = next(n for n in standbys if n != new)
        through = _status("--controller", f"127.0.0.1:{controllers[asked]['metrics_port']}")
        assert through["quorum"]["active"] == new
        assert {b["id"] for b in through["brokers"]} == {1, 2}
        assert through["source"].endswith(f"asked standby {asked} at 127.0.0.1:{controllers[asked]['metrics_port']}")
        # a killed broker is started again, and registers again
        def broker_2() -> list[str]:  # cluster up's child that is broker 2
            found = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "kmeta broker --broker-id 2 "],
                                   capture_output=True, text=True)  # fmt: skip
            return found.stdout.split()

        broker_pids = broker_2()
        assert len(broker_pids) == 1, broker_pids
        os.kill(int(broker_pids[0]), signal.SIGKILL)
        _until(lambda: broker_2() not in ([], broker_pids), 30, "broker 2 started again")
        _until(
            lambda: all(b["state"] == "alive" for b in _status(*zk)["brokers"]),
            60, "broker 2 alive again",
        )
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    banner = out.splitlines()
    metrics_line = next(line for line in banner if line.startswith("metrics (/metrics, /status): "))
    for node, c in controllers.items():
        assert f"controller {node} 127.0.0.1:{c['metrics_port']}" in metrics_line
    assert f"kmeta cluster: controller {','.join(c['address'] for c in controllers.values())}" in out
    assert "a broker or a controller that dies is restarted" in out
    assert "restarting broker 2 in 1 s" in err
    assert "broker 2 restarted (pid " in err
