"""The pytest plugin, as a user gets it: entry point only, run under pytest-xdist with -n 2."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

USER_TESTS = '''
import json
import os
from pathlib import Path

OUT = Path(os.environ["KMETA_PLUGIN_OUT"])


def record(cluster, name):
    view = cluster.metadata(1)
    (OUT / f"{name}.json").write_text(json.dumps({
        "worker": os.environ.get("PYTEST_XDIST_WORKER"),
        "bootstrap": cluster.bootstrap_servers,
        "controller": cluster.controller_address,
        "data_dir": str(cluster.data_dir),
        "brokers": sorted(view.brokers),
    }))


def test_one(kmeta_cluster):
    record(kmeta_cluster, "one")


def test_two(kmeta_cluster):
    record(kmeta_cluster, "two")


def test_three(kmeta_cluster_factory):
    with kmeta_cluster_factory(brokers=2) as cluster:
        record(cluster, "three")


def test_fails(kmeta_cluster):
    kmeta_cluster.create_topic("seen-before-the-failure", 1, 1)
    assert False, "failing on purpose"
'''


def test_fixtures_under_xdist_with_a_failure_report_and_kept_dirs(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "--kmeta-keep",
         "-rA", "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_user.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=90,
        env={**__import__("os").environ, "KMETA_PLUGIN_OUT": str(out)},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 failed, 3 passed" in proc.stdout, proc.stdout[-3000:]

    runs = {name: json.loads((out / f"{name}.json").read_text()) for name in ("one", "two", "three")}
    assert {r["worker"] for r in runs.values()} == {"gw0", "gw1"}
    assert runs["three"]["brokers"] == [1, 2]
    ports = [s for r in runs.values() for s in (*r["bootstrap"].split(","), r["controller"])]
    assert len(ports) == len(set(ports)) == 3 + 3 + 2 + 3  # distinct across workers
    dirs = {r["data_dir"] for r in runs.values()}
    assert len(dirs) == 3
    assert not any(Path(d).exists() for d in dirs)  # passing tests leave nothing

    # the failing test's report: every daemon's last lines, and the kept data dir
    assert "kmeta cluster 1 logs (call)" in proc.stdout
    for name in ("controller", "broker-1", "broker-2", "broker-3"):
        assert f"--- {name} (running), last 20 lines:" in proc.stdout
    assert "broker 3 registered with epoch" in proc.stdout
    kept = re.search(r"data dir: (\S+) \(kept: --kmeta-keep\)", proc.stdout)
    assert kept is not None, proc.stdout[-3000:]
    kept_dir = Path(kept.group(1))
    try:
        assert (kept_dir / "logs" / "controller.log").is_file()
        assert (kept_dir / "controller" / "controller.db").is_file()
        assert "seen-before-the-failure" in (kept_dir / "controller" / "state-change.log").read_text()
    finally:
        shutil.rmtree(kept_dir, ignore_errors=True)


FAILED_START = '''
def test_cluster_does_not_start(kmeta_cluster_factory):
    kmeta_cluster_factory(brokers=2, log_level="LOUD")
'''


def test_a_failed_start_reports_the_daemons_logs_and_keeps_its_dir(tmp_path: Path) -> None:
    (tmp_path / "test_start.py").write_text(FAILED_START)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--kmeta-keep",
         "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_start.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "1 failed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    # every daemon refuses the level; whichever exits first is the one reported (the others
    # may be stopped before they write their own line), so its log is the one checked
    exited = re.search(r"(controller|broker-\d+) exited with 2 while the cluster was starting",
                       proc.stdout)  # fmt: skip
    assert exited is not None, proc.stdout[-3000:]
    daemon = exited.group(1)
    assert f"--- {daemon}, last 20 lines:" in proc.stdout
    assert "Invalid value for '--log-level'" in proc.stdout  # why, in the daemon's words
    kept = re.search(r"kmeta cluster data dir: (\S+) \(kept\)", proc.stdout)
    assert kept is not None, proc.stdout[-3000:]
    assert "Invalid value" in (Path(kept.group(1)) / "logs" / f"{daemon}.log").read_text()


def test_the_plugin_imports_no_daemon_code_until_a_fixture_is_used() -> None:
    probe = (
        "import sys, kmeta.testing.pytest_plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith(('kmeta.cli', 'kmeta.net', "
        "'kmeta.testing.cluster'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
