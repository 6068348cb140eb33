"""Fixtures shared by the controller's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.controller.helpers import InProcessCluster, start_cluster


@pytest.fixture
def cluster_brokers() -> int:
    """How many brokers ``cluster`` starts (a module overrides this fixture to change it)."""
    return 3


@pytest.fixture
async def cluster(tmp_path: Path, cluster_brokers: int) -> AsyncIterator[InProcessCluster]:
    """A controller and ``cluster_brokers`` real brokers in this event loop (start_cluster)."""
    c = await start_cluster(tmp_path, brokers=cluster_brokers)
    try:
        yield c
    finally:
        await c.stop()
