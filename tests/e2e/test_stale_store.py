"""A stale store never wipes a cluster. A controller started on a store older than what the
running brokers hold (its WAL deleted after a kill -9, controller.db restored alone from a
copy, its dir emptied with the same cluster id given) refuses to push: one line naming the
store and the broker, exit 1, and every broker keeps every topic. ``--accept-older-store``
pushes it: the brokers then drop what the store lacks."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kmeta.cli.cluster.cluster_config import controller_argv
from kmeta.testing import Cluster

TOPICS = [f"kept-{i:02d}" for i in range(50)]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2, log_level="INFO", session_timeout_ms=6_000) as c:
        yield c


def _controller_dir(cluster: Cluster) -> Path:
    assert cluster.data_dir is not None
    return cluster.data_dir / "controller"


def _create_topics(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(t, 1, 2) for t in TOPICS], request_timeout=30)
    for future in futures.values():
        future.result(timeout=30)
    cluster.wait_converged(20)


def _served(cluster: Cluster) -> dict[int, set[str]]:
    return {b: set(cluster.metadata(b).topics) for b in (1, 2)}


def _refused(cluster: Cluster, *extra: str) -> str:
    """Run the controller on its dir: it must refuse (exit 1) within the bound; its stderr."""
    argv = [*controller_argv(cluster.config, _controller_dir(cluster).parent), *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=40, env=dict(os.environ))
    assert done.returncode == 1, done.stderr[-2000:]
    return done.stderr


def _pushed_with_the_flag(cluster: Cluster) -> str:
    """Run the controller with --accept-older-store until every broker dropped the topics the
    store lacks; its stderr."""
    argv = [*controller_argv(cluster.config, _controller_dir(cluster).parent), "--accept-older-store"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60  # (a controller's start and push: seconds, more under load)
        while any(set(TOPICS) & topics for topics in _served(cluster).values()):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the older store was not pushed"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    return err


def _assert_one_line_refusal(stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, stderr[-2000:]
    line = lines[0]
    assert "controller.db" in line
    assert "is older than what broker" in line
    assert "--accept-older-store" in line
    assert "Traceback" not in stderr


def _restart_cleanly(cluster: Cluster) -> None:
    """A clean stop and start: the database checkpointed, this start's epoch in its WAL."""
    cluster.stop_controller()
    cluster.start_controller()


def _scenario_wal_deleted(cluster: Cluster) -> None:
    cluster.kill_controller()
    for name in ("controller.db-wal", "controller.db-shm"):
        (_controller_dir(cluster) / name).unlink()


def _scenario_restored_copy(cluster: Cluster) -> None:
    cluster.stop_controller()
    shutil.copy(_controller_dir(cluster).parent / "controller.db.copy", _controller_dir(cluster) / "controller.db")


def _scenario_emptied(cluster: Cluster) -> None:
    cluster.stop_controller()
    for path in _controller_dir(cluster).iterdir():
        path.unlink()


SCENARIOS: dict[str, Callable[[Cluster], None]] = {
    "wal-deleted-after-kill-9": _scenario_wal_deleted,
    "controller.db-restored-alone": _scenario_restored_copy,
    "dir-emptied": _scenario_emptied,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_older_store_refuses_to_push_and_the_brokers_keep_their_topics(
    cluster: Cluster, scenario: str
) -> None:
    _restart_cleanly(cluster)
    shutil.copy(
        _controller_dir(cluster) / "controller.db", _controller_dir(cluster).parent / "controller.db.copy"
    )
    _create_topics(cluster)
    before = _served(cluster)
    assert all(set(TOPICS) <= topics for topics in before.values())

    SCENARIOS[scenario](cluster)
    stderr = _refused(cluster)
    _assert_one_line_refusal(stderr)
    time.sleep(1.0)  # (anything pushed would have been applied by now)
    assert _served(cluster) == before

    # the operator's flag: it pushes the older store, the brokers drop what it lacks
    err = _pushed_with_the_flag(cluster)
    assert "pushing it anyway (--accept-older-store)" in err, err[-2000:]


@pytest.mark.timeout(120)
def test_accepting_an_older_store_whose_epoch_is_below_the_brokers(cluster: Cluster) -> None:
    """The brokers refuse a controller epoch below the one they have seen: a start with the
    flag on such a store raises the store's epoch and exits (one line); the next start with
    the flag pushes it, and the brokers take it."""
    _restart_cleanly(cluster)  # (epoch 2: the brokers have seen 2)
    _create_topics(cluster)
    _scenario_emptied(cluster)  # (its next start is epoch 1)
    stderr = _refused(cluster, "--accept-older-store")
    lines = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, stderr[-2000:]
    assert "controller epoch is now raised to 2: start it again" in lines[0]
    assert all(set(TOPICS) <= topics for topics in _served(cluster).values())

    err = _pushed_with_the_flag(cluster)
    assert "controller 3000 starting with epoch 3" in err, err[-2000:]
