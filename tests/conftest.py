"""Shared fixtures. Servers bind to 127.0.0.1 on ports the OS picks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.cli.zookeeper import LocalZooKeeper


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    """A real ZooKeeper server (Debian's package, which ``make`` installs) on a free loopback
    port, its data in tmp_path; killed afterwards, whatever the test did."""
    server = LocalZooKeeper(tmp_path / "zookeeper")
    try:
        server.start()
        yield server
    finally:
        server.stop()
