"""A partition log in each storage mode: every test taking ``mode`` runs twice, once in memory
and once with segment files in a temporary log dir."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kmeta.log import LogConfig, LogManager, PartitionLog

Make = Callable[..., PartitionLog]


@pytest.fixture(params=["memory", "files"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def manager(mode: str, tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(str(tmp_path / "logs") if mode == "files" else None, 256 * 1024 * 1024)
    try:
        yield manager
    finally:
        manager.close()


@pytest.fixture
def make(manager: LogManager) -> Make:
    """``make(**config)``: a fresh log ``t-0`` (``t-1``, ... on later calls) with those
    LogConfig fields."""
    count = [0]

    def make(topic: str = "t", **config: int | str) -> PartitionLog:
        log = manager.get_or_create(topic, count[0], None, LogConfig(**config))  # type: ignore[arg-type]
        count[0] += 1
        return log

    return make
