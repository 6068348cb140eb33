"""One local Spark session for the whole test run (JVM start-up is the expensive part)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kmeta.pipeline.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    session = build_session("kmeta-tests", master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
