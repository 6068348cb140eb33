"""kmeta as a test fixture: :class:`Cluster` (real daemons on loopback) and a pytest plugin.

Nothing in kmeta imports this package; it builds on :mod:`kmeta.cli` (how ``kmeta cluster up``
starts daemons). See docs/testing.md. The names below are imported on first use, so the pytest
plugin (``kmeta.testing.pytest_plugin``, loaded by every pytest run where kmeta is installed)
costs a run that uses no kmeta fixture nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kmeta.testing.cluster import Cluster
    from kmeta.testing.requests import BrokerView, KafkaRequestError, PartitionView

__all__ = ["BrokerView", "Cluster", "KafkaRequestError", "PartitionView"]

_HOMES = {
    "Cluster": "cluster", "BrokerView": "requests",
    "KafkaRequestError": "requests", "PartitionView": "requests",
}  # fmt: skip


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'kmeta.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kmeta.testing.{_HOMES[name]}"), name)
