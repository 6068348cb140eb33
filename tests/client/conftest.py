"""Fixtures for the client's tests: clusters of MiniBroker servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .mini_broker import ClusterState, MiniBroker, start_cluster


@pytest.fixture
async def cluster3() -> AsyncIterator[tuple[ClusterState, list[MiniBroker]]]:
    state, brokers = await start_cluster(3)
    yield state, brokers
    for b in brokers:
        await b.stop()
