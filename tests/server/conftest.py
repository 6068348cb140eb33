"""Fixtures shared by the broker's tests."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def broker_heap_only() -> Iterator[None]:
    """Freeze what earlier tests left in this process, so a full collection over it does not
    land inside (and get counted as) the broker step a test measures."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
