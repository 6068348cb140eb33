"""Files that hold secrets are their owner's only: the controller's database and its WAL (the
salted SCRAM keys) 0600 in a 0700 dir, a broker's state dir 0700 with every file under it 0600
(its partitions' records included). A dir from before, left group- and world-readable, is
closed on the next start."""

from __future__ import annotations

import stat
from pathlib import Path

from confluent_kafka import Producer

from kmeta.testing import Cluster


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _open_to_others(root: Path) -> list[str]:
    """Every path under ``root`` (itself included) that anyone but its owner may use."""
    found = []
    for path in [root, *root.rglob("*")]:
        wanted = 0o700 if path.is_dir() else 0o600
        if _mode(path) & ~wanted:
            found.append(f"{path.relative_to(root.parent)} {oct(_mode(path))}")
    return found


def _produce(cluster: Cluster, topic: str, n: int) -> None:
    producer = Producer({**cluster.client_config(), "acks": "all", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, f"secret-{i}".encode(), partition=i % 2)
    assert producer.flush(20) == 0


def test_controller_and_broker_files_are_the_owners_only() -> None:
    with Cluster(brokers=2, secure=True, log_level="WARNING") as cluster:
        cluster.create_topic("modes", 2, 2)
        _produce(cluster, "modes", 20)
        assert cluster.data_dir is not None
        controller = cluster.data_dir / "controller"
        db = controller / "controller.db"
        assert (controller / "controller.db-wal").exists()  # (the WAL mode is on)
        assert _mode(controller) == 0o700  # (its state-change log is unreachable too)
        assert {p.name: _mode(p) for p in controller.glob("controller.db*")} == {
            "controller.db": 0o600, "controller.db-wal": 0o600, "controller.db-shm": 0o600
        }
        for i in (1, 2):
            broker = cluster.data_dir / f"broker-{i}"
            segments = list((broker / "logs").rglob("*.log"))
            assert segments, f"broker {i} wrote no segment"
            assert _open_to_others(broker) == []

        # an older install's modes: opened up, then a restart closes them again
        cluster.stop_controller()
        controller.chmod(0o755)
        db.chmod(0o644)
        broker_dir = cluster.data_dir / "broker-1"
        broker_dir.chmod(0o755)
        (broker_dir / "logs").chmod(0o755)
        cluster.start_controller()
        assert _mode(controller) == 0o700
        assert _mode(db) == 0o600
        assert _mode(controller / "controller.db-wal") == 0o600
        cluster.restart_broker(1)
        assert _mode(broker_dir) == 0o700
        assert _mode(broker_dir / "logs") == 0o700
